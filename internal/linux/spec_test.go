package linux

import (
	"slices"
	"testing"

	"github.com/agentbox/agentbox/internal/rawpolicy"
	"github.com/agentbox/agentbox/policy"
)

func TestPlanOrder(t *testing.T) {
	p := rawpolicy.New(rawpolicy.Fields{
		WritableRoots: []string{"/tmp", "/tmp/ws", "/home/u/extra"},
		Protected: []policy.Protected{
			{Path: "/tmp/.git", Kind: policy.Missing, Root: "/tmp"},
			{Path: "/tmp/ws/.git", Kind: policy.File, Root: "/tmp/ws"},
			{Path: "/tmp/main/.git/worktrees/wt", Kind: policy.Dir, Root: "/tmp"},
			{Path: "/tmp/main/.git", Kind: policy.Dir, Root: "/tmp"},
			{Path: "/tmp/ws/.agents", Kind: policy.Symlink, Root: "/tmp/ws"},
			{Path: "/tmp/ws/.codex", Kind: policy.Missing, Root: "/tmp/ws"},
			{Path: "/elsewhere/.git", Kind: policy.Dir, Root: ""},
		},
	})
	got := Plan(p, []string{"/tmp/.git"})
	want := []Mount{
		{BindWritable, "/tmp"}, {BindWritable, "/tmp/ws"}, {BindWritable, "/home/u/extra"},
		// Ancestors between a carve-out and its root become mount points.
		{Pin, "/tmp/main"}, {Pin, "/tmp/main/.git"}, {Pin, "/tmp/main/.git/worktrees"},
		{BindReadOnly, "/tmp/.git"}, {BindReadOnly, "/tmp/main/.git"}, {BindReadOnly, "/tmp/ws/.git"},
		{BindReadOnly, "/tmp/main/.git/worktrees/wt"},
		{PinLink, "/tmp/ws/.agents"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Plan =\n%v\nwant\n%v", got, want)
	}
	// /tmp/ws/.codex is missing and has no placeholder: it must not be
	// planned (the caller refuses to start instead).
	for _, m := range got {
		if m.Path == "/tmp/ws/.codex" || m.Path == "/elsewhere/.git" {
			t.Errorf("unexpected step %v", m)
		}
	}
}

func TestPlanReadOnlyAfterEveryWritableRoot(t *testing.T) {
	// A writable root nested inside a protected directory must not
	// re-expose it: carve-outs come after every root.
	p := rawpolicy.New(rawpolicy.Fields{
		WritableRoots: []string{"/w", "/w/.git/sub"},
		Protected:     []policy.Protected{{Path: "/w/.git", Kind: policy.Dir, Root: "/w"}},
	})
	got := Plan(p, nil)
	last := got[len(got)-1]
	if last != (Mount{BindReadOnly, "/w/.git"}) {
		t.Errorf("carve-out not last: %v", got)
	}
}

func TestPlanPinsChainToNestedRoot(t *testing.T) {
	p := rawpolicy.New(rawpolicy.Fields{
		WritableRoots: []string{"/tmp", "/tmp/p/q/ws"},
		Protected:     []policy.Protected{{Path: "/tmp/p/q/ws/.git", Kind: policy.Dir, Root: "/tmp/p/q/ws"}},
	})
	got := Plan(p, nil)
	want := []Mount{
		{BindWritable, "/tmp"}, {BindWritable, "/tmp/p/q/ws"},
		{Pin, "/tmp/p"}, {Pin, "/tmp/p/q"},
		{BindReadOnly, "/tmp/p/q/ws/.git"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Plan =\n%v\nwant\n%v", got, want)
	}
}

func TestHeldDirs(t *testing.T) {
	p := rawpolicy.New(rawpolicy.Fields{Protected: []policy.Protected{
		{Path: "/w/.git", Kind: policy.Dir, Root: "/w"},
		{Path: "/w/.codex", Kind: policy.Missing, Root: "/w"},
		{Path: "/w/.agents", Kind: policy.File, Root: "/w"},
		{Path: "/x/.git", Kind: policy.Dir},
	}})
	if got := HeldDirs(p); !slices.Equal(got, []HeldDir{{Path: "/w/.git", Root: "/w"}, {Path: "/w/.codex", Root: "/w", Missing: true}}) {
		t.Errorf("HeldDirs = %v", got)
	}
}

// A missing protected path held through an empty ancestor (another run's
// placeholder stood in the way) binds that ancestor read-only instead; one
// with nothing held (no placeholder needed, or a session's, bound per
// command) gets the pins of the directories on its way from the root.
func TestPlanCoverAncestor(t *testing.T) {
	p := rawpolicy.New(rawpolicy.Fields{
		WritableRoots: []string{"/h"},
		Protected: []policy.Protected{
			{Path: "/h/.config/agentbox", Kind: policy.Missing, Root: "/h"},
			{Path: "/h/.config/other", Kind: policy.Missing, Root: "/h"},
			{Path: "/h/x/y", Kind: policy.Missing, Root: "/h"},
		},
	})
	got := Plan(p, []string{"/h/.config", "/h"})
	want := []Mount{{BindWritable, "/h"}, {Pin, "/h/x"}, {BindReadOnly, "/h/.config"}}
	if !slices.Equal(got, want) {
		t.Errorf("Plan =\n%v\nwant\n%v", got, want)
	}
}
