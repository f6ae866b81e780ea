//go:build linux

package linux

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The rule behind findings 4, 5 and 6 of issue 9: no git command the user
// runs on the host afterwards executes anything the sandbox wrote. Each
// test here plants what the red team planted, runs the user's git on the
// host, and checks that the planted program did not run: it would create a
// marker file outside every writable root. Each also runs the same attack
// straight on the host once (the control), so a test that can no longer
// see the attack fails instead of passing.

func needGit(t *testing.T) string {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	return git
}

// userGit runs the user's git on the host in dir, with the fixture's HOME
// (its ~/.gitconfig is the user's global config) and no system config.
func userGit(t *testing.T, fx *fixture, dir string, args ...string) result {
	t.Helper()
	env := append(fx.env(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=u", "GIT_AUTHOR_EMAIL=u@example.com",
		"GIT_COMMITTER_NAME=u", "GIT_COMMITTER_EMAIL=u@example.com")
	return host(t, fx.u, runOpts{env: env, dir: dir}, "/usr/bin/git", args...)
}

func mustGit(t *testing.T, fx *fixture, dir string, args ...string) {
	t.Helper()
	if r := userGit(t, fx, dir, args...); r.code != 0 {
		t.Fatalf("git %q in %s: %v", args, dir, r)
	}
}

// gitFixture is a fixture whose workspace is a real repository with one
// commit, made by the test user's own git.
func gitFixture(t *testing.T, u *testUser) *fixture {
	t.Helper()
	fx := newFixture(t, u)
	os.RemoveAll(filepath.Join(fx.ws, ".git"))
	mustGit(t, fx, fx.ws, "init", "-q", "-b", "main")
	mustGit(t, fx, fx.ws, "add", "file.txt")
	mustGit(t, fx, fx.ws, "commit", "-q", "-m", "init")
	return fx
}

// marker is where a planted program would leave its trace: outside the
// workspace, in a directory the sandbox cannot write.
func marker(fx *fixture, name string) string { return filepath.Join(fx.out, "ran-"+name) }

// hookScript is a program that proves it ran.
func hookScript(fx *fixture, name string) string {
	return fmt.Sprintf("#!/bin/sh\ntouch %q\n", marker(fx, name))
}

// shellAttack runs script as the command would, either in the sandbox or
// (control) straight on the host.
// $EVIL holds the text of a program that leaves the marker named evil.
func shellAttack(t *testing.T, fx *fixture, sandbox bool, cwd, evil, script string) result {
	t.Helper()
	o := runOpts{env: append(fx.env(), "EVIL="+hookScript(fx, evil)), dir: cwd}
	if sandbox {
		return runWith(t, fx.u, o, "run", "-C", cwd, "--", "/bin/sh", "-c", script)
	}
	return host(t, fx.u, o, "/bin/sh", "-c", script)
}

// TestGitSubmoduleGitfileAttack is finding 4: run 1 renames the key in
// .gitmodules that the old parser looked for (git matches it in any case),
// run 2 builds a gitdir with core.fsmonitor and points lib/.git at it; the
// user's `git status` in the superproject then runs the monitor.
func TestGitSubmoduleGitfileAttack(t *testing.T) {
	needGit(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		for _, sandbox := range []bool{false, true} {
			fx := gitFixture(t, u)
			lib := filepath.Join(fx.dir, "libsrc")
			os.MkdirAll(lib, 0o755)
			os.WriteFile(filepath.Join(lib, "l.txt"), []byte("l\n"), 0o644)
			chownR(t, fx.dir, u)
			mustGit(t, fx, lib, "init", "-q", "-b", "main")
			mustGit(t, fx, lib, "add", "l.txt")
			mustGit(t, fx, lib, "commit", "-q", "-m", "lib")
			mustGit(t, fx, fx.ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "lib")
			mustGit(t, fx, fx.ws, "commit", "-q", "-m", "add lib")
			gitfile, _ := os.ReadFile(filepath.Join(fx.ws, "lib", ".git"))

			run1 := `sed -i 's/^\([[:space:]]*\)path = lib/\1PATH = lib/' "$WS/.gitmodules" && echo run1`
			run2 := `set -e
mkdir -p "$WS/evil"
cp -r "$WS/.git/modules/lib/HEAD" "$WS/.git/modules/lib/objects" "$WS/.git/modules/lib/refs" "$WS/evil/"
printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = %s\n' "$WS/fsm.sh" > "$WS/evil/config"
printf '%s' "$EVIL" > "$WS/fsm.sh"; chmod +x "$WS/fsm.sh"
echo "gitdir: $WS/evil" > "$WS/lib/.git" 2>/dev/null || echo "lib/.git is read-only"
echo run2`
			if r := shellAttack(t, fx, sandbox, fx.ws, "fsmonitor", run1); !strings.Contains(r.stdout, "run1") {
				t.Fatalf("run 1 (sandbox %v): %v", sandbox, r)
			}
			if r := shellAttack(t, fx, sandbox, fx.ws, "fsmonitor", run2); !strings.Contains(r.stdout, "run2") {
				t.Fatalf("run 2 (sandbox %v): %v", sandbox, r)
			}
			userGit(t, fx, fx.ws, "status")
			if !sandbox {
				if !exists(marker(fx, "fsmonitor")) {
					t.Fatal("control: the attack run on the host did not make git status run the planted fsmonitor; the test no longer sees the attack")
				}
				continue
			}
			assertAbsent(t, marker(fx, "fsmonitor"))
			assertContent(t, filepath.Join(fx.ws, "lib", ".git"), string(gitfile))
		}
	})
}

// TestGitHooksPathAttack is finding 5: with core.hooksPath = .husky (the
// husky set-up) the command rewrites .husky/pre-commit, and with a
// hooksPath that does not exist yet it creates it; the user's next commit
// runs the hook.
func TestGitHooksPathAttack(t *testing.T) {
	needGit(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		for _, c := range []struct {
			name, hooksPath string
			exists          bool
		}{{"husky", ".husky", true}, {"missing", ".githooks", false}} {
			for _, sandbox := range []bool{false, true} {
				fx := gitFixture(t, u)
				mustGit(t, fx, fx.ws, "config", "core.hooksPath", c.hooksPath)
				hooks := filepath.Join(fx.ws, c.hooksPath)
				if c.exists {
					os.MkdirAll(hooks, 0o755)
					os.WriteFile(filepath.Join(hooks, "pre-commit"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
					chownR(t, fx.dir, u)
				}
				script := fmt.Sprintf(`mkdir -p %q 2>/dev/null; printf '%%s' "$EVIL" > %q 2>/dev/null && chmod +x %q; echo done`,
					hooks, filepath.Join(hooks, "pre-commit"), filepath.Join(hooks, "pre-commit"))
				if r := shellAttack(t, fx, sandbox, fx.ws, "hook", script); !strings.Contains(r.stdout, "done") {
					t.Fatalf("%s (sandbox %v): %v", c.name, sandbox, r)
				}
				userGit(t, fx, fx.ws, "commit", "-q", "--allow-empty", "-m", "review")
				if !sandbox {
					if !exists(marker(fx, "hook")) {
						t.Fatalf("control %s: the planted hook did not run on the host; the test no longer sees the attack", c.name)
					}
					continue
				}
				if exists(marker(fx, "hook")) {
					t.Errorf("%s: the user's git commit ran a hook the sandbox wrote in %s", c.name, c.hooksPath)
				}
				if !c.exists {
					assertAbsent(t, hooks)
				}
			}
		}
	})
}

// TestGitPlantedBareRepoAttack is finding 6: in a workspace with no .git
// of its own (a subdirectory of a repository) and in a subdirectory of
// it, the command creates HEAD, objects/, refs/ and a config with
// core.pager and core.fsmonitor; `git log` there on the host runs them.
// At the workspace root agentbox keeps HEAD from being planted; deeper,
// the check after the run finds the directory laid out as a bare
// repository and moves its HEAD aside. git's own defence,
// safe.bareRepository=explicit, is reported by doctor and recommended by
// setup. The control plants the same repository on the host, where git
// runs its pager unless safe.bareRepository says otherwise.
func TestGitPlantedBareRepoAttack(t *testing.T) {
	needGit(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		// Each planted repository's pager leaves its own marker: $EVIL_ROOT
		// at the workspace root, $EVIL_DEEP in a subdirectory.
		plant := `plant() {
mkdir -p "$1"; cp -r "$WS/.git/objects" "$WS/.git/refs" "$1/"
echo 'ref: refs/heads/main' > "$1/HEAD" 2>/dev/null || echo "no HEAD in $1"
printf '[core]\n\trepositoryformatversion = 0\n\tbare = true\n\tpager = %s\n' "$1/evil.sh" > "$1/config"
printf '%s' "$2" > "$1/evil.sh"; chmod +x "$1/evil.sh"
}
plant "$PWD" "$EVIL_ROOT"; plant "$PWD/deeper" "$EVIL_DEEP"; echo planted`
		for _, safe := range []bool{false, true} {
			fx := gitFixture(t, u)
			ws := filepath.Join(fx.ws, "sub")
			if safe {
				os.WriteFile(filepath.Join(fx.home, ".gitconfig"), []byte("[safe]\n\tbareRepository = explicit\n"), 0o644)
				chownR(t, fx.dir, u)
			}
			doc := runWith(t, u, runOpts{env: fx.env(), dir: ws}, "doctor", "-C", ws)
			line := ""
			for _, l := range strings.Split(doc.stdout, "\n") {
				if strings.Contains(l, "safe.bareRepository") {
					line = l
				}
			}
			if wantOK := safe; line == "" || strings.Contains(line, "[ok  ]") != wantOK {
				t.Errorf("safe.bareRepository %v: doctor says %q\n%s", safe, line, doc.stdout)
			}
			if set := runWith(t, u, runOpts{env: fx.env(), dir: ws}, "setup"); strings.Contains(set.stdout, "recommended: git config --global safe.bareRepository explicit") == safe {
				t.Errorf("safe.bareRepository %v: agentbox setup says %q", safe, set.stdout)
			}
			r := runWith(t, u, runOpts{env: append(fx.env(), "EVIL_ROOT="+hookScript(fx, "bare-root"), "EVIL_DEEP="+hookScript(fx, "bare-deeper")), dir: ws},
				"run", "-C", ws, "--", "/bin/sh", "-c", plant)
			if !strings.Contains(r.stdout, "planted") {
				t.Fatalf("plant: %v", r)
			}
			ctl := filepath.Join(fx.dir, "control")
			os.MkdirAll(ctl, 0o755)
			chownR(t, fx.dir, u)
			if c := host(t, u, runOpts{env: append(fx.env(), "EVIL_ROOT="+hookScript(fx, "bare-control"), "EVIL_DEEP="+hookScript(fx, "bare-control")), dir: ctl},
				"/bin/sh", "-c", plant); !strings.Contains(c.stdout, "planted") {
				t.Fatalf("control plant: %v", c)
			}
			for _, d := range []string{ws, filepath.Join(ws, "deeper"), ctl} {
				// On a terminal (script(1) gives git one), git log starts
				// the pager the repository's config names.
				env := append(fx.env(), "GIT_CONFIG_NOSYSTEM=1", "TERM=dumb")
				host(t, u, runOpts{env: env, dir: d}, "/usr/bin/script", "-qec", "git log -1; git status", "/dev/null")
			}
			// At the workspace root agentbox itself keeps HEAD from being
			// planted, whatever git's setting; deeper, only git's setting
			// helps.
			assertAbsent(t, filepath.Join(ws, "HEAD"))
			if exists(marker(fx, "bare-root")) {
				t.Errorf("safe.bareRepository %v: the user's git log in the workspace ran the pager of a repository the sandbox planted there", safe)
			}
			if got := exists(marker(fx, "bare-control")); got == safe {
				t.Fatalf("control (safe.bareRepository %v): git on the host ran the planted pager: %v; the test no longer sees the attack or git's defence", safe, got)
			}
			// Deeper, the check after the run moves the planted
			// repository's HEAD aside, whatever git's setting.
			assertAbsent(t, filepath.Join(ws, "deeper", "HEAD"))
			if exists(marker(fx, "bare-deeper")) {
				t.Errorf("safe.bareRepository %v: the user's git ran a program the sandbox planted in a subdirectory", safe)
			}
			if !strings.Contains(r.stderr, "laid out as a bare git repository") {
				t.Errorf("no note says the planted bare repository was disarmed: %v", r)
			}
		}
	})
}

// TestGitConfigNamedPathAttack is the rule behind findings 4-6 beyond
// hooks: a path the user's git configuration names inside the workspace,
// missing until the command creates it — an include.path file (then
// holding core.fsmonitor) and a "!" alias's script — runs when the user
// next runs git there.
func TestGitConfigNamedPathAttack(t *testing.T) {
	needGit(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		for _, c := range []struct {
			name, global, script string
			gitArgs              []string
		}{
			{"include.path", "[include]\n\tpath = %s/.gitconfig.local\n",
				`printf '[core]\n\tfsmonitor = %s\n' "$WS/fsm.sh" > "$WS/.gitconfig.local"; printf '%s' "$EVIL" > "$WS/fsm.sh"; chmod +x "$WS/fsm.sh"; echo done`,
				[]string{"status"}},
			{"alias", "[alias]\n\tst = !%s/tools/st.sh\n",
				`mkdir -p "$WS/tools"; printf '%s' "$EVIL" > "$WS/tools/st.sh"; chmod +x "$WS/tools/st.sh"; echo done`,
				[]string{"st"}},
		} {
			for _, sandbox := range []bool{false, true} {
				fx := gitFixture(t, u)
				os.WriteFile(filepath.Join(fx.home, ".gitconfig"), []byte(fmt.Sprintf(c.global, fx.ws)), 0o644)
				chownR(t, fx.dir, u)
				if r := shellAttack(t, fx, sandbox, fx.ws, "config", c.script); !strings.Contains(r.stdout, "done") {
					t.Fatalf("%s (sandbox %v): %v", c.name, sandbox, r)
				}
				userGit(t, fx, fx.ws, c.gitArgs...)
				if !sandbox {
					if !exists(marker(fx, "config")) {
						t.Fatalf("control %s: the planted program did not run on the host; the test no longer sees the attack", c.name)
					}
					continue
				}
				if exists(marker(fx, "config")) {
					t.Errorf("%s: the user's git ran a program the sandbox wrote at a path the git config names", c.name)
				}
			}
		}
	})
}

// TestGitSubmodulePathSymlinkNoDenial is the near miss of issue 9: a
// .gitmodules path through a symlink the command made must not make every
// later run fail. (Submodules now come from the index, which the command
// cannot edit; a gitlink path is resolved through links.)
func TestGitSubmodulePathSymlinkNoDenial(t *testing.T) {
	needGit(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := gitFixture(t, u)
		r := sandboxed(t, fx, nil, `ln -s loop "$WS/loop"; ln -s "$OUT" "$WS/away"
printf '[submodule "a"]\n\tpath = loop/x\n[submodule "b"]\n\tpath = away/y\n' >> "$WS/.gitmodules"; echo planted`)
		if !strings.Contains(r.stdout, "planted") {
			t.Fatalf("plant: %v", r)
		}
		for i := 0; i < 2; i++ {
			if r := sandboxed(t, fx, nil, `echo fine`); r.code != 0 || !strings.Contains(r.stdout, "fine") {
				t.Fatalf("run %d after the plant fails: %v", i+2, r)
			}
		}
	})
}

// TestGitPlantedAboveNoDenial: a workspace with no repository of its own
// under another writable root (/tmp) lets the command plant a repository
// in the directory above it; the next run scans that repository for what
// git would run. However broken its config (a FIFO, over 1 MiB, includes
// nested past git's limit), that must not make every later run fail.
func TestGitPlantedAboveNoDenial(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		for name, plant := range map[string]string{
			"fifo":         `mkfifo "$DIR/.git/config"`,
			"big":          `head -c 1100000 /dev/zero | tr '\0' '#' > "$DIR/.git/config"`,
			"includes":     `for i in 0 1 2 3 4 5 6 7 8 9 10 11 12; do printf '[include]\n\tpath = c%d\n' $((i+1)) > "$DIR/.git/c$i"; done; cp "$DIR/.git/c0" "$DIR/.git/config"`,
			"fifo-include": `mkfifo "$DIR/fifo"; printf '[include]\n\tpath = ../fifo\n' > "$DIR/.git/config"`,
		} {
			t.Run(name, func(t *testing.T) {
				fx := newFixture(t, u, inTmp)
				ws := filepath.Join(fx.dir, "plain")
				if err := os.Mkdir(ws, 0o755); err != nil {
					t.Fatal(err)
				}
				chownR(t, fx.dir, u)
				run := func(script string) result {
					return runWith(t, u, runOpts{env: fx.env(), dir: ws}, "run", "-C", ws, "--", "/bin/sh", "-c", script)
				}
				r := run(`mkdir -p "$DIR/.git/objects" "$DIR/.git/refs" && echo 'ref: refs/heads/main' > "$DIR/.git/HEAD" && ` + plant + ` && echo planted`)
				if !strings.Contains(r.stdout, "planted") {
					t.Fatalf("plant: %v", r)
				}
				for i := 0; i < 2; i++ {
					if r := run(`echo fine`); r.code != 0 || !strings.Contains(r.stdout, "fine") {
						t.Fatalf("run %d after the plant fails: %v", i+2, r)
					}
				}
			})
		}
	})
}

// TestGitMissingConfigFilesUsable: with the global config in the
// workspace (GIT_CONFIG_GLOBAL; a workspace at $HOME is refused), a
// missing global config and a missing include.path target are protected
// by empty read-only files, not directories: git inside works without a
// warning or the fatal "bad config line" a directory gives, the command
// still cannot create either file, and both are gone afterwards.
func TestGitMissingConfigFilesUsable(t *testing.T) {
	needGit(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := gitFixture(t, u)
		cfg := filepath.Join(fx.ws, ".git", "config")
		b, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(cfg, append(b, "[include]\n\tpath = ../local.cfg\n"...), 0o644)
		local, global := filepath.Join(fx.ws, "local.cfg"), filepath.Join(fx.ws, ".gitconfig")
		script := `git status --porcelain >/dev/null 2>"$TMPDIR/err"; echo "rc=$?"; cat "$TMPDIR/err"
for f in "$WS/local.cfg" "$WS/.gitconfig"; do
  test -f "$f" && test ! -s "$f" && echo "empty-file $f"
  echo x > "$f" 2>/dev/null && echo "wrote $f"
  rm -f "$f" 2>/dev/null && test ! -e "$f" && echo "removed $f"
done; true`
		// Lone runs: a resident helper warmed by an earlier test keeps
		// its sandbox's placeholders until it drops the sandbox (its
		// documented lifetime), and this test checks a run's own.
		env := append(fx.env(), "GIT_CONFIG_GLOBAL="+global, "TMPDIR="+fx.tmpdir, "GIT_CONFIG_NOSYSTEM=1", "AGENTBOX_RESIDENT=0")
		args := []string{"run", "-C", fx.ws, "--add-dir", fx.tmpdir, "--", "/bin/sh", "-c", script}
		for _, mode := range []string{"namespaces", "degraded"} {
			var r result
			if mode == "namespaces" {
				r = runWith(t, u, runOpts{env: env, dir: fx.ws}, args...)
			} else {
				needBin(t)
				r = noUserns(t, u, runOpts{env: env, dir: fx.ws}, binPath, append([]string{"run", "--allow-degraded"}, args[1:]...)...)
			}
			checkMissingConfigFiles(t, mode, r, local, global)
		}
	})
}

func checkMissingConfigFiles(t *testing.T, mode string, r result, local, global string) {
	t.Helper()
	{
		if r.code != 0 || !strings.Contains(r.stdout, "rc=0") {
			t.Fatalf("%s: git status in the sandbox failed: %v", mode, r)
		}
		if strings.Contains(r.stdout, "Is a directory") || strings.Contains(r.stdout, "bad config") {
			t.Errorf("%s: git saw a directory placeholder: %s", mode, r.stdout)
		}
		for _, f := range []string{local, global} {
			if !strings.Contains(r.stdout, "empty-file "+f) {
				t.Errorf("%s: %s is not an empty file inside the sandbox: %s", mode, f, r.stdout)
			}
			// Degraded mode keeps protected paths writable (Landlock cannot
			// carve read-only holes; doctor and every run say so).
			if mode != "degraded" && (strings.Contains(r.stdout, "wrote "+f) || strings.Contains(r.stdout, "removed "+f)) {
				t.Errorf("%s: the command changed %s: %s", mode, f, r.stdout)
			}
			if _, err := os.Lstat(f); !os.IsNotExist(err) {
				t.Errorf("%s: %s left on the host after the run: %v", mode, f, err)
			}
		}
	}
}
