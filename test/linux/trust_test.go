//go:build linux

package linux

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The rule of issue 21: nothing a sandboxed command writes may be run or
// obeyed by the user's git afterwards, in any repository at any depth,
// whichever way the command ran; what agentbox cannot move out of git's
// way fails the run (125).

// runPath is one way a command runs: a lone run, through the resident
// helper, or as a command of an `agentbox mcp` session.
type runPath struct {
	name string
	run  func(t *testing.T, script string) result
}

// runPaths are the three ways, for fx (each with a state directory of
// its own, so a helper of its own), with extra flags for run and mcp.
func runPaths(t *testing.T, fx *fixture, extra ...string) []runPath {
	t.Helper()
	return runPathsEnv(t, fx, nil, extra...)
}

// runPathsEnv is runPaths with env added to agentbox's environment on
// each path.
func runPathsEnv(t *testing.T, fx *fixture, env []string, extra ...string) []runPath {
	t.Helper()
	state := filepath.Join(fx.dir, "state-lone")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	chownR(t, state, fx.u)
	lone := func(t *testing.T, script string) result {
		args := append(append([]string{"run", "-C", fx.ws}, extra...), "--", "/bin/sh", "-c", script)
		return runWith(t, fx.u, runOpts{env: append(append(fx.env(), env...), "AGENTBOX_RESIDENT=0", "XDG_STATE_HOME="+state), dir: fx.ws, timeout: 60 * time.Second}, args...)
	}
	var re *residentEnv
	helper := func(t *testing.T, script string) result {
		if re == nil {
			re = newResidentEnv(t, fx, env...)
			re.warm(t, extra...)
		}
		ok, r := re.served(t, runOpts{timeout: 60 * time.Second}, extra, script)
		if !ok {
			t.Fatalf("the helper did not serve the run: %v", r)
		}
		return r
	}
	var mu sync.Mutex
	var mcpRunScript func(string) mcpResult
	session := func(t *testing.T, script string) result {
		mu.Lock()
		if mcpRunScript == nil {
			args := append([]string{"mcp", "-C", fx.ws}, extra...)
			cs, _, _ := mcpServerCmd(t, command(fx.u, runOpts{env: append(fx.env(), env...), dir: fx.ws}, binPath, args...))
			mcpRunScript = func(s string) mcpResult { return mcpSh(t, cs, s) }
		}
		f := mcpRunScript
		mu.Unlock()
		m := f(script)
		return result{stdout: m.Stdout, stderr: m.Stderr, code: m.ExitCode}
	}
	return []runPath{{"lone", lone}, {"helper", helper}, {"mcp", session}}
}

// plantScript makes a repository in $1 (relative to the workspace) whose
// core.fsmonitor, which git status runs, leaves the marker $MARK.
const plantScript = `plant() {
mkdir -p "$1" && git init -q "$1" && printf '#!/bin/sh\ntouch "%s"\n' "$MARK" > "$1/fsmon.sh" && chmod +x "$1/fsmon.sh" &&
git -C "$1" config core.fsmonitor "$PWD/$1/fsmon.sh"
}
`

// TestTrustNestedRepoPlanted (finding 3): in the default mode, a
// repository the command makes at any depth (git init, a clone, a .git
// file naming a git directory elsewhere, a .git symlink) is gone from
// git's sight when the run returns, through all three paths; the user's
// git status there runs nothing. The control shows the plant works on
// the host.
func TestTrustNestedRepoPlanted(t *testing.T) {
	needGit(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := gitFixture(t, u)
		mark := marker(fx, "nested")
		env := func(r runPath, script string) string { return "MARK=" + mark + "; " + plantScript + script }
		// Control: the same plant, straight on the host, runs.
		ctl := host(t, u, runOpts{env: append(fx.env(), "MARK="+mark), dir: fx.ws}, "/bin/sh", "-c", plantScript+`plant ctl`)
		if ctl.code != 0 {
			t.Fatalf("control plant: %v", ctl)
		}
		userGit(t, fx, filepath.Join(fx.ws, "ctl"), "status")
		if !exists(mark) {
			t.Fatal("control: git status in the planted repository did not run its core.fsmonitor; the test no longer sees the attack")
		}
		os.Remove(mark)
		os.RemoveAll(filepath.Join(fx.ws, "ctl"))
		for _, p := range runPaths(t, fx) {
			t.Run(p.name, func(t *testing.T) {
				sub := "deep/er/" + p.name
				r := p.run(t, env(p, fmt.Sprintf(`set -e
plant %s
plant %s-b && mv %s-b/.git %s-gitdir && echo "gitdir: $PWD/%s-gitdir" > %s-b/.git
plant %s-c && mv %s-c/.git %s-linked && ln -s "$PWD/%s-linked" %s-c/.git
git -C %s status >/dev/null
echo PLANTED`, sub, sub, sub, sub, sub, sub, sub, sub, sub, sub, sub, sub)))
				if r.code != 0 || !strings.Contains(r.stdout, "PLANTED") {
					t.Fatalf("the plant (git init and git inside the repository while the command runs) failed: %v", r)
				}
				if !strings.Contains(r.stderr, "moved the git repository") {
					t.Errorf("no note says what was moved aside: %v", r)
				}
				for _, d := range []string{sub, sub + "-b", sub + "-c", sub + "-gitdir", sub + "-linked"} {
					assertAbsent(t, filepath.Join(fx.ws, d, ".git"))
					userGit(t, fx, filepath.Join(fx.ws, d), "status")
					if exists(mark) {
						t.Fatalf("the user's git status in %s ran what the sandbox planted", d)
					}
				}
				// -gitdir and -linked are bare-shaped directories: their
				// HEAD is moved aside too.
				for _, d := range []string{sub + "-gitdir", sub + "-linked"} {
					assertAbsent(t, filepath.Join(fx.ws, d, "HEAD"))
				}
			})
		}
	})
}

// TestTrustQuarantineCannotBeBlocked (finding 1): the command
// pre-creates every name an older quarantine used and makes the parent
// directory read-only; the repository is still moved, and nothing the
// command prepared is trusted.
func TestTrustQuarantineCannotBeBlocked(t *testing.T) {
	needGit(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := gitFixture(t, u)
		mark := marker(fx, "blocked")
		script := "MARK=" + mark + "\n" + plantScript + `set -e
plant sub
mkdir sub/.git.agentbox-quarantine
for i in $(seq 1 99); do mkdir sub/.git.agentbox-quarantine.$i; done
chmod 0555 sub
echo PLANTED`
		for _, p := range runPaths(t, fx)[:1] {
			r := p.run(t, script)
			if !strings.Contains(r.stdout, "PLANTED") {
				t.Fatalf("plant: %v", r)
			}
			assertAbsent(t, filepath.Join(fx.ws, "sub", ".git"))
			userGit(t, fx, filepath.Join(fx.ws, "sub"), "status")
			if exists(mark) {
				t.Fatal("the user's git status ran the planted core.fsmonitor")
			}
			fi, err := os.Stat(filepath.Join(fx.ws, "sub"))
			if err != nil || fi.Mode().Perm() != 0o555 {
				t.Errorf("sub's mode was not put back: %v %v", fi.Mode(), err)
			}
		}
	})
}

// TestTrustFailsClosed: when agentbox cannot move a planted repository
// aside (here its quarantine directory is unusable), the run fails with
// 125 and the message names the repository.
func TestTrustFailsClosed(t *testing.T) {
	needGit(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := gitFixture(t, u)
		state := filepath.Join(fx.dir, "state-lone")
		if err := os.MkdirAll(filepath.Join(state, "agentbox"), 0o700); err != nil {
			t.Fatal(err)
		}
		chownR(t, state, u)
		// A file where the quarantine directory goes.
		if err := os.WriteFile(filepath.Join(state, "agentbox", "quarantine"), nil, 0o444); err != nil {
			t.Fatal(err)
		}
		r := runWith(t, u, runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0", "XDG_STATE_HOME="+state), dir: fx.ws},
			"run", "-C", fx.ws, "--", "/bin/sh", "-c", "git init -q sub && echo PLANTED")
		if !strings.Contains(r.stdout, "PLANTED") {
			t.Fatalf("plant: %v", r)
		}
		if r.code != 125 || !strings.Contains(r.stderr, "quarantine") {
			t.Errorf("the run did not fail closed naming what it could not do: %v", r)
		}
		// The next run checks again (and still refuses).
		r = runWith(t, u, runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0", "XDG_STATE_HOME="+state), dir: fx.ws},
			"run", "-C", fx.ws, "--", "true")
		if r.code != 125 {
			t.Errorf("a later run started while the planted repository is still there: %v", r)
		}
		os.Remove(filepath.Join(state, "agentbox", "quarantine"))
		r = runWith(t, u, runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0", "XDG_STATE_HOME="+state), dir: fx.ws},
			"run", "-C", fx.ws, "--", "true")
		if r.code != 0 || !strings.Contains(r.stderr, "moved the git repository") {
			t.Errorf("once the quarantine works, the next run must move the repository aside and run: %v", r)
		}
		assertAbsent(t, filepath.Join(fx.ws, "sub", ".git"))
	})
}

// TestTrustConcurrentRuns (finding 2): run A plants a repository and is
// still running when run B of the same workspace starts; A ends first
// (its end must not take the plant for the user's just because B
// runs), then B puts back whatever A's end moved aside, and ends. When the
// last one returns the planted repository is gone from git's sight.
// Lone runs, the resident helper, and parallel calls of one MCP session.
func TestTrustConcurrentRuns(t *testing.T) {
	needGit(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		for _, gitWrites := range []bool{false, true} {
			fx := gitFixture(t, u)
			mark := marker(fx, "concurrent")
			var extra []string
			if gitWrites {
				// The mode whose old check each run made from its own
				// start, which B's start laundered.
				cfg := filepath.Join(fx.dir, "git.toml")
				writeFile(t, cfg, "[sandbox_workspace_write]\nallow_git_writes = true\n")
				chownR(t, fx.dir, u)
				extra = []string{"--config", cfg}
			}
			for _, p := range runPaths(t, fx, extra...) {
				t.Run(fmt.Sprintf("%s/git-writes=%v", p.name, gitWrites), func(t *testing.T) {
					sub := "sub-" + p.name
					// Flags the runs and the test pass each other, in the
					// workspace (where both may write).
					flag := func(n string) string { return filepath.Join(fx.ws, "flag-"+n+"-"+p.name) }
					wait := func(f string) string {
						return fmt.Sprintf(`for i in $(seq 1 600); do [ -e %s ] && break; sleep 0.05; done; [ -e %s ]`, f, f)
					}
					// Start the path's server (helper, session) here, not in
					// the goroutines below.
					if r := p.run(t, "true"); r.code != 0 {
						t.Fatalf("warm-up: %v", r)
					}
					aDone, bDone := make(chan result, 1), make(chan result, 1)
					go func() {
						aDone <- p.run(t, "MARK="+mark+"\n"+plantScript+fmt.Sprintf("plant %s && touch %s && %s && echo A-PLANTED", sub, flag("planted"), wait(flag("b-started"))))
					}()
					if !waitFor(30*time.Second, func() bool { return exists(flag("planted")) }) {
						t.Fatalf("run A did not plant: %v", <-aDone)
					}
					go func() {
						bDone <- p.run(t, fmt.Sprintf(`touch %s && %s && sleep 0.3
for q in %s/.git.* ; do [ -e "$q" ] && mv "$q" %s/.git && echo PUT-BACK; done
echo B-DONE`, flag("b-started"), wait(flag("a-ended")), sub, sub))
					}()
					// A ends once B has started; then B goes on.
					ra := <-aDone
					os.WriteFile(flag("a-ended"), nil, 0o644)
					rb := <-bDone
					if !strings.Contains(ra.stdout, "A-PLANTED") || !strings.Contains(rb.stdout, "B-DONE") {
						t.Fatalf("runs did not overlap as planned:\nA: %v\nB: %v", ra, rb)
					}
					assertAbsent(t, filepath.Join(fx.ws, sub, ".git"))
					userGit(t, fx, filepath.Join(fx.ws, sub), "status")
					if exists(mark) {
						t.Fatal("the user's git status ran the planted core.fsmonitor")
					}
				})
			}
		}
	})
}
