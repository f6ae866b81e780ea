package linux

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/policy"
)

func TestGitWritesPlan(t *testing.T) {
	ws := t.TempDir()
	gd := filepath.Join(ws, ".git")
	for _, d := range []string{"hooks", "objects/info", "refs"} {
		os.MkdirAll(filepath.Join(gd, d), 0o755)
	}
	os.WriteFile(filepath.Join(gd, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.WriteFile(filepath.Join(gd, "config"), nil, 0o644)
	codex := filepath.Join(ws, ".codex")
	p := policytest.New(policytest.Fields{Mode: policy.WorkspaceWrite, WritableRoots: []string{ws}, AllowGitWrites: true,
		Protected: []policy.Protected{{Path: gd, Kind: policy.Dir, Root: ws}, {Path: codex, Kind: policy.Missing, Root: ws}}})
	mounts, dirs, files, err := GitWritesPlan(p, Plan(p, []string{codex}))
	if err != nil {
		t.Fatal(err)
	}
	has := func(k spec.MountKind, path string) bool {
		return slices.Contains(mounts, spec.Mount{Kind: k, Path: path})
	}
	if has(spec.BindReadOnly, gd) || !has(spec.Pin, gd) {
		t.Errorf(".git must be pinned, not read-only: %v", mounts)
	}
	if !has(spec.BindReadOnly, codex) {
		t.Errorf(".codex lost its read-only bind: %v", mounts)
	}
	for _, rel := range []string{"config", "hooks", "objects/info", "commondir", "config.worktree", "info", "modules", "worktrees"} {
		if !has(spec.BindReadOnly, filepath.Join(gd, rel)) {
			t.Errorf("%s not bound read-only: %v", rel, mounts)
		}
	}
	if !has(spec.Pin, filepath.Join(gd, "objects")) {
		t.Errorf("objects (above objects/info) not pinned: %v", mounts)
	}
	// The pins and read-only binds come after the .git pin.
	if slices.Index(mounts, spec.Mount{Kind: spec.Pin, Path: gd}) > slices.Index(mounts, spec.Mount{Kind: spec.BindReadOnly, Path: filepath.Join(gd, "hooks")}) {
		t.Errorf("order: %v", mounts)
	}
	if !slices.Contains(dirs, GitDir{filepath.Join(gd, "modules"), gd}) || slices.Contains(dirs, GitDir{filepath.Join(gd, "hooks"), gd}) {
		t.Errorf("placeholder dirs %v", dirs)
	}
	if !slices.Contains(files, GitFile{filepath.Join(gd, "commondir"), "."}) || !slices.Contains(files, GitFile{filepath.Join(gd, "config.worktree"), ""}) {
		t.Errorf("placeholder files %v", files)
	}

	// Off: the plan is untouched by the caller (applyGitWrites is not
	// called); a symlinked read-only path fails closed.
	os.RemoveAll(filepath.Join(gd, "hooks"))
	os.Symlink("/tmp", filepath.Join(gd, "hooks"))
	if _, _, _, err := GitWritesPlan(p, Plan(p, nil)); err == nil {
		t.Error("a symlinked .git/hooks was accepted")
	}
}
