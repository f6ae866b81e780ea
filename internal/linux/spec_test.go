package linux

import (
	"slices"
	"testing"

	"github.com/agentbox/agentbox/internal/linux/spec"
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
	want := []spec.Mount{
		{Kind: spec.BindWritable, Path: "/tmp"}, {Kind: spec.BindWritable, Path: "/tmp/ws"}, {Kind: spec.BindWritable, Path: "/home/u/extra"},
		// Ancestors between a carve-out and its root become mount points.
		{Kind: spec.Pin, Path: "/tmp/main"}, {Kind: spec.Pin, Path: "/tmp/main/.git"}, {Kind: spec.Pin, Path: "/tmp/main/.git/worktrees"},
		{Kind: spec.BindReadOnly, Path: "/tmp/.git"}, {Kind: spec.BindReadOnly, Path: "/tmp/main/.git"}, {Kind: spec.BindReadOnly, Path: "/tmp/ws/.git"},
		{Kind: spec.BindReadOnly, Path: "/tmp/main/.git/worktrees/wt"},
		{Kind: spec.PinLink, Path: "/tmp/ws/.agents"},
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
	if last != (spec.Mount{Kind: spec.BindReadOnly, Path: "/w/.git"}) {
		t.Errorf("carve-out not last: %v", got)
	}
}

func TestPlanPinsChainToNestedRoot(t *testing.T) {
	p := policytest.New(policytest.Fields{
		WritableRoots: []string{"/tmp", "/tmp/p/q/ws"},
		Protected:     []policy.Protected{{Path: "/tmp/p/q/ws/.git", Kind: policy.Dir, Root: "/tmp/p/q/ws"}},
	})
	got := Plan(p, nil)
	want := []spec.Mount{
		{Kind: spec.BindWritable, Path: "/tmp"}, {Kind: spec.BindWritable, Path: "/tmp/p/q/ws"},
		{Kind: spec.Pin, Path: "/tmp/p"}, {Kind: spec.Pin, Path: "/tmp/p/q"},
		{Kind: spec.BindReadOnly, Path: "/tmp/p/q/ws/.git"},
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
	want := []spec.Mount{{Kind: spec.BindWritable, Path: "/h"}, {Kind: spec.Pin, Path: "/h/x"}, {Kind: spec.BindReadOnly, Path: "/h/.config"}}
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
	want := []spec.Mount{
		{Kind: spec.BindPrivate, Path: "/tmp", Source: "/s/tmp/k/tmp"},
		{Kind: spec.MakeDir, Path: "/tmp/.X11-unix"},
		{Kind: spec.MakeDir, Path: "/tmp/bin"},
		{Kind: spec.MakeDir, Path: "/tmp/h"},
		{Kind: spec.BindHost, Path: "/tmp/h"},
		{Kind: spec.MakeDir, Path: "/tmp/t"},
		{Kind: spec.BindWritable, Path: "/home/u/ws"},
		{Kind: spec.MakeFile, Path: "/tmp/.X11-unix/X0"},
		{Kind: spec.BindHost, Path: "/tmp/.X11-unix/X0"},
		{Kind: spec.MakeDir, Path: "/tmp/a/ws"},
		{Kind: spec.BindWritable, Path: "/tmp/a/ws"},
		{Kind: spec.MakeFile, Path: "/tmp/bin/agentbox"},
		{Kind: spec.BindHost, Path: "/tmp/bin/agentbox"},
		{Kind: spec.MakeDir, Path: "/tmp/main/.git"},
		{Kind: spec.BindHost, Path: "/tmp/main/.git"},
		{Kind: spec.BindPrivate, Path: "/var/tmp/td", Source: "/s/tmp/k/tmpdir"},
		{Kind: spec.Pin, Path: "/tmp/.X11-unix"}, {Kind: spec.Pin, Path: "/tmp/a"}, {Kind: spec.Pin, Path: "/tmp/bin"}, {Kind: spec.Pin, Path: "/tmp/main"},
		{Kind: spec.BindReadOnly, Path: "/tmp/a/ws/.git"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Plan =\n%v\nwant\n%v", got, want)
	}
}
