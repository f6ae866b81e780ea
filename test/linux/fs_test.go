//go:build linux

package linux

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestWritesAllowed: the workspace, an --add-dir root, /tmp and $TMPDIR are
// writable; the workspace's and the root's writes are visible on the host,
// those to /tmp and $TMPDIR land in the workspace's private directories
// and never in the host's. With share_slash_tmp = true, they reach the
// host's /tmp and $TMPDIR as before.
func TestWritesAllowed(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		for _, share := range []bool{false, true} {
			fx := newFixture(t, u)
			tmpFile := filepath.Join("/tmp", randName("abtest-w-"))
			t.Cleanup(func() { os.Remove(tmpFile) })
			args := []string{"run", "-C", fx.ws, "--add-dir", fx.add}
			if share {
				cfg := filepath.Join(fx.dir, "share.toml")
				if err := os.WriteFile(cfg, []byte("[sandbox_workspace_write]\nshare_slash_tmp = true\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", cfg)
			}
			r := runWith(t, u, runOpts{dir: fx.ws, env: append(fx.env(), "TMPDIR="+fx.tmpdir, "TMPF="+tmpFile)},
				append(args, "--", "/bin/sh", "-c", `set -e
echo ws > "$WS/new.txt"
mkdir -p "$WS/sub/deep/er" && echo deep > "$WS/sub/deep/er/f"
echo add > "$ADD/new.txt"
echo tmp > "$TMPF"
echo tmpdir > "$TMPDIR/new.txt"
mv "$WS/file.txt" "$WS/renamed.txt"
rm "$WS/renamed.txt"
echo done`)...)
			if r.code != 0 || strings.TrimSpace(r.stdout) != "done" {
				t.Fatalf("share_slash_tmp=%v: writes inside writable roots failed: %v", share, r)
			}
			assertContent(t, filepath.Join(fx.ws, "new.txt"), "ws\n")
			assertContent(t, filepath.Join(fx.ws, "sub/deep/er/f"), "deep\n")
			assertContent(t, filepath.Join(fx.add, "new.txt"), "add\n")
			assertAbsent(t, filepath.Join(fx.ws, "file.txt"))
			assertAbsent(t, filepath.Join(fx.ws, "renamed.txt"))
			if share {
				assertContent(t, tmpFile, "tmp\n")
				assertContent(t, filepath.Join(fx.tmpdir, "new.txt"), "tmpdir\n")
				continue
			}
			assertAbsent(t, tmpFile)
			assertAbsent(t, filepath.Join(fx.tmpdir, "new.txt"))
			assertContent(t, filepath.Join(privateTmp(u, fx.ws, "tmp"), filepath.Base(tmpFile)), "tmp\n")
			assertContent(t, filepath.Join(privateTmp(u, fx.ws, "tmpdir"), "new.txt"), "tmpdir\n")
		}
	})
}

// escapeCase is a script that tries one forbidden write. The same script run
// directly on the host (the control) must achieve it, and breached must
// report it, so the test cannot pass because the script is broken.
type escapeCase struct {
	name   string
	script string
	// breached inspects the host after the run; "" means no breach.
	breached func(fx *fixture) string
	// allow names paths (relative to the fixture dir) the script may
	// legitimately create or change, exempt from the snapshot diff.
	allow []string
	// noControl skips the host control run (the script needs the sandbox).
	noControl bool
	opts      []fixtureOpt
	// extra are agentbox flags besides -C and --add-dir $ADD.
	extra func(fx *fixture) []string
}

func changed(path, want string) func(*fixture) string {
	return func(fx *fixture) string {
		p := fx.expand(path)
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Sprintf("%s: %v", p, err)
		}
		if string(b) != fx.expand(want) {
			return fmt.Sprintf("%s now holds %q", p, b)
		}
		return ""
	}
}

func created(paths ...string) func(*fixture) string {
	return func(fx *fixture) string {
		var got []string
		for _, p := range paths {
			if p = fx.expand(p); exists(p) {
				got = append(got, p+" exists")
			}
		}
		return strings.Join(got, "; ")
	}
}

func removed(paths ...string) func(*fixture) string {
	return func(fx *fixture) string {
		var got []string
		for _, p := range paths {
			if p = fx.expand(p); !exists(p) {
				got = append(got, p+" is gone")
			}
		}
		return strings.Join(got, "; ")
	}
}

func anyOf(checks ...func(*fixture) string) func(*fixture) string {
	return func(fx *fixture) string {
		var got []string
		for _, c := range checks {
			if s := c(fx); s != "" {
				got = append(got, s)
			}
		}
		return strings.Join(got, "; ")
	}
}

// expand replaces $WS, $OUT, $ADD, $HOME, $GITCONFIG, $TXT, $CODEX.
func (fx *fixture) expand(s string) string {
	return strings.NewReplacer("$DIR", fx.dir, "$WS", fx.ws, "$OUT", fx.out, "$ADD", fx.add, "$HOME", fx.home,
		"$GITCONFIG", fx.gitConfig, "$TXT", fx.txt, "$CODEX", fx.codexConfig).Replace(s)
}

// args are the run flags of the case: its fixture's extra writable root
// and whatever the case adds.
func (c escapeCase) args(fx *fixture) []string {
	extra := []string{"--add-dir", fx.add}
	if c.extra != nil {
		extra = append(extra, c.extra(fx)...)
	}
	return extra
}

// checkHost fails t for what the case's script achieved on the host
// beyond what it may: a breach, or any change of the fixture but the
// allowed paths. code is the run's exit status; r is shown on failure.
func (c escapeCase) checkHost(t *testing.T, fx *fixture, before map[string]string, code int, r any) {
	t.Helper()
	if code == 125 {
		t.Errorf("agentbox itself failed (125): %v", r)
	}
	if b := c.breached(fx); b != "" {
		t.Errorf("BREACH: %s\n%v", b, r)
	}
	allow := func(p string) bool {
		for _, a := range c.allow {
			if p == filepath.Join(fx.dir, a) {
				return true
			}
		}
		return false
	}
	for _, d := range diffSnapshots(before, snapshot(t, fx.dir), allow) {
		t.Errorf("host: %s", d)
	}
}

var escapeCases = []escapeCase{
	// Outside every writable root.
	{name: "outside/new", script: `echo x > "$OUT/new"`, breached: created("$OUT/new")},
	{name: "outside/existing", script: `echo x >> "$OUT/file.txt"`, breached: changed("$OUT/file.txt", "$TXT")},
	{name: "outside/mkdir", script: `mkdir "$OUT/d"`, breached: created("$OUT/d")},
	{name: "outside/rm", script: `rm "$OUT/file.txt"`, breached: removed("$OUT/file.txt")},
	{name: "home", script: `echo x > "$HOME/agentbox-test-pwned"`, breached: created("$HOME/agentbox-test-pwned")},
	{name: "home/bashrc", script: `echo 'echo pwned' >> "$HOME/.bashrc"`, breached: created("$HOME/.bashrc")},
	{name: "symlink/new", script: `echo x > "$WS/link/new"`, breached: created("$OUT/new")},
	{name: "symlink/existing", script: `echo x >> "$WS/link/file.txt"`, breached: changed("$OUT/file.txt", "$TXT")},
	{name: "symlink/cd", script: `cd "$WS/link" && echo x > new2`, breached: created("$OUT/new2")},
	{name: "hardlink/from-inside", script: `ln "$OUT/file.txt" "$WS/hl2" && echo x >> "$WS/hl2"`,
		breached: anyOf(created("$WS/hl2"), changed("$OUT/file.txt", "$TXT")), allow: []string{"ws/hl2"}},
	{name: "hardlink/symlink-then-write", script: `ln -s "$OUT/file.txt" "$WS/sl"; echo x >> "$WS/sl"`,
		breached: changed("$OUT/file.txt", "$TXT"), allow: []string{"ws/sl"}},
	{name: "proc-self-root/outside", script: `echo x > "/proc/self/root$OUT/new"`, breached: created("$OUT/new")},
	{name: "proc-self-root/git", script: `echo x >> "/proc/self/root$WS/.git/config"`, breached: changed("$WS/.git/config", "$GITCONFIG")},
	{name: "proc-self-cwd/git", script: `cd "$WS/.git" && echo x >> /proc/self/cwd/config`, breached: changed("$WS/.git/config", "$GITCONFIG")},

	// Protected names inside writable roots.
	{name: "git/config", script: `echo '[core] fsmonitor = "touch /tmp/pwned"' >> "$WS/.git/config"`, breached: changed("$WS/.git/config", "$GITCONFIG")},
	{name: "git/config-replace", script: `printf x > "$WS/cfg" && mv "$WS/cfg" "$WS/.git/config"`,
		breached: changed("$WS/.git/config", "$GITCONFIG"), allow: []string{"ws/cfg"}},
	{name: "git/config-chmod", script: `chmod 0666 "$WS/.git/config"`, breached: func(fx *fixture) string {
		if fi, err := os.Stat(filepath.Join(fx.ws, ".git/config")); err != nil || fi.Mode().Perm() != 0o644 {
			return fmt.Sprintf(".git/config mode changed: %v %v", fi.Mode(), err)
		}
		return ""
	}},
	{name: "git/hooks-new", script: `printf '#!/bin/sh\ntouch /tmp/pwned\n' > "$WS/.git/hooks/pre-commit"`, breached: created("$WS/.git/hooks/pre-commit")},
	{name: "git/hooks-mkdir", script: `mkdir "$WS/.git/hooks/d"`, breached: created("$WS/.git/hooks/d")},
	{name: "git/rm-rf", script: `rm -rf "$WS/.git"`, breached: anyOf(removed("$WS/.git/config", "$WS/.git/HEAD", "$WS/.git/hooks"))},
	{name: "git/mv-aside", script: `mv "$WS/.git" "$WS/x" && mkdir -p "$WS/.git/hooks" && echo x > "$WS/.git/hooks/pre-commit"`,
		breached: anyOf(created("$WS/x", "$WS/.git/hooks/pre-commit"), changed("$WS/.git/config", "$GITCONFIG"))},
	{name: "git/mv-aside-cd", script: `cd "$WS" && mv .git x`, breached: anyOf(created("$WS/x"), removed("$WS/.git/config"))},
	{name: "git/replace-with-symlink", script: `cd "$WS" && rm -rf .git; ln -sfn "$OUT" .git`, breached: removed("$WS/.git/config")},
	{name: "git/add-dir", script: `echo x >> "$ADD/.git/config"`, breached: changed("$ADD/.git/config", "$GITCONFIG")},
	{name: "git/add-dir-rm", script: `rm -rf "$ADD/.git"`, breached: removed("$ADD/.git/config")},
	{name: "codex/existing", script: `echo 'model = "pwned"' > "$WS/.codex/config.toml"`, breached: changed("$WS/.codex/config.toml", "$CODEX")},
	{name: "codex/new-file", script: `echo x > "$WS/.codex/hooks.json"`, breached: created("$WS/.codex/hooks.json")},
	{name: "codex/rm", script: `rm -rf "$WS/.codex"`, breached: removed("$WS/.codex/config.toml")},
	{name: "codex/swap-symlink", script: `cd "$WS" && mv .codex decoy; ln -s decoy .codex`,
		breached: anyOf(created("$WS/decoy"), removed("$WS/.codex/config.toml"))},
	{name: "workspace/mv-aside", script: `cd / && mv "$WS" "$WS.moved"`, breached: anyOf(created("$WS.moved"), removed("$WS/.git/config"))},
	// The parent chain of a protected directory up to its writable root
	// cannot be renamed aside either (then a fresh .git could be made).
	{name: "ancestor/mv-workspace-in-add-dir", script: `cd / && mv "$WS" "$WS.moved" && mkdir -p "$WS/.git/hooks" && echo x > "$WS/.git/hooks/pre-commit"`,
		breached: created("$WS.moved", "$WS/.git/hooks/pre-commit"), extra: func(fx *fixture) []string { return []string{"--add-dir", fx.dir} },
		opts: []fixtureOpt{homeOutside}},
	{name: "ancestor/mv-workspace-in-tmp", script: `cd / && mv "$WS" "$WS.moved" && mkdir -p "$WS/.git/hooks" && echo x > "$WS/.git/hooks/pre-commit"`,
		breached: created("$WS.moved", "$WS/.git/hooks/pre-commit"), opts: []fixtureOpt{inTmp}},
	{name: "ancestor/mv-parent-in-tmp", script: `cd / && mv "$DIR" "$DIR.moved" && mkdir -p "$WS/.git/hooks" && echo x > "$WS/.git/hooks/pre-commit"`,
		breached: created("$DIR.moved", "$WS/.git/hooks/pre-commit"), opts: []fixtureOpt{inTmp}},

	// Protected names that do not exist yet must not be creatable.
	{name: "missing/mkdir-codex", script: `mkdir "$WS/.codex"`, breached: created("$WS/.codex"), opts: []fixtureOpt{noCodex}},
	{name: "missing/mkdir-p-codex", script: `mkdir -p "$WS/.codex/x" && echo x > "$WS/.codex/config.toml"`, breached: created("$WS/.codex"), opts: []fixtureOpt{noCodex}},
	{name: "missing/touch-codex", script: `touch "$WS/.codex"`, breached: created("$WS/.codex"), opts: []fixtureOpt{noCodex}},
	{name: "missing/mv-into-codex", script: `mkdir "$WS/d" && echo x > "$WS/d/config.toml" && mv "$WS/d" "$WS/.codex"`,
		breached: created("$WS/.codex"), allow: []string{"ws/d", "ws/d/config.toml"}, opts: []fixtureOpt{noCodex}},
	{name: "missing/mv-file-into-codex", script: `echo x > "$WS/f" && mv "$WS/f" "$WS/.codex"`,
		breached: created("$WS/.codex"), allow: []string{"ws/f"}, opts: []fixtureOpt{noCodex}},
	{name: "missing/symlink-codex", script: `ln -s /tmp "$WS/.codex"`, breached: created("$WS/.codex"), opts: []fixtureOpt{noCodex}},
	{name: "missing/hardlink-codex", script: `echo x > "$WS/f" && ln "$WS/f" "$WS/.codex"`,
		breached: created("$WS/.codex"), allow: []string{"ws/f"}, opts: []fixtureOpt{noCodex}},
	{name: "missing/mkdir-agents", script: `mkdir "$WS/.agents"`, breached: created("$WS/.agents"), opts: []fixtureOpt{noCodex}},
	{name: "missing/mv-into-agents", script: `mkdir "$WS/d" && mv "$WS/d" "$WS/.agents"`,
		breached: created("$WS/.agents"), allow: []string{"ws/d"}, opts: []fixtureOpt{noCodex}},
	{name: "missing/codex-in-add-dir", script: `mkdir "$ADD/.codex"`, breached: created("$ADD/.codex"), opts: []fixtureOpt{noCodex}},
}

// TestEscapes runs every escapeCase: control on the host, then sandboxed
// (with an --add-dir root) on a fresh fixture; the host must be unchanged
// apart from the paths a case allows.
func TestEscapes(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		for _, c := range escapeCases {
			t.Run(c.name, func(t *testing.T) {
				if !c.noControl {
					ctl := newFixture(t, u, c.opts...)
					t.Cleanup(func() { os.RemoveAll(ctl.dir + ".moved") })
					host(t, u, runOpts{dir: ctl.ws, env: ctl.env()}, "/bin/sh", "-c", c.script)
					if c.breached(ctl) == "" {
						t.Fatalf("control: the script did not achieve its effect on the host; the test is broken")
					}
				}
				fx := newFixture(t, u, c.opts...)
				before := snapshot(t, fx.dir)
				tmpBefore := tmpNames()
				t.Cleanup(func() { os.RemoveAll(fx.dir + ".moved") })
				r := sandboxed(t, fx, c.args(fx), c.script)
				c.checkHost(t, fx, before, r.code, r)
				assertNoTmpLeftovers(t, tmpBefore)
			})
		}
	})
}

// TestProtectedLeftovers: with .codex and .agents missing, a run must leave
// the workspace exactly as it was: no placeholder, no protected name.
func TestProtectedLeftovers(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, noCodex)
		before := snapshot(t, fx.dir)
		tmpBefore := tmpNames()
		r := sandboxed(t, fx, []string{"--add-dir", fx.add}, `ls -a "$WS" && echo ok`)
		if r.code != 0 {
			t.Errorf("run failed: %v", r)
		}
		for _, d := range diffSnapshots(before, snapshot(t, fx.dir), nil) {
			t.Errorf("host after run: %s", d)
		}
		assertAbsent(t, filepath.Join(fx.ws, ".codex"))
		assertAbsent(t, filepath.Join(fx.ws, ".agents"))
		assertAbsent(t, filepath.Join(fx.add, ".codex"))
		assertNoTmpLeftovers(t, tmpBefore)
	})
}

// TestWorkspaceInTmp: a workspace below the host's /tmp is the host's
// directory inside the sandbox's private /tmp, and still has its .git
// read-only.
func TestWorkspaceInTmp(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, inTmp)
		r := sandboxed(t, fx, nil, `echo x >> "$WS/.git/config"; rm -rf "$WS/.git/hooks"; mv "$WS/.git" "$WS/g2"; mkdir "$WS/.codex/x"; echo ok > "$WS/new.txt"`)
		assertContent(t, filepath.Join(fx.ws, ".git/config"), fx.gitConfig)
		if !exists(filepath.Join(fx.ws, ".git/hooks")) {
			t.Errorf("host: .git/hooks removed")
		}
		assertAbsent(t, filepath.Join(fx.ws, "g2"))
		assertAbsent(t, filepath.Join(fx.ws, ".codex/x"))
		assertContent(t, filepath.Join(fx.ws, "new.txt"), "ok\n")
		if t.Failed() {
			t.Logf("agentbox: %v", r)
		}
	})
}

// TestWorktree: the workspace is a linked worktree whose main repository is
// elsewhere (outside, or under the host's /tmp, which the sandbox's
// private /tmp replaces): the worktree's gitdir and the main .git stay
// visible and read-only.
func TestWorktree(t *testing.T) {
	if _, err := os.Stat("/usr/bin/git"); err != nil {
		t.Skip("git not installed")
	}
	for _, where := range []string{"outside", "tmp"} {
		t.Run(where, func(t *testing.T) {
			forEachUser(t, func(t *testing.T, u *testUser) {
				var fx *fixture
				if where == "tmp" {
					fx = newFixture(t, u, inTmp)
				} else {
					fx = newFixture(t, u)
				}
				main := filepath.Join(fx.dir, "repo")
				wt := filepath.Join(fx.dir, "wt")
				git := func(args ...string) {
					t.Helper()
					args = append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)
					if r := host(t, u, runOpts{dir: fx.dir}, "/usr/bin/git", args...); r.code != 0 {
						t.Fatalf("git %v: %v", args, r)
					}
				}
				git("init", "-q", main)
				git("-C", main, "commit", "-q", "--allow-empty", "-m", "init")
				git("-C", main, "worktree", "add", "-q", wt)
				gitdir := filepath.Join(main, ".git", "worktrees", "wt")
				dotgit, _ := os.ReadFile(filepath.Join(wt, ".git"))
				if !strings.Contains(string(dotgit), gitdir) {
					t.Fatalf("worktree .git = %q, want gitdir %s", dotgit, gitdir)
				}
				mainBefore := snapshot(t, filepath.Join(main, ".git"))
				wtGitBefore := string(dotgit)
				r := runWith(t, u, runOpts{dir: wt, env: []string{"MAIN=" + main, "GITDIR=" + gitdir, "WT=" + wt}},
					"run", "-C", wt, "--", "/bin/sh", "-c", `
echo x >> "$GITDIR/HEAD"
echo x > "$GITDIR/new"
echo x >> "$MAIN/.git/config"
printf '#!/bin/sh\n' > "$MAIN/.git/hooks/post-checkout"
rm -rf "$MAIN/.git/worktrees"
mv "$MAIN/.git" "$MAIN/g2"
echo x >> "$WT/.git"
mv "$WT/.git" "$WT/g2"
echo "gitdir: /tmp" > "$WT/.git"
echo ok > "$WT/new.txt"
git log --oneline >/dev/null 2>&1 && echo log-ok
echo done`)
				if !strings.Contains(r.stdout, "done") {
					t.Errorf("script did not run to the end: %v", r)
				}
				for _, d := range diffSnapshots(mainBefore, snapshot(t, filepath.Join(main, ".git")), nil) {
					t.Errorf("host: main .git: %s", d)
				}
				assertContent(t, filepath.Join(wt, ".git"), wtGitBefore)
				assertAbsent(t, filepath.Join(wt, "g2"))
				assertAbsent(t, filepath.Join(main, "g2"))
				assertContent(t, filepath.Join(wt, "new.txt"), "ok\n")
				if !strings.Contains(r.stdout, "log-ok") {
					t.Errorf("git log inside the worktree failed (reads of the gitdir must work): %v", r)
				}
				if where == "tmp" {
					// The rest of /tmp is the sandbox's own: a write to the
					// main work tree's path lands in the private /tmp, not
					// in the host's repository.
					r2 := runWith(t, u, runOpts{dir: wt, env: []string{"MAIN=" + main}}, "run", "-C", wt, "--", "/bin/sh", "-c", `echo ok > "$MAIN/tmpwrite"`)
					assertAbsent(t, filepath.Join(main, "tmpwrite"))
					assertContent(t, filepath.Join(privateTmp(u, wt, "tmp"), strings.TrimPrefix(main, "/tmp/"), "tmpwrite"), "ok\n")
					if r2.code != 0 {
						t.Errorf("write to main work tree's path under /tmp: %v", r2)
					}
				}
				if t.Failed() {
					t.Logf("agentbox: %v", r)
				}
			})
		})
	}
}

// TestMountAttacks: remounting, unmounting the protective binds and nested
// user namespaces must not make protected or outside paths writable.
func TestMountAttacks(t *testing.T) {
	cases := []struct{ name, script string }{
		{"remount-root-rw", `mount -o remount,rw /; echo x > "$OUT/new"; echo x >> "$WS/.git/config"`},
		{"remount-git-rw", `mount -o remount,rw,bind "$WS/.git"; echo x >> "$WS/.git/config"`},
		{"umount-git", `umount "$WS/.git"; echo x >> "$WS/.git/config"; touch "$WS/.git/hooks/pre-commit"`},
		{"umount-l-git", `umount -l "$WS/.git"; echo x >> "$WS/.git/config"; touch "$WS/.git/hooks/pre-commit"`},
		{"umount-codex-placeholder", `umount -l "$WS/.codex"; umount -l "$WS/.agents"; rm -rf "$WS/.codex"; mkdir "$WS/.codex" && echo x > "$WS/.codex/config.toml"; mkdir "$WS/.agents"`},
		{"mount-bind-over", `mount --bind "$WS" "$OUT"; echo x > "$OUT/new"`},
		{"unshare-umount-git", `unshare -Urm sh -c 'umount -l "$WS/.git"; echo x >> "$WS/.git/config"; touch "$WS/.git/hooks/pre-commit"'`},
		{"unshare-remount-root", `unshare -Urm sh -c 'mount -o remount,rw /; echo x > "$OUT/new"'`},
		{"unshare-remount-git", `unshare -Urm sh -c 'mount -o remount,rw,bind "$WS/.git"; echo x >> "$WS/.git/config"'`},
		{"unshare-umount-codex", `unshare -Urm sh -c 'umount -l "$WS/.codex"; mkdir "$WS/.codex"; echo x > "$WS/.codex/config.toml"'`},
		{"unshare-bind-outside", `unshare -Urm sh -c 'mkdir -p /tmp/abtest-m; mount --bind "$WS" "$OUT" && echo x > "$OUT/new"'`},
		{"unshare-nested-pid", `unshare -Urmpf --mount-proc sh -c 'umount -l "$WS/.git"; echo x >> "$WS/.git/config"'`},
	}
	hostNS, _ := os.Readlink("/proc/self/ns/mnt")
	forEachUser(t, func(t *testing.T, u *testUser) {
		// Safety: these scripts mount and unmount. If agentbox ran them in
		// the host's mount namespace (as root) they would change the host.
		probe := runWith(t, u, runOpts{}, "run", "-C", newFixture(t, u).ws, "--", "readlink", "/proc/self/ns/mnt")
		if ns := strings.TrimSpace(probe.stdout); ns == "" || ns == hostNS {
			t.Fatalf("the sandbox does not have its own mount namespace (%q, host %q); not running mount attacks: %v", ns, hostNS, probe)
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				fx := newFixture(t, u, noCodex)
				before := snapshot(t, fx.dir)
				r := sandboxed(t, fx, nil, c.script+"; echo end")
				if !strings.Contains(r.stdout, "end") {
					t.Errorf("script did not run to the end: %v", r)
				}
				for _, d := range diffSnapshots(before, snapshot(t, fx.dir), nil) {
					t.Errorf("host: %s", d)
				}
				if t.Failed() {
					t.Logf("agentbox: %v", r)
				}
			})
		}
	})
}

// TestReadOnlyMode: -s read-only writes nothing anywhere but can read.
func TestReadOnlyMode(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		tmpFile := filepath.Join("/tmp", randName("abtest-ro-"))
		shmFile := filepath.Join("/dev/shm", randName("abtest-ro-"))
		t.Cleanup(func() { os.Remove(tmpFile); os.Remove(shmFile) })
		before := snapshot(t, fx.dir)
		beforeHome := snapshot(t, u.home)
		r := runWith(t, u, runOpts{dir: fx.ws, env: append(fx.env(), "TMPDIR="+fx.tmpdir, "TMPF="+tmpFile, "SHMF="+shmFile)},
			"run", "-s", "read-only", "-C", fx.ws, "--add-dir", fx.add, "--", "/bin/sh", "-c", `
for f in "$WS/new" "$WS/file.txt" "$WS/sub/new" "$ADD/new" "$TMPF" "$TMPDIR/new" "$HOME/new" "$OUT/new" "$WS/.git/config"; do
  (echo x >> "$f") 2>/dev/null && echo "WROTE $f"
done
(echo x >> "$SHMF") 2>/dev/null && echo "shm-private-write"
mkdir "$WS/d" 2>/dev/null && echo "WROTE $WS/d"
rm "$WS/file.txt" 2>/dev/null && echo "REMOVED file.txt"
echo discard > /dev/null && echo devnull-ok
cat "$WS/file.txt"
cat "$OUT/file.txt"`)
		if strings.Contains(r.stdout, "WROTE") || strings.Contains(r.stdout, "REMOVED") {
			t.Errorf("write succeeded in read-only mode: %v", r)
		}
		if strings.Contains(r.stdout, "shm-private-write") {
			// Not a host write (checked below): /dev/shm is private.
			t.Logf("note: read-only mode lets the command write its private /dev/shm")
		}
		if !strings.Contains(r.stdout, "devnull-ok") || strings.Count(r.stdout, "orig") != 2 {
			t.Errorf("reads or /dev/null failed in read-only mode: %v", r)
		}
		for _, d := range diffSnapshots(before, snapshot(t, fx.dir), nil) {
			t.Errorf("host: %s", d)
		}
		for _, d := range diffSnapshots(beforeHome, snapshot(t, u.home), nil) {
			t.Errorf("host: %s", d)
		}
		assertAbsent(t, tmpFile)
		assertAbsent(t, shmFile)
	})
}

// TestDevShm: /dev/shm inside the sandbox is not the host's.
func TestDevShm(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		name := randName("abtest-shm-")
		t.Cleanup(func() { os.Remove("/dev/shm/" + name) })
		r := runWith(t, u, runOpts{dir: fx.ws, env: []string{"N=" + name}}, "run", "-C", fx.ws, "--",
			"/bin/sh", "-c", `echo x > "/dev/shm/$N"; ls /dev/shm >/dev/null; echo end`)
		assertAbsent(t, "/dev/shm/"+name)
		if !strings.Contains(r.stdout, "end") {
			t.Errorf("run: %v", r)
		}
	})
}

// TestParallelRuns: 20 commands at once on one workspace (with .codex and
// .agents missing, so any placeholders race) all succeed and leave only
// their own files.
func TestParallelRuns(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, noCodex)
		before := snapshot(t, fx.dir)
		tmpBefore := tmpNames()
		const n = 20
		var wg sync.WaitGroup
		results := make([]result, n)
		for i := range n {
			wg.Go(func() {
				results[i] = runWith(t, u, runOpts{dir: fx.ws, env: []string{fmt.Sprintf("I=%d", i)}, timeout: 60e9},
					"run", "-C", fx.ws, "--", "/bin/sh", "-c", `echo "$I" > "f$I" && cat "f$I" && test -d .git`)
			})
		}
		wg.Wait()
		allow := map[string]bool{}
		for i, r := range results {
			if r.code != 0 || strings.TrimSpace(r.stdout) != fmt.Sprint(i) {
				t.Errorf("run %d: %v", i, r)
			}
			p := filepath.Join(fx.ws, fmt.Sprintf("f%d", i))
			assertContent(t, p, fmt.Sprintf("%d\n", i))
			allow[p] = true
		}
		for _, d := range diffSnapshots(before, snapshot(t, fx.dir), func(p string) bool { return allow[p] }) {
			t.Errorf("host after parallel runs: %s", d)
		}
		assertNoTmpLeftovers(t, tmpBefore)
	})
}

// TestProtectedIndirect: protection follows what is on disk. A .codex that
// is a symlink protects its target; a .git file (submodule style) protects
// the gitdir it names, here inside the workspace.
func TestProtectedIndirect(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, noCodex)
		decoy := filepath.Join(fx.ws, "decoy")
		os.MkdirAll(decoy, 0o755)
		os.WriteFile(filepath.Join(decoy, "config.toml"), []byte(fx.codexConfig), 0o644)
		os.Symlink("decoy", filepath.Join(fx.ws, ".codex"))
		sub := filepath.Join(fx.ws, "sub")
		modGit := filepath.Join(fx.ws, "modules", "sub")
		os.MkdirAll(filepath.Join(modGit, "hooks"), 0o755)
		os.WriteFile(filepath.Join(modGit, "config"), []byte(fx.gitConfig), 0o644)
		os.WriteFile(filepath.Join(sub, ".git"), []byte("gitdir: ../modules/sub\n"), 0o644)
		chownR(t, fx.dir, u)
		// sub is a writable root of its own (--add-dir), so its .git file
		// is a protected name there.
		before := snapshot(t, fx.dir)
		r := sandboxed(t, fx, []string{"--add-dir", sub}, `
echo x >> "$WS/.codex/config.toml"
echo x >> "$WS/decoy/config.toml"
echo x > "$WS/decoy/new"
rm -f "$WS/.codex"; mkdir "$WS/.codex"
echo x >> "$WS/modules/sub/config"
echo x > "$WS/modules/sub/hooks/pre-commit"
echo "gitdir: /tmp" > "$WS/sub/.git"
echo ok > "$WS/sub/new.txt"
echo end`)
		if !strings.Contains(r.stdout, "end") {
			t.Errorf("script did not finish: %v", r)
		}
		assertContent(t, filepath.Join(sub, "new.txt"), "ok\n")
		newTxt := filepath.Join(sub, "new.txt")
		for _, d := range diffSnapshots(before, snapshot(t, fx.dir), func(p string) bool { return p == newTxt }) {
			t.Errorf("host: %s", d)
		}
		if t.Failed() {
			t.Logf("agentbox: %v", r)
		}
	})
}
