package netproxy

import (
	"cmp"
	"slices"
	"sync"
)

// Allowed is one destination the command reached, in the run report.
type Allowed struct {
	Host  string `json:"host"`
	Port  uint16 `json:"port"`
	Count int    `json:"count"`
}

// Denied is one refused destination and why, in the run report. Port is
// 0 (and left out) for a refused name look-up.
type Denied struct {
	Host   string `json:"host"`
	Port   uint16 `json:"port,omitempty"`
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// Report is the "network" section of the run report. Both lists are
// non-nil so that JSON shows [] rather than null.
type Report struct {
	Allowed []Allowed `json:"allowed"`
	Denied  []Denied  `json:"denied"`
}

// maxEntries bounds the distinct destinations a Recorder keeps, so that a
// command cannot grow agentbox's memory without limit by asking for
// endless distinct names; later ones are counted under overflowHost.
const maxEntries = 4096

const overflowHost = "(other destinations)"

// Recorder counts every decision of a run. It is safe for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	allowed map[Allowed]int // Count unused in the key
	denied  map[Denied]int
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{allowed: map[Allowed]int{}, denied: map[Denied]int{}}
}

// Allow records a connection made to host:port.
func (r *Recorder) Allow(host string, port uint16) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := Allowed{Host: host, Port: port}
	if _, ok := r.allowed[k]; !ok && len(r.allowed) >= maxEntries {
		k = Allowed{Host: overflowHost}
	}
	r.allowed[k]++
}

// Deny records a refused request for host:port.
func (r *Recorder) Deny(host string, port uint16, reason string) { r.DenyN(host, port, reason, 1) }

// DenyN records n refused requests for host:port.
func (r *Recorder) DenyN(host string, port uint16, reason string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := Denied{Host: host, Port: port, Reason: reason}
	if _, ok := r.denied[k]; !ok && len(r.denied) >= maxEntries {
		k = Denied{Host: overflowHost, Reason: "too many distinct refusals to list"}
	}
	r.denied[k] += n
}

// Report returns what was recorded, sorted by host, port and reason.
func (r *Recorder) Report() Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := Report{Allowed: []Allowed{}, Denied: []Denied{}}
	for k, n := range r.allowed {
		k.Count = n
		rep.Allowed = append(rep.Allowed, k)
	}
	for k, n := range r.denied {
		k.Count = n
		rep.Denied = append(rep.Denied, k)
	}
	slices.SortFunc(rep.Allowed, func(a, b Allowed) int {
		return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.Port, b.Port))
	})
	slices.SortFunc(rep.Denied, func(a, b Denied) int {
		return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Reason, b.Reason))
	})
	return rep
}
