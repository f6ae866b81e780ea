//go:build linux

package linux

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestGitWritesFlag: --allow-git-writes does what [sandbox_workspace_write]
// allow_git_writes does, for agentbox run and agentbox mcp, and
// --allow-git-writes=false overrides the config's true.
func TestGitWritesFlag(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		repo := gitRepo(t, fx)
		o := runOpts{dir: repo, env: fx.env(), timeout: 60e9}
		commit := func(msg string) string {
			return `echo ` + msg + ` > f.txt; git add f.txt && git commit -qm ` + msg + ` && echo GIT-OK`
		}
		r := runWith(t, u, o, "run", "-C", repo, "--allow-git-writes", "--", "/bin/sh", "-c", commit("two"))
		if r.code != 0 || !strings.Contains(r.stdout, "GIT-OK") {
			t.Fatalf("git commit with --allow-git-writes: %v", r)
		}
		cfg := filepath.Join(fx.dir, "git.toml")
		writeFile(t, cfg, "[sandbox_workspace_write]\nallow_git_writes = true\n")
		chownR(t, fx.dir, u)
		r = runWith(t, u, o, "run", "-C", repo, "--config", cfg, "--allow-git-writes=false", "--", "/bin/sh", "-c", commit("nope"))
		if strings.Contains(r.stdout, "GIT-OK") {
			t.Errorf("--allow-git-writes=false did not override the config: %v", r)
		}

		fx.ws = repo
		cs, _, _ := mcpServer(t, u, fx, "--allow-git-writes")
		if m := mcpSh(t, cs, commit("three")); m.ExitCode != 0 || !strings.Contains(m.Stdout, "GIT-OK") {
			t.Errorf("git commit through agentbox mcp --allow-git-writes: %v", m)
		}
		if h := host(t, u, o, "git", "log", "--format=%s", "main"); h.code != 0 || h.stdout != "three\ntwo\none\n" {
			t.Errorf("host sees log %q, want three, two, one: %v", h.stdout, h)
		}
	})
}
