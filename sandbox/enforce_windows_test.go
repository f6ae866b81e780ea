package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/windows/unelevated"
	"github.com/agentbox/agentbox/internal/windows/winapi"
	"github.com/agentbox/agentbox/policy"
)

// Enforcement tests: they check what the write-restricted token and the
// ACEs actually allow, so they need a real Windows host. Wine accepts
// CreateRestrictedToken and SetNamedSecurityInfo but enforces neither, so
// there they skip rather than pass vacuously.
func requireEnforcement(t *testing.T) {
	t.Helper()
	if winapi.IsWine() {
		t.Skip("enforcement unverified under Wine: Wine does not enforce restricted tokens or store ACLs; run on a Windows host (.github/workflows/windows.yml)")
	}
}

// sandboxed runs one helper under pol and reports whether it succeeded.
func sandboxed(t *testing.T, pol *policy.Policy, helper string, args ...string) bool {
	t.Helper()
	c := Command(pol, exe(t), args...)
	c.Env = helperEnv(helper)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Logf("%s %v: %v: %s", helper, args, err, out)
	}
	return err == nil
}

func TestEnforceWorkspaceWrite(t *testing.T) {
	requireEnforcement(t)
	pol, base := testPolicy(t, policy.WorkspaceWrite)
	ws, outside := pol.Cwd, filepath.Join(base, "outside")
	git := filepath.Join(ws, ".git")
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	os.WriteFile(filepath.Join(ws, "sub", "old.txt"), []byte("x"), 0o644)

	for _, c := range []struct {
		name   string
		helper string
		args   []string
		want   bool
	}{
		{"write in workspace", "write", []string{filepath.Join(ws, "new.txt")}, true},
		{"mkdir in workspace", "mkdir", []string{filepath.Join(ws, "d")}, true},
		{"rename in workspace", "rename", []string{filepath.Join(ws, "sub", "old.txt"), filepath.Join(ws, "sub", "new.txt")}, true},
		{"delete in workspace", "delete", []string{filepath.Join(ws, "sub", "new.txt")}, true},
		{"write outside", "write", []string{filepath.Join(outside, "new.txt")}, false},
		{"overwrite outside", "write", []string{filepath.Join(outside, "file.txt")}, false},
		{"delete outside", "delete", []string{filepath.Join(outside, "file.txt")}, false},
		{"write .git\\config", "write", []string{filepath.Join(git, "config")}, false},
		{"create in .git", "write", []string{filepath.Join(git, "hooks-pre-commit")}, false},
		{"delete .git\\config", "delete", []string{filepath.Join(git, "config")}, false},
		{"rename .git aside", "rename", []string{git, filepath.Join(ws, ".git-aside")}, false},
		{"create missing .codex", "mkdir", []string{filepath.Join(ws, ".codex", "x")}, false},
		{"rename .agents placeholder aside", "rename", []string{filepath.Join(ws, ".agents"), filepath.Join(ws, "agents2")}, false},
		{"read .git\\config", "read", []string{filepath.Join(git, "config")}, true},
		{"read outside", "read", []string{filepath.Join(outside, "file.txt")}, true},
	} {
		if got := sandboxed(t, pol, c.helper, c.args...); got != c.want {
			t.Errorf("%s: succeeded=%v, want %v", c.name, got, c.want)
		}
	}
	if _, err := os.Stat(git); err != nil {
		t.Errorf(".git is gone: %v", err)
	}
}

func TestEnforceReadOnly(t *testing.T) {
	requireEnforcement(t)
	pol, _ := testPolicy(t, policy.ReadOnly)
	if sandboxed(t, pol, "write", filepath.Join(pol.Cwd, "new.txt")) {
		t.Error("read-only run wrote into the workspace")
	}
	if !sandboxed(t, pol, "read", filepath.Join(pol.Cwd, ".git", "config")) {
		t.Error("read-only run cannot read")
	}
}

// A second run over the same roots must find every grant in place and
// write no DACL (no tree walk).
func TestEnforceNoReapply(t *testing.T) {
	requireEnforcement(t)
	pol, _ := testPolicy(t, policy.WorkspaceWrite)
	state := os.Getenv("LOCALAPPDATA") + `\agentbox`
	first, err := prepare(pol, state)
	if err != nil || first == 0 {
		t.Fatalf("first prepare modified %d, %v", first, err)
	}
	second, err := prepare(pol, state)
	if err != nil || second != 0 {
		t.Errorf("second prepare modified %d paths, %v; want 0", second, err)
	}
}

func prepare(pol *policy.Policy, state string) (int, error) {
	sb, err := unelevated.Prepare(pol, state)
	if err != nil {
		return 0, err
	}
	return len(sb.ACL.Modified), nil
}
