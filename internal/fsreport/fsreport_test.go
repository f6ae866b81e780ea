package fsreport

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/wire"
)

func TestRefused(t *testing.T) {
	r := &Rules{
		Writable: []string{"/ws", "/dev/null", "/tmp"},
		ReadOnly: []Carve{
			{Path: "/ws/.git", Reason: ReasonGit},
			{Path: "/ws/.git/hooks", Reason: ReasonProtected(".git/hooks")},
			{Path: "/ws/.agents", Reason: ReasonProtected(".agents")},
		},
		Hidden: []string{"/home/u/.ssh"},
	}
	for _, c := range []struct{ path, want string }{
		{"/ws/a.txt", ""},
		{"/ws", ""},
		{"/dev/null", ""},
		{"/tmp/x/y", ""},
		{"/wsx/a", ReasonOutside},
		{"/etc/passwd", ReasonOutside},
		{"/", ReasonOutside},
		{"/ws/.git/index.lock", ReasonGit},
		{"/ws/.git", ReasonGit},
		{"/ws/.git/hooks/pre-commit", "protected path .git/hooks"},
		{"/ws/.agents/x", "protected path .agents"},
		{"/ws/.agentsx", ""},
		{"/home/u/.ssh/id_rsa", ReasonHidden},
		{"relative", ""},
		{"/ws/../etc/x", ReasonOutside},
	} {
		if got := r.Refused(c.path); got != c.want {
			t.Errorf("Refused(%q) = %q, want %q", c.path, got, c.want)
		}
	}
	if got := r.RefusedRead("/home/u/.ssh/id_rsa"); got != ReasonHidden {
		t.Errorf("RefusedRead of a hidden path = %q", got)
	}
	if got := r.RefusedRead("/etc/passwd"); got != "" {
		t.Errorf("RefusedRead of a visible path = %q", got)
	}
	var nilRules *Rules
	if nilRules.Refused("/etc") != "" {
		t.Error("nil rules refused something")
	}
}

func TestRecorder(t *testing.T) {
	rc := NewRecorder(&Rules{Writable: []string{"/ws"}})
	if rc.Record(OpWrite, "/ws/a", "/ws/a") {
		t.Error("an allowed write was recorded")
	}
	if !rc.Record(OpWrite, "/ws/link", "/etc/x") {
		t.Error("a write through a link out of the root was not recorded")
	}
	rc.Record(OpWrite, "/ws/link", "/etc/x")
	rc.Record(OpCreate, "/etc/new\nagentbox: forged", "/etc/new\nagentbox: forged")
	got := rc.List()
	want := []Denied{
		{Op: OpWrite, Path: "/ws/link", Reason: ReasonOutside, Count: 2},
		{Op: OpCreate, Path: `/etc/new\x0aagentbox: forged`, Reason: ReasonOutside, Count: 1},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("List() = %v, want %v", got, want)
	}
	for i := range MaxDenied + 10 {
		p := fmt.Sprintf("/etc/f%d", i)
		rc.Record(OpWrite, p, p)
	}
	got = rc.List()
	if len(got) != MaxDenied+1 || got[MaxDenied].Path != OtherPaths || got[MaxDenied].Count != 12 {
		t.Errorf("capped list: %d entries, last %+v", len(got), got[len(got)-1])
	}
	if c := Fit(got, 300); len(c) != 3 || c[2].Path != OtherPaths || c[2].Count < MaxDenied {
		t.Errorf("Fit: %+v", c)
	}
	if c := Fit(got[:2], 1<<20); len(c) != 2 {
		t.Errorf("Fit of what fits: %+v", c)
	}
	var nilRec *Recorder
	if nilRec.Record(OpWrite, "/etc/x", "/etc/x") || len(nilRec.List()) != 0 || nilRec.List() == nil {
		t.Error("nil recorder")
	}
}

func TestAddCount(t *testing.T) {
	rc := NewRecorder(&Rules{})
	rc.AddCount(OpRead, "/h/.netrc", ReasonHidden, 3)
	rc.AddCount(OpRead, "/h/.netrc", ReasonHidden, 2)
	rc.AddCount(OpRead, "/h/.aws", ReasonHidden, 0) // nothing seen: nothing listed
	rc.Add(OpRead, "/h/.netrc", ReasonHidden)
	want := []Denied{{Op: OpRead, Path: "/h/.netrc", Reason: ReasonHidden, Count: 6}}
	if got := rc.List(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("List() = %v, want %v", got, want)
	}
}

// maximalList is the longest list a Recorder makes: MaxDenied entries of
// the longest paths clean keeps, and the entry counting the others.
func maximalList() []Denied {
	rc := NewRecorder(&Rules{})
	for i := range MaxDenied + 1 {
		p := fmt.Sprintf("/%d/%s", i, strings.Repeat("\n", 4096))
		rc.Add(OpMetadata, p, ReasonProtected(strings.Repeat("n", 255)))
	}
	return rc.List()
}

func TestEncoding(t *testing.T) {
	for _, ds := range [][]Denied{nil, {{Op: OpRead, Path: "/\xff", Reason: ReasonHidden, Count: 1 << 40}}, maximalList()} {
		b := AppendDenied(nil, ds)
		if len(b) != EncodedSize(ds) {
			t.Errorf("%d entries: EncodedSize %d, encoding %d", len(ds), EncodedSize(ds), len(b))
		}
		d := wire.NewDecoder(b)
		if got := ReadDenied(d); d.End() != nil || !reflect.DeepEqual(got, ds) {
			t.Errorf("%d entries: round trip %v", len(ds), d.End())
		}
		for n := range len(b) {
			d := wire.NewDecoder(b[:n])
			if ReadDenied(d); d.End() == nil {
				t.Errorf("%d entries cut to %d of %d bytes: decoded", len(ds), n, len(b))
			}
			if n > 64 {
				break
			}
		}
	}
}

// Fit's answer takes at most its budget in encoding, and keeps as many
// entries as do fit with the one counting the rest.
func TestFitBudget(t *testing.T) {
	ds := maximalList()
	total := 0
	for _, d := range ds {
		total += d.Count
	}
	for _, budget := range []int{200, 1000, 5000, 32 << 10, 64 << 10, 1 << 20} {
		got := Fit(ds, budget)
		if n := EncodedSize(got); n > budget {
			t.Errorf("budget %d: %d bytes", budget, n)
		}
		if len(got) == len(ds) {
			continue
		}
		kept, rest := got[:len(got)-1], got[len(got)-1]
		if rest.Path != OtherPaths || !reflect.DeepEqual(kept, ds[:len(kept)]) {
			t.Errorf("budget %d: not the first entries and the rest: %+v", budget, rest)
		}
		sum := rest.Count
		for _, d := range kept {
			sum += d.Count
		}
		if sum != total {
			t.Errorf("budget %d: counts %d, want %d", budget, sum, total)
		}
		if one := append(append([]Denied{}, ds[:len(kept)+1]...), rest); EncodedSize(one) <= budget {
			t.Errorf("budget %d: %d entries kept, %d would fit", budget, len(kept), len(kept)+1)
		}
	}
	if got := Fit(ds, EncodedSize(ds)); len(got) != len(ds) {
		t.Errorf("a list that fits exactly: cut to %d", len(got))
	}
}
