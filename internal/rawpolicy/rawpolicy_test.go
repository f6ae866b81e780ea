package rawpolicy

import (
	"slices"
	"testing"

	"github.com/agentbox/agentbox/policy"
)

// TestFieldsMatch fails (the type assertions panic) when Fields and the
// struct package policy keeps drift apart.
func TestFieldsMatch(t *testing.T) {
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
	if _, err := Resolve(policy.Options{Cwd: t.TempDir()}, func(string) string { return "" }, "linux"); err != nil {
		t.Fatal(err)
	}
}
