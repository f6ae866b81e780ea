package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/windows/acl"
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
		t.Skip("enforcement unverified under Wine: Wine does not enforce restricted tokens, integrity levels or ACLs, nor store them; run on a Windows host (.github/workflows/windows.yml)")
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
	ws, outside := pol.Cwd(), filepath.Join(base, "outside")
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
	if sandboxed(t, pol, "write", filepath.Join(pol.Cwd(), "new.txt")) {
		t.Error("read-only run wrote into the workspace")
	}
	if !sandboxed(t, pol, "read", filepath.Join(pol.Cwd(), ".git", "config")) {
		t.Error("read-only run cannot read")
	}
}

// A second run over the same roots must find every grant and label in
// place and write no DACL or label (no tree walk).
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
	return len(sb.ACL.Modified) + len(sb.ACL.Labeled), nil
}

// The command runs at Low integrity (the token really carries the level
// Start set). This one runs under Wine too, when Wine keeps the level.
func TestSandboxLowIntegrity(t *testing.T) {
	pol, _ := testPolicy(t, policy.WorkspaceWrite)
	c := Command(pol, exe(t))
	c.Env = helperEnv("integrity")
	out, err := c.Output()
	if err != nil {
		t.Fatalf("integrity helper: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != fmt.Sprintf("%#x", acl.LowIL) {
		if winapi.IsWine() {
			t.Skipf("Wine reports integrity %s for the sandboxed child: it does not implement token integrity levels", got)
		}
		t.Errorf("sandboxed child's integrity = %s, want %#x (Low)", got, acl.LowIL)
	}
}

// Codex #32915: deletes and renames escaped the write-restricted token.
// Directories outside the roots (FILE_DELETE_CHILD on the parent) and the
// parent of .git are the routes; the Low token and labels close them.
func TestEnforceDeletesConfined(t *testing.T) {
	requireEnforcement(t)
	pol, base := testPolicy(t, policy.WorkspaceWrite)
	ws, outside := pol.Cwd(), filepath.Join(base, "outside")
	os.MkdirAll(filepath.Join(outside, "emptydir"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	for _, c := range []struct {
		name   string
		helper string
		args   []string
	}{
		{"delete outside file", "delete", []string{filepath.Join(outside, "file.txt")}},
		{"delete outside empty dir", "delete", []string{filepath.Join(outside, "emptydir")}},
		{"rename outside file", "rename", []string{filepath.Join(outside, "file.txt"), filepath.Join(outside, "moved.txt")}},
		{"move outside file into the workspace", "rename", []string{filepath.Join(outside, "file.txt"), filepath.Join(ws, "stolen.txt")}},
		{"delete .git\\HEAD", "delete", []string{filepath.Join(ws, ".git", "HEAD")}},
		{"rename .git aside", "rename", []string{filepath.Join(ws, ".git"), filepath.Join(ws, "git-aside")}},
		{"move .git\\config out", "rename", []string{filepath.Join(ws, ".git", "config"), filepath.Join(ws, "config")}},
		{"delete .agents placeholder", "delete", []string{filepath.Join(ws, ".agents")}},
	} {
		if sandboxed(t, pol, c.helper, c.args...) {
			t.Errorf("%s: succeeded", c.name)
		}
	}
	for _, p := range []string{filepath.Join(outside, "file.txt"), filepath.Join(outside, "emptydir"), filepath.Join(ws, ".git", "HEAD"), filepath.Join(ws, ".agents")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s is gone: %v", p, err)
		}
	}
	// The user, outside the sandbox, keeps every right: the labels are
	// Low and Medium, and the FILE_DELETE_CHILD guard changes nothing
	// for children that grant the user DELETE.
	if err := os.Rename(filepath.Join(ws, ".git", "HEAD"), filepath.Join(ws, ".git", "HEAD2")); err != nil {
		t.Errorf("user can no longer rename inside .git: %v", err)
	}
	if err := os.Remove(filepath.Join(ws, ".agents")); err != nil {
		t.Errorf("user can no longer delete the .agents placeholder: %v", err)
	}
}

// A run carries only its own roots' SIDs: the grants an earlier run left
// on another workspace do not make that workspace writable.
func TestEnforceOtherWorkspace(t *testing.T) {
	requireEnforcement(t)
	polA, _ := testPolicy(t, policy.WorkspaceWrite)
	polB, _ := testPolicy(t, policy.WorkspaceWrite)
	// Both in one state directory, as for one user.
	state := os.Getenv("LOCALAPPDATA") + `\agentbox`
	if _, err := unelevated.Prepare(polA, state); err != nil {
		t.Fatal(err)
	}
	if !sandboxed(t, polB, "write", filepath.Join(polB.Cwd(), "b.txt")) {
		t.Fatal("cannot write its own workspace")
	}
	if sandboxed(t, polB, "write", filepath.Join(polA.Cwd(), "from-b.txt")) {
		t.Error("a run in workspace B wrote into workspace A, granted by an earlier run")
	}
}

// The labels are on disk as planned (Wine stores no SACL).
func TestEnforceLabelsOnDisk(t *testing.T) {
	requireEnforcement(t)
	pol, _ := testPolicy(t, policy.WorkspaceWrite)
	state := os.Getenv("LOCALAPPDATA") + `\agentbox`
	sb, err := unelevated.Prepare(pol, state)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]acl.Label{pol.Cwd(): acl.RootLabel, filepath.Join(pol.Cwd(), ".git"): acl.ProtectedLabel} {
		s, err := winapi.FileStore{}.GetLabel(p)
		if l, ok := acl.ParseLabel(s); err != nil || !ok || l != want {
			t.Errorf("%s label %q (%v), want %v", p, s, err, want)
		}
	}
	if len(sb.State.Labels) == 0 {
		t.Error("labelled paths not recorded for cleanup")
	}
	var out bytes.Buffer
	if err := Cleanup(context.Background(), &out); err != nil && !strings.Contains(err.Error(), "elevated") {
		t.Fatalf("cleanup: %v", err)
	}
	if s, _ := (winapi.FileStore{}).GetLabel(pol.Cwd()); strings.Contains(s, "ML;OICI;NW;;;LW") {
		t.Errorf("root label left after cleanup: %s", s)
	}
}

// In a service, an OpenSSH session or session 0 there is no interactive
// window station; the command gets one of agentbox's own and USER32 loads.
func TestNonInteractiveStation(t *testing.T) {
	ni, err := winapi.NonInteractive()
	if err != nil {
		t.Fatal(err)
	}
	if !ni {
		t.Skip("this session has an interactive window station; run from a service or an OpenSSH session to exercise agentbox's own station end to end (internal/windows/winapi TestOwnStation covers the calls)")
	}
	pol, _ := testPolicy(t, policy.WorkspaceWrite)
	c := Command(pol, exe(t))
	c.Env = helperEnv("user32")
	if out, err := c.CombinedOutput(); err != nil || !strings.Contains(string(out), "user32 ok") {
		t.Errorf("USER32 in a sandboxed child without an interactive station: %v: %s", err, out)
	}
}
