package sandbox

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/internal/windows/unelevated"
	"github.com/agentbox/agentbox/policy"
)

// gitRepoPolicy is testPolicy with a repository in the workspace: HEAD
// makes .git one that allow_git_writes opens.
func gitRepoPolicy(t *testing.T) (*policy.Policy, string) {
	t.Helper()
	pol, _ := testPolicy(t, policy.WorkspaceWrite)
	gd := filepath.Join(pol.Cwd(), ".git")
	for _, d := range []string{"objects", "refs", "hooks"} {
		os.MkdirAll(filepath.Join(gd, d), 0o755)
	}
	os.WriteFile(filepath.Join(gd, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	return policytest.Edit(pol, func(f *policytest.Fields) { f.AllowGitWrites = true }), gd
}

// Plumbing (runs under Wine): a run with allow_git_writes succeeds, makes
// the placeholders for the missing read-only paths (permanent until
// cleanup), and cleanup removes them only while untouched.
func TestGitWritesPlaceholdersWindows(t *testing.T) {
	pol, gd := gitRepoPolicy(t)
	var diag bytes.Buffer
	c := Command(pol, exe(t))
	c.Env = helperEnv("echo")
	c.Diagnostics = &diag
	if err := c.Run(); err != nil {
		t.Fatalf("run: %v: %s", err, diag.String())
	}
	if strings.Contains(diag.String(), "allow_git_writes") {
		t.Errorf("run still says allow_git_writes is not implemented: %q", diag.String())
	}
	for rel, want := range map[string]string{"commondir": ".", "config.worktree": ""} {
		b, err := os.ReadFile(filepath.Join(gd, rel))
		if err != nil || string(b) != want {
			t.Errorf("placeholder %s = %q, %v; want %q", rel, b, err, want)
		}
	}
	for _, d := range []string{"info", `objects\info`, "modules", "worktrees", "remotes", "branches"} {
		if fi, err := os.Stat(filepath.Join(gd, d)); err != nil || !fi.IsDir() {
			t.Errorf("placeholder directory %s: %v", d, err)
		}
	}
	// The user changes one placeholder; cleanup keeps it.
	if err := os.WriteFile(filepath.Join(gd, "config.worktree"), []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := stateDir()
	var out bytes.Buffer
	if err := unelevated.Cleanup(dir, &out); err != nil {
		t.Fatalf("cleanup: %v: %s", err, out.String())
	}
	if _, err := os.Lstat(filepath.Join(gd, "commondir")); !os.IsNotExist(err) {
		t.Errorf("cleanup left the untouched commondir placeholder: %v\n%s", err, out.String())
	}
	if _, err := os.Lstat(filepath.Join(gd, "modules")); !os.IsNotExist(err) {
		t.Errorf("cleanup left the empty modules placeholder: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(gd, "config.worktree")); err != nil || string(b) != "[core]\n" {
		t.Errorf("cleanup removed or changed the user's config.worktree: %q, %v", b, err)
	}
	for _, keep := range []string{"config", "HEAD", "hooks", "objects"} {
		if _, err := os.Lstat(filepath.Join(gd, keep)); err != nil {
			t.Errorf("cleanup removed %s: %v", keep, err)
		}
	}
}

// Enforcement (a real Windows host with git): git add and commit work
// inside the sandbox; planting a hook, writing config or the alternates,
// and moving hooks or .git aside fail.
func TestEnforceGitWrites(t *testing.T) {
	requireEnforcement(t)
	gitExe, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not on PATH: nothing to run git add/commit with")
	}
	pol, _ := testPolicy(t, policy.WorkspaceWrite)
	ws := pol.Cwd()
	gd := filepath.Join(ws, ".git")
	if out, err := exec.Command(gitExe, "init", "-q", ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	// Re-resolve: .git now holds a repository.
	pol, err = policytest.Resolve(policy.Options{Mode: policy.WorkspaceWrite, Cwd: ws}, func(k string) string {
		if k == "TEMP" || k == "TMP" {
			return ""
		}
		return os.Getenv(k)
	})
	if err != nil {
		t.Fatal(err)
	}
	pol = policytest.Edit(pol, func(f *policytest.Fields) { f.AllowGitWrites = true })
	os.WriteFile(filepath.Join(ws, "f.txt"), []byte("hello\n"), 0o644)
	config, _ := os.ReadFile(filepath.Join(gd, "config"))

	gitIn := func(args ...string) bool {
		c := Command(pol, gitExe, append([]string{"-C", ws, "-c", "user.name=agentbox", "-c", "user.email=agentbox@example.invalid"}, args...)...)
		c.Env = os.Environ()
		out, err := c.CombinedOutput()
		if err != nil {
			t.Logf("git %v: %v: %s", args, err, out)
		}
		return err == nil
	}
	if !gitIn("add", "f.txt") {
		t.Error("git add failed in the sandbox")
	}
	if !gitIn("commit", "-q", "-m", "from the sandbox") {
		t.Error("git commit failed in the sandbox")
	}
	if out, err := exec.Command(gitExe, "-C", ws, "log", "--format=%s").Output(); err != nil || strings.TrimSpace(string(out)) != "from the sandbox" {
		t.Errorf("host git log = %q, %v; want the sandbox's commit", out, err)
	}
	for _, c := range []struct {
		name   string
		helper string
		args   []string
	}{
		{"plant a hook", "write", []string{filepath.Join(gd, "hooks", "pre-commit")}},
		{"write config", "write", []string{filepath.Join(gd, "config")}},
		{"write config.worktree", "write", []string{filepath.Join(gd, "config.worktree")}},
		{"write commondir", "write", []string{filepath.Join(gd, "commondir")}},
		{"write alternates", "write", []string{filepath.Join(gd, "objects", "info", "alternates")}},
		{"rename hooks aside", "rename", []string{filepath.Join(gd, "hooks"), filepath.Join(gd, "hooks.old")}},
		{"rename config aside", "rename", []string{filepath.Join(gd, "config"), filepath.Join(gd, "config.old")}},
		{"rename objects aside", "rename", []string{filepath.Join(gd, "objects"), filepath.Join(gd, "objects.old")}},
		{"rename .git aside", "rename", []string{gd, filepath.Join(ws, ".git-aside")}},
	} {
		if sandboxed(t, pol, c.helper, c.args...) {
			t.Errorf("%s: succeeded in the sandbox", c.name)
		}
	}
	if _, err := os.Lstat(filepath.Join(gd, "hooks", "pre-commit")); err == nil {
		t.Error("a hook was planted")
	}
	if now, _ := os.ReadFile(filepath.Join(gd, "config")); !bytes.Equal(now, config) {
		t.Errorf(".git\\config changed: %q", now)
	}
	for _, p := range []string{gd, filepath.Join(gd, "hooks"), filepath.Join(gd, "objects", "info")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s is gone: %v", p, err)
		}
	}
}
