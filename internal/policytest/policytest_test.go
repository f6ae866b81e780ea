package policytest

import (
	"slices"
	"testing"

	"github.com/agentbox/agentbox/policy"
)

// TestFields fails (New and Of panic) when Fields and policy's encoding
// drift apart.
func TestFields(t *testing.T) {
	p := New(Fields{Mode: policy.WorkspaceWrite, Cwd: "/w", WritableRoots: []string{"/w"}, AllowGitWrites: true})
	if p.Mode() != policy.WorkspaceWrite || p.Cwd() != "/w" || !p.AllowGitWrites() {
		t.Fatalf("New lost fields: %+v", Of(p))
	}
	q := Edit(p, func(f *Fields) { f.WritableRoots = append(f.WritableRoots, "/x") })
	if !slices.Equal(p.WritableRoots(), []string{"/w"}) || !slices.Equal(q.WritableRoots(), []string{"/w", "/x"}) {
		t.Errorf("Edit changed the original or lost the edit: %q, %q", p.WritableRoots(), q.WritableRoots())
	}
	// A caller's slice does not alias the policy's.
	roots := []string{"/a"}
	r := New(Fields{WritableRoots: roots})
	roots[0] = "/b"
	r.WritableRoots()[0] = "/c"
	if got := r.WritableRoots(); got[0] != "/a" {
		t.Errorf("policy aliased a caller's slice: %q", got)
	}
	// Every field survives the trip: an allow-list, too.
	s, err := Resolve(policy.Options{Cwd: t.TempDir(), AllowDomains: []string{"good.test"}}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if got := New(Of(s)); !slices.Equal(got.AllowedDomains(), []string{"good.test"}) {
		t.Errorf("the allow-list did not survive Of and New: %q", got.AllowedDomains())
	}
}

func TestNewPanicsOnWhatIsNoPolicy(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New accepted a tool cache this build does not know")
		}
	}()
	New(Fields{ToolCaches: []policy.ToolCache{{Name: "nope"}}})
}
