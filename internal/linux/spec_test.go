package linux

import (
	"slices"
	"testing"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/policy"
)

func TestPlanOrder(t *testing.T) {
	p := policytest.New(policytest.Fields{
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
		{Kind: BindWritable, Path: "/tmp"}, {Kind: BindWritable, Path: "/tmp/ws"}, {Kind: BindWritable, Path: "/home/u/extra"},
		// Ancestors between a carve-out and its root become mount points.
		{Kind: Pin, Path: "/tmp/main"}, {Kind: Pin, Path: "/tmp/main/.git"}, {Kind: Pin, Path: "/tmp/main/.git/worktrees"},
		{Kind: BindReadOnly, Path: "/tmp/.git"}, {Kind: BindReadOnly, Path: "/tmp/main/.git"}, {Kind: BindReadOnly, Path: "/tmp/ws/.git"},
		{Kind: BindReadOnly, Path: "/tmp/main/.git/worktrees/wt"},
		{Kind: PinLink, Path: "/tmp/ws/.agents"},
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
	p := policytest.New(policytest.Fields{
		WritableRoots: []string{"/w", "/w/.git/sub"},
		Protected:     []policy.Protected{{Path: "/w/.git", Kind: policy.Dir, Root: "/w"}},
	})
	got := Plan(p, nil)
	last := got[len(got)-1]
	if last != (Mount{Kind: BindReadOnly, Path: "/w/.git"}) {
		t.Errorf("carve-out not last: %v", got)
	}
}

func TestPlanPinsChainToNestedRoot(t *testing.T) {
	p := policytest.New(policytest.Fields{
		WritableRoots: []string{"/tmp", "/tmp/p/q/ws"},
		Protected:     []policy.Protected{{Path: "/tmp/p/q/ws/.git", Kind: policy.Dir, Root: "/tmp/p/q/ws"}},
	})
	got := Plan(p, nil)
	want := []Mount{
		{Kind: BindWritable, Path: "/tmp"}, {Kind: BindWritable, Path: "/tmp/p/q/ws"},
		{Kind: Pin, Path: "/tmp/p"}, {Kind: Pin, Path: "/tmp/p/q"},
		{Kind: BindReadOnly, Path: "/tmp/p/q/ws/.git"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Plan =\n%v\nwant\n%v", got, want)
	}
}

func TestHeldDirs(t *testing.T) {
	p := policytest.New(policytest.Fields{Protected: []policy.Protected{
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
	p := policytest.New(policytest.Fields{
		WritableRoots: []string{"/h"},
		Protected: []policy.Protected{
			{Path: "/h/.config/agentbox", Kind: policy.Missing, Root: "/h"},
			{Path: "/h/.config/other", Kind: policy.Missing, Root: "/h"},
			{Path: "/h/x/y", Kind: policy.Missing, Root: "/h"},
		},
	})
	got := Plan(p, []string{"/h/.config", "/h"})
	want := []Mount{{Kind: BindWritable, Path: "/h"}, {Kind: Pin, Path: "/h/x"}, {Kind: BindReadOnly, Path: "/h/.config"}}
	if !slices.Equal(got, want) {
		t.Errorf("Plan =\n%v\nwant\n%v", got, want)
	}
}

// TestPlanPrivateTmp: the private /tmp is bound where the host's was,
// before the roots inside it, each on a directory made for it; a $TMPDIR
// under it is a directory there, one elsewhere a second private bind; the
// home, a protected path outside every root and a listed socket inside it
// stay the host's, read-only; the chain up to a nested root is pinned;
// carve-outs come last.
func TestPlanPrivateTmp(t *testing.T) {
	p := policytest.New(policytest.Fields{
		Mode:             policy.WorkspaceWrite,
		WritableRoots:    []string{"/home/u/ws", "/tmp/a/ws"},
		AllowUnixSockets: []string{"/tmp/.X11-unix/X0", "/run/docker.sock"},
		Protected: []policy.Protected{
			{Path: "/tmp/a/ws/.git", Kind: policy.File, Root: "/tmp/a/ws"},
			{Path: "/tmp/main/.git/worktrees/ws", Kind: policy.Dir},
			{Path: "/tmp/main/.git", Kind: policy.Dir},
			{Path: "/tmp/bin/agentbox", Kind: policy.File},
			{Path: "/tmp/gone/.git", Kind: policy.Missing},
			{Path: "/home/u/.local/state/agentbox", Kind: policy.Dir},
		},
		PrivateTemps: []policy.PrivateTemp{
			{Path: "/tmp", Dir: "/s/tmp/k/tmp", Keep: []string{"/tmp/h"}},
			{Path: "/tmp/t", Dir: "/s/tmp/k/tmp/t", Env: "TMPDIR"},
			{Path: "/var/tmp/td", Dir: "/s/tmp/k/tmpdir", Env: "TMPDIR"},
		},
	})
	got := Plan(p, nil)
	want := []Mount{
		{Kind: BindPrivate, Path: "/tmp", Source: "/s/tmp/k/tmp"},
		{Kind: MakeDir, Path: "/tmp/.X11-unix"},
		{Kind: MakeDir, Path: "/tmp/bin"},
		{Kind: MakeDir, Path: "/tmp/h"},
		{Kind: BindHost, Path: "/tmp/h"},
		{Kind: MakeDir, Path: "/tmp/t"},
		{Kind: BindWritable, Path: "/home/u/ws"},
		{Kind: MakeFile, Path: "/tmp/.X11-unix/X0"},
		{Kind: BindHost, Path: "/tmp/.X11-unix/X0"},
		{Kind: MakeDir, Path: "/tmp/a/ws"},
		{Kind: BindWritable, Path: "/tmp/a/ws"},
		{Kind: MakeFile, Path: "/tmp/bin/agentbox"},
		{Kind: BindHost, Path: "/tmp/bin/agentbox"},
		{Kind: MakeDir, Path: "/tmp/main/.git"},
		{Kind: BindHost, Path: "/tmp/main/.git"},
		{Kind: BindPrivate, Path: "/var/tmp/td", Source: "/s/tmp/k/tmpdir"},
		{Kind: Pin, Path: "/tmp/.X11-unix"}, {Kind: Pin, Path: "/tmp/a"}, {Kind: Pin, Path: "/tmp/bin"}, {Kind: Pin, Path: "/tmp/main"},
		{Kind: BindReadOnly, Path: "/tmp/a/ws/.git"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Plan =\n%v\nwant\n%v", got, want)
	}
}
