// Package fsreport decides which of a sandboxed command's file operations
// the sandbox refused, and why, for the "filesystem" section of the run
// report. It only reports: enforcement is the backends' (read-only mounts,
// Landlock, seccomp), so a wrong answer here costs a report line, never a
// wall.
//
// A backend's observer (on Linux, package unixsock's) sees each
// write-intent operation with the path as the command used it, made
// absolute, and the real path it resolves to (symlinks followed as the
// operation would). [Recorder.Record] asks [Rules] about the real path and
// counts the refused ones by operation, path and reason.
package fsreport

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/internal/wire"
)

// Operations, the "op" of a refusal.
const (
	OpWrite    = "write"    // open for writing, truncate
	OpCreate   = "create"   // a new file, directory or device node
	OpDelete   = "delete"   // unlink, rmdir
	OpRename   = "rename"   // either end of a rename
	OpLink     = "link"     // a new hard or symbolic link
	OpMetadata = "metadata" // chmod, chown, utimes, xattrs
	OpRead     = "read"     // a hidden path (see [Rules].Hidden)
)

// Reasons, the "reason" of a refusal: the rule that refused it.
const (
	ReasonOutside = "outside the writable roots"
	ReasonGit     = ".git without allow_git_writes"
	ReasonHidden  = "hidden"
	// ReasonProtectedPrefix starts the reason of a protected path inside
	// a writable root; the name follows ([ReasonProtected]).
	ReasonProtectedPrefix = "protected path "
)

// ReasonProtected is the reason for a write to the protected path name
// (".agents", ".vscode/settings.json", ".git/hooks").
func ReasonProtected(name string) string { return ReasonProtectedPrefix + name }

// Carve is a read-only path inside (or outside) the writable roots and the
// reason a write beneath it is refused.
type Carve struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Rules is what the sandbox lets the command write, as the observer
// judges it: beneath a Writable path and beneath no ReadOnly carve.
type Rules struct {
	// Writable are the directories and files the command may write
	// beneath: the writable roots, the private temporary directories,
	// the devices every shell writes to.
	Writable []string `json:"writable"`
	// ReadOnly are the carve-outs; the innermost one containing a path
	// gives the reason.
	ReadOnly []Carve `json:"read_only,omitempty"`
	// Hidden are paths the command cannot see at all (secrets); a read
	// beneath one is refused with [ReasonHidden]. The backend's observer
	// reports reads only for these.
	Hidden []string `json:"hidden,omitempty"`
}

// Refused returns why a write at real (absolute, symlinks resolved) is
// refused, or "" when it is allowed.
func (r *Rules) Refused(real string) string {
	if r == nil || !filepath.IsAbs(real) {
		return ""
	}
	real = filepath.Clean(real)
	if r.hidden(real) {
		return ReasonHidden
	}
	best := -1
	for i, c := range r.ReadOnly {
		if fspath.Within(real, c.Path) && (best < 0 || len(c.Path) > len(r.ReadOnly[best].Path)) {
			best = i
		}
	}
	if best >= 0 {
		return r.ReadOnly[best].Reason
	}
	for _, w := range r.Writable {
		if fspath.Within(real, w) {
			return ""
		}
	}
	return ReasonOutside
}

// RefusedRead returns [ReasonHidden] for a read beneath a hidden path,
// "" otherwise.
func (r *Rules) RefusedRead(real string) string {
	if r != nil && filepath.IsAbs(real) && r.hidden(filepath.Clean(real)) {
		return ReasonHidden
	}
	return ""
}

func (r *Rules) hidden(p string) bool {
	return slices.ContainsFunc(r.Hidden, func(h string) bool { return fspath.Within(p, h) })
}

// Denied is one refusal of the report: what was refused, where, why, and
// how often.
type Denied struct {
	Op     string `json:"op"`
	Path   string `json:"path"`
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// MaxDenied bounds the distinct refusals a report lists; the ones beyond
// are counted in one more entry (path [OtherPaths]), so a command that
// tries a million paths cannot grow the report without limit.
const MaxDenied = 256

// OtherPaths is the path of the entry that counts the refusals beyond
// [MaxDenied].
const OtherPaths = "(other paths)"

// Recorder collects a command's refusals. It is safe for concurrent use.
type Recorder struct {
	rules *Rules
	mu    sync.Mutex
	index map[Denied]int // key (Count 0) → position in list
	list  []Denied
	extra int
}

// NewRecorder returns a recorder judging by rules.
func NewRecorder(rules *Rules) *Recorder {
	return &Recorder{rules: rules, index: map[Denied]int{}}
}

// Record judges one operation: op at path (as the command spelled it,
// made absolute) whose real path is real. It reports whether the
// operation is refused, and records it if so.
func (rc *Recorder) Record(op, path, real string) bool {
	if rc == nil {
		return false
	}
	var why string
	if op == OpRead {
		why = rc.rules.RefusedRead(real)
	} else {
		why = rc.rules.Refused(real)
	}
	if why == "" {
		return false
	}
	rc.Add(op, path, why)
	return true
}

// Add records a refusal the caller has judged itself (a metadata call the
// supervisor refused).
func (rc *Recorder) Add(op, path, reason string) { rc.AddCount(op, path, reason, 1) }

// AddCount records n refusals of one kind at once (the opens of a hidden
// path, counted by the kernel).
func (rc *Recorder) AddCount(op, path, reason string, n int) {
	if rc == nil || n <= 0 {
		return
	}
	path = clean(path)
	k := Denied{Op: op, Path: path, Reason: reason}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if i, ok := rc.index[k]; ok {
		rc.list[i].Count += n
		return
	}
	if len(rc.list) >= MaxDenied {
		rc.extra += n
		return
	}
	rc.index[k] = len(rc.list)
	k.Count = n
	rc.list = append(rc.list, k)
}

// List returns the refusals in the order they first happened, the ones
// beyond [MaxDenied] counted in a last entry. It is never nil.
func (rc *Recorder) List() []Denied {
	if rc == nil {
		return []Denied{}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := append([]Denied{}, rc.list...)
	if rc.extra > 0 {
		out = append(out, Denied{Op: OpWrite, Path: OtherPaths, Reason: "not listed: more than " + strconv.Itoa(MaxDenied) + " distinct refusals", Count: rc.extra})
	}
	return out
}

// Fit returns ds, or as many of its first entries as leave room for one
// more counting the rest, so that its encoding ([AppendDenied]) takes at
// most budget bytes (when budget holds that one entry at least): for a
// channel that carries a bounded message (a session's answer, a lone
// run's status frame, the resident helper's reply).
func Fit(ds []Denied, budget int) []Denied {
	if EncodedSize(ds) <= budget {
		return ds
	}
	// Room for the rest's entry first: its count of entries has no more
	// digits than len(ds).
	i, used := 0, EncodedSize([]Denied{notCarried(ds)})
	for ; used+ds[i].size() <= budget; i++ {
		used += ds[i].size()
	}
	return append(append([]Denied{}, ds[:i]...), notCarried(ds[i:]))
}

// notCarried is the entry that counts the refusals of rest.
func notCarried(rest []Denied) Denied {
	d := Denied{Op: OpWrite, Path: OtherPaths, Reason: "not carried: " + strconv.Itoa(len(rest)) + " more distinct refusals"}
	for _, r := range rest {
		d.Count += r.Count
	}
	return d
}

// minDenied is the fewest bytes an entry's encoding takes: three lengths
// and the count.
const minDenied = 4 * 8

func (d *Denied) size() int { return minDenied + len(d.Op) + len(d.Path) + len(d.Reason) }

// EncodedSize is the length of [AppendDenied]'s encoding of ds.
func EncodedSize(ds []Denied) int {
	n := 8
	for i := range ds {
		n += ds[i].size()
	}
	return n
}

// AppendDenied appends ds to b in package wire's encoding, the one list
// of refusals every hop that carries them (a lone run's status frame, a
// session's answer) shares.
func AppendDenied(b []byte, ds []Denied) []byte {
	return wire.AppendList(b, ds, func(b []byte, d Denied) []byte {
		b = wire.AppendString(wire.AppendString(b, d.Op), d.Path)
		return wire.AppendInt(wire.AppendString(b, d.Reason), d.Count)
	})
}

// ReadDenied reads what AppendDenied wrote; an empty list reads as nil.
func ReadDenied(d *wire.Decoder) []Denied {
	return wire.ReadList(d, minDenied, func(d *wire.Decoder) Denied {
		return Denied{Op: d.ReadString(), Path: d.ReadString(), Reason: d.ReadString(), Count: d.ReadInt()}
	})
}

// clean makes a path printable in one line and bounded: control bytes
// (a newline in a file name would forge a line of agentbox's stderr) are
// escaped, and a path longer than PATH_MAX is cut.
func clean(p string) string {
	const max = 4096
	if len(p) > max {
		p = p[:max] + "…"
	}
	if !strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return p
	}
	var b strings.Builder
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			b.WriteString(`\x`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&0xf])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
