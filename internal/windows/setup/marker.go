package setup

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/agentbox/agentbox/internal/windows/strictjson"
)

// Marker records a completed setup. agentbox reads it before every
// elevated run (see [CheckMarker]) and doctor shows it.
type Marker struct {
	Version    int       `json:"version"`
	CreatedAt  time.Time `json:"created_at"`
	OfflineSID string    `json:"offline_sid"`
	OnlineSID  string    `json:"online_sid"`
	GroupSID   string    `json:"group_sid"`
	// Runner is the path of the runner copy the sandbox users execute.
	Runner string `json:"runner"`
	// ProxyPorts are the loopback TCP ports left open to the Offline user
	// (for the allow-list proxy); empty means loopback is closed too.
	ProxyPorts []int `json:"proxy_ports,omitempty"`
	// RealUserSID is the account setup was run for.
	RealUserSID string `json:"real_user_sid"`
}

// ParseMarker decodes a marker file strictly.
func ParseMarker(b []byte) (*Marker, error) {
	return decodeStrict[Marker](b, "setup marker")
}

// decodeStrict decodes b into a new T with strictjson; what names the
// file (or payload) in errors. Setup's files and payload all go through
// it, so each refuses unknown fields and trailing data alike.
func decodeStrict[T any](b []byte, what string) (*T, error) {
	v := new(T)
	if err := strictjson.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return v, nil
}

// Marshal encodes the marker.
func (m *Marker) Marshal() ([]byte, error) { return json.MarshalIndent(m, "", "  ") }

// CheckMarker says whether elevated mode can run with marker m (nil when
// the file is missing) for a run whose proxy listens on proxyPorts (nil
// for a run without one): each must be one the firewall leaves open. The
// error wraps [ErrMissing] or [ErrOutdated] and says what to do.
func CheckMarker(m *Marker, proxyPorts []int) error {
	if m == nil {
		return ErrMissing
	}
	if m.Version != Version {
		return fmt.Errorf("%w (setup version %d, this agentbox needs %d)", ErrOutdated, m.Version, Version)
	}
	if m.OfflineSID == "" || m.OnlineSID == "" || m.Runner == "" {
		return fmt.Errorf("%w (marker is incomplete)", ErrOutdated)
	}
	for _, p := range normPorts(proxyPorts) {
		if !slices.Contains(m.ProxyPorts, p) {
			return fmt.Errorf("%w (the firewall leaves loopback ports %s open to %s, the run's proxy needs %d)", ErrOutdated, portsOrNone(m.ProxyPorts), OfflineUser, p)
		}
	}
	return nil
}

func portsOrNone(p []int) string {
	if len(p) == 0 {
		return "none"
	}
	return PortList(normPorts(p))
}

func normPorts(p []int) []int {
	p = slices.Clone(p)
	slices.Sort(p)
	return slices.Compact(p)
}
