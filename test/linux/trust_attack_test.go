//go:build linux

package linux

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An outside attack on the post-run check (issue 21, round 5): shapes
// git accepts as a repository that the check missed, file systems whose
// times are coarse, runs of overlapping roots, writes through a hard
// link outside the watched roots, and runs that may go degraded. Each
// test plants through the three run paths (lone, resident helper, MCP
// session) where the plant can travel them, as root and as a plain user,
// and asks the user's own git on the host afterwards.

// plantedConfig reports whether the user's git in dir reads the planted
// core.fsmonitor value want: git takes a repository there that the
// command configured.
func plantedConfig(t *testing.T, fx *fixture, dir, want string) bool {
	t.Helper()
	r := userGit(t, fx, dir, "config", "core.fsmonitor")
	return strings.TrimSpace(r.stdout) == want
}

// TestTrustAttackBareShapes: directories git's discovery takes for a git
// directory without objects/ and refs/ of their own as plain
// directories: a HEAD and a commondir naming another directory, objects
// as a symlink and refs as a file, an upper-case object id in HEAD with
// more after it. git run in them reads the config the command wrote;
// after the run it must not.
func TestTrustAttackBareShapes(t *testing.T) {
	needGit(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := gitFixture(t, u)
		const plant = `bare() { # $1: directory, $2: its config's directory
cfg="$2"; mkdir -p "$1" "$cfg" && printf '[core]\n\tbare = false\n\tfsmonitor = %s\n' "$PWD/$1.fsmon" > "$cfg/config"
}
shapes() { # $1: prefix
set -e
mkdir -p "$1-common/objects" "$1-common/refs"
bare "$1-x" "$1-common"; printf 'ref: refs/heads/main\n' > "$1-x/HEAD"; echo "../$(basename "$1")-common" > "$1-x/commondir"
bare "$1-y" "$1-y"; mkdir -p "$1-objs"; ln -s "../$(basename "$1")-objs" "$1-y/objects"; : > "$1-y/refs"; chmod 755 "$1-y/refs"; printf 'ref: \trefs/heads/main\n' > "$1-y/HEAD"
bare "$1-z" "$1-z"; mkdir -p "$1-z/objects" "$1-z/refs"; printf 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\nmore\n' > "$1-z/HEAD"
}
`
		dirs := func(prefix string) []string {
			return []string{prefix + "-x", prefix + "-y", prefix + "-z"}
		}
		// Control: the shapes, made on the host, are repositories whose
		// config git reads.
		ctl := host(t, u, runOpts{env: fx.env(), dir: fx.ws}, "/bin/sh", "-c", plant+"shapes deep/ctl")
		if ctl.code != 0 {
			t.Fatalf("control plant: %v", ctl)
		}
		for _, d := range dirs("deep/ctl") {
			if !plantedConfig(t, fx, filepath.Join(fx.ws, d), filepath.Join(fx.ws, d+".fsmon")) {
				t.Fatalf("control: git in %s does not read the planted config; the test no longer sees the attack", d)
			}
		}
		os.RemoveAll(filepath.Join(fx.ws, "deep"))
		for _, p := range runPaths(t, fx) {
			t.Run(p.name, func(t *testing.T) {
				prefix := "deep/er/" + p.name
				r := p.run(t, plant+"shapes "+prefix+" && echo PLANTED")
				if r.code != 0 || !strings.Contains(r.stdout, "PLANTED") {
					t.Fatalf("plant: %v", r)
				}
				for _, d := range dirs(prefix) {
					if plantedConfig(t, fx, filepath.Join(fx.ws, d), filepath.Join(fx.ws, d+".fsmon")) {
						t.Errorf("the user's git in %s reads the config the command planted (%v)", d, r)
					}
				}
			})
		}
	})
}

// TestTrustAttackOverlappingRoots: a run of ws/sub (which keeps
// ws/sub/.git, its own root's repository, read-only, or opened with
// --allow-git-writes) holds its window while a run of ws, for which
// ws/sub/.git is just a nested repository it may write, rewrites its
// config; the ws run ends first. Neither check may take the config for
// the user's: the ws run's check leaves ws/sub to the run still going,
// whose check used to skip what it kept read-only. Both orders of
// starting. The planting run goes through each path; the ws/sub run is
// a lone run.
func TestTrustAttackOverlappingRoots(t *testing.T) {
	needGit(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := gitFixture(t, u)
		sub := filepath.Join(fx.ws, "sub")
		mark := marker(fx, "overlap")
		// The inner run coordinates with the planting run through the
		// state directory that path uses (a user has one).
		states := map[string]string{
			"lone": filepath.Join(fx.dir, "state-lone"), "helper": filepath.Join(fx.dir, "state"),
			"mcp": filepath.Join(u.home, ".state"),
		}
		type variant struct {
			innerFirst bool
			inner      []string
		}
		variants := []variant{{true, nil}, {false, nil}, {true, []string{"--allow-git-writes"}}}
		for _, p := range runPaths(t, fx) {
			if r := p.run(t, "true"); r.code != 0 { // the path's server and state first
				t.Fatalf("%s warm-up: %v", p.name, r)
			}
			state := states[p.name]
			for _, v := range variants {
				t.Run(fmt.Sprintf("%s/inner-first=%v/%v", p.name, v.innerFirst, v.inner), func(t *testing.T) {
					os.RemoveAll(sub)
					mustGit(t, fx, fx.ws, "init", "-q", sub)
					chownR(t, sub, u)
					time.Sleep(50 * time.Millisecond)
					flag := func(n string) string { return filepath.Join(sub, "flag-"+n) }
					wait := func(f string) string {
						return fmt.Sprintf(`for i in $(seq 1 600); do [ -e %s ] && break; sleep 0.05; done; [ -e %s ]`, f, f)
					}
					innerDone := make(chan result, 1)
					startInner := func() {
						go func() {
							args := append(append([]string{"run", "-C", sub}, v.inner...), "--", "/bin/sh", "-c",
								fmt.Sprintf("touch %s && %s && echo INNER-DONE", flag("inner"), wait(flag("release"))))
							innerDone <- runWith(t, u, runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0", "XDG_STATE_HOME="+state), dir: sub, timeout: 60 * time.Second}, args...)
						}()
						if !waitFor(30*time.Second, func() bool { return exists(flag("inner")) }) {
							t.Fatalf("the inner run did not start: %v", <-innerDone)
						}
					}
					if v.innerFirst {
						startInner()
					}
					outerDone := make(chan result, 1)
					go func() {
						outerDone <- p.run(t, fmt.Sprintf(`set -e
printf '#!/bin/sh\ntouch %s\n' > sub.fsmon && chmod +x sub.fsmon
git -C sub config core.fsmonitor "$PWD/sub.fsmon"
touch %s
%s
echo OUTER-PLANTED`, mark, flag("planted"), wait(flag("inner"))))
					}()
					if !v.innerFirst {
						if !waitFor(30*time.Second, func() bool { return exists(flag("planted")) }) {
							t.Fatalf("the outer run did not plant: %v", <-outerDone)
						}
						startInner()
					}
					ro := <-outerDone
					os.WriteFile(flag("release"), nil, 0o644)
					ri := <-innerDone
					if !strings.Contains(ro.stdout, "OUTER-PLANTED") || !strings.Contains(ri.stdout, "INNER-DONE") {
						t.Fatalf("the runs did not overlap as planned:\nouter: %v\ninner: %v", ro, ri)
					}
					if plantedConfig(t, fx, sub, filepath.Join(fx.ws, "sub.fsmon")) {
						t.Errorf("ws/sub's repository keeps the config the ws run wrote:\nouter: %v\ninner: %v", ro, ri)
					}
					userGit(t, fx, sub, "status")
					if exists(mark) {
						t.Fatal("the user's git status in ws/sub ran the planted core.fsmonitor")
					}
				})
			}
		}
	})
}

// TestTrustAttackDegraded: without user namespaces (allow_degraded) the
// protected paths stay writable (Landlock cannot carve read-only holes
// in a writable root): the root's own .git is then checked as any nested
// repository, and a config the command wrote there is not obeyed.
func TestTrustAttackDegraded(t *testing.T) {
	needGit(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		for _, extra := range [][]string{{"--allow-degraded"}, {"--allow-degraded", "--allow-git-writes"}} {
			t.Run(strings.Join(extra, " "), func(t *testing.T) {
				fx := gitFixture(t, u)
				mark := marker(fx, "degraded")
				time.Sleep(50 * time.Millisecond)
				r := degraded(t, fx, extra, fmt.Sprintf(`printf '#!/bin/sh\ntouch %s\n' > fsmon.sh && chmod +x fsmon.sh &&
git config core.fsmonitor "$PWD/fsmon.sh" && echo PLANTED`, mark))
				if !strings.Contains(r.stdout, "PLANTED") {
					t.Fatalf("the degraded run could not write .git/config (the gap this test is about is gone, or the run failed): %v", r)
				}
				if !strings.Contains(r.stderr, "moved the git repository") {
					t.Errorf("no note says the repository was moved aside: %v", r)
				}
				userGit(t, fx, fx.ws, "status")
				if exists(mark) {
					t.Fatalf("the user's git status ran the core.fsmonitor a degraded run wrote into the root's .git: %v", r)
				}
			})
		}
	})
}

// TestTrustAttackLinkedConfig: a command hard-links a nested
// repository's config into $TMPDIR (shared with share_slash_tmp, and not
// checked) and writes it through the link. Inside the namespaces each
// writable root is a mount of its own, and link(2) across mounts fails
// (EXDEV); a degraded run has no mounts, and the link works. A watcher of
// directories hears nothing of it in the workspace (link(2) and a write
// through the link tell only the link's own directory), so a degraded
// session's sparse check must still see it. A degraded lone run and a
// degraded `agentbox mcp` session.
func TestTrustAttackLinkedConfig(t *testing.T) {
	needGit(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := gitFixture(t, u)
		cfg := filepath.Join(fx.dir, "share.toml")
		writeFile(t, cfg, "[sandbox_workspace_write]\nshare_slash_tmp = true\n")
		chownR(t, fx.dir, u)
		mark := marker(fx, "linked")
		extra := []string{"--allow-degraded", "--config", cfg}
		var cs *mcp.ClientSession
		paths := []runPath{
			{"lone", func(t *testing.T, script string) result { return degraded(t, fx, extra, script) }},
			{"mcp", func(t *testing.T, script string) result {
				if cs == nil {
					args := append([]string{binPath, "mcp", "-C", fx.ws}, extra...)
					cs, _, _ = mcpServerCmd(t, command(u, runOpts{env: append(fx.env(), wrapperEnv+"=nouserns"), dir: fx.ws}, wrapperPath, args...))
				}
				m := mcpSh(t, cs, script)
				return result{stdout: m.Stdout, stderr: m.Stderr, code: m.ExitCode}
			}},
		}
		for _, p := range paths {
			t.Run(p.name, func(t *testing.T) {
				sub := filepath.Join(fx.ws, "nested-"+p.name)
				mustGit(t, fx, fx.ws, "init", "-q", sub)
				chownR(t, sub, u)
				time.Sleep(50 * time.Millisecond)
				// The session and its watcher are up before the attack.
				if r := p.run(t, "true"); r.code != 0 {
					t.Fatalf("warm-up: %v", r)
				}
				if _, err := os.Stat(filepath.Join(sub, ".git/config")); err != nil {
					t.Fatalf("the user's nested repository did not survive a run that did nothing: %v", err)
				}
				time.Sleep(50 * time.Millisecond)
				alias := filepath.Join(suiteTmp, randName("alias-"))
				t.Cleanup(func() { os.Remove(alias) })
				r := p.run(t, fmt.Sprintf(`set -e
printf '#!/bin/sh\ntouch %s\n' > %s.fsmon && chmod +x %s.fsmon
ln %s/.git/config %s
printf '[core]\n\tfsmonitor = %s.fsmon\n' >> %s
echo PLANTED`, mark, sub, sub, sub, alias, sub, alias))
				if !strings.Contains(r.stdout, "PLANTED") {
					t.Fatalf("plant: %v", r)
				}
				if plantedConfig(t, fx, sub, sub+".fsmon") {
					t.Errorf("the nested repository keeps the config written through a link in $TMPDIR: %v", r)
				}
				userGit(t, fx, sub, "status")
				if exists(mark) {
					t.Fatal("the user's git status ran the planted core.fsmonitor")
				}
			})
		}
	})
}

// TestTrustAttackCoarseTimes: a workspace on a file system that keeps
// inode times in whole seconds (ext4 with 128-byte inodes). A plant made
// in the same second the run's window opened is stamped before the
// window's start; it must still count as the command's. Each path plants
// right after a second begins, a few times.
func TestTrustAttackCoarseTimes(t *testing.T) {
	needGit(t)
	for _, tool := range []string{"mkfs.ext4", "losetup", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to make a file system with coarse times: %v", tool, err)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatal("the suite runs as root (it mounts the coarse file system)")
	}
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		img := filepath.Join(fx.dir, "coarse.img")
		if err := os.WriteFile(img, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(img, 64<<20); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-I", "128", img).CombinedOutput(); err != nil {
			t.Fatalf("mkfs.ext4: %v: %s", err, out)
		}
		os.RemoveAll(fx.ws)
		if err := os.Mkdir(fx.ws, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mount", "-o", "loop", img, fx.ws).CombinedOutput(); err != nil {
			t.Fatalf("mount: %v: %s", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", "-l", fx.ws).Run() })
		os.RemoveAll(filepath.Join(fx.ws, "lost+found"))
		writeFile(t, filepath.Join(fx.ws, "file.txt"), "x\n")
		chownR(t, fx.ws, u)
		mustGit(t, fx, fx.ws, "init", "-q", "-b", "main")
		// Control: this file system keeps whole seconds.
		if fi, err := os.Stat(filepath.Join(fx.ws, "file.txt")); err != nil || fi.ModTime().Nanosecond() != 0 {
			t.Fatalf("the file system's times are not whole seconds (%v, %v): the test does not test what it says", fi.ModTime(), err)
		}
		mark := marker(fx, "coarse")
		paths := runPaths(t, fx)
		for _, p := range paths {
			if r := p.run(t, "true"); r.code != 0 { // servers up first
				t.Fatalf("%s warm-up: %v", p.name, r)
			}
		}
		time.Sleep(1100 * time.Millisecond)
		for _, p := range paths {
			t.Run(p.name, func(t *testing.T) {
				for i := range 3 {
					// Start just after a second begins.
					time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 5*time.Millisecond)))
					sub := fmt.Sprintf("s-%s-%d", p.name, i)
					r := p.run(t, fmt.Sprintf(`git init -q %s && git -C %s config core.fsmonitor %s && echo PLANTED`, sub, sub, filepath.Join(fx.ws, sub+".fsmon")))
					if !strings.Contains(r.stdout, "PLANTED") {
						t.Fatalf("plant: %v", r)
					}
					hook := filepath.Join(fx.ws, sub+".fsmon")
					writeFile(t, hook, "#!/bin/sh\ntouch "+mark+"\n")
					os.Chmod(hook, 0o755)
					if u.cred != nil {
						os.Lchown(hook, u.uid, u.gid)
					}
					userGit(t, fx, filepath.Join(fx.ws, sub), "status")
					if exists(mark) {
						t.Fatalf("round %d: the user's git status ran what a command planted in its window's first second: %v", i, r)
					}
				}
			})
		}
	})
}

// TestTrustAttackPrivateTmp: the host directories standing in for the
// command's private /tmp and $TMPDIR live on in agentbox's state
// directory, readable by the user, and the command can learn their host
// path from /proc/self/mountinfo; a repository it plants there (and a
// symlink in the workspace to lure the user's git into it) is moved
// aside like one in the workspace.
func TestTrustAttackPrivateTmp(t *testing.T) {
	needGit(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := gitFixture(t, u)
		states := map[string]string{
			"lone": filepath.Join(fx.dir, "state-lone"), "helper": filepath.Join(fx.dir, "state"),
			"mcp": filepath.Join(u.home, ".state"),
		}
		for _, p := range runPaths(t, fx) {
			t.Run(p.name, func(t *testing.T) {
				name := randName("plant-")
				r := p.run(t, fmt.Sprintf(`set -e
git init -q /tmp/%s && git -C /tmp/%s config core.fsmonitor /tmp/%s/x
git init -q "$TMPDIR/%s-d"
hostdir=$(awk '$5 == "/tmp" { print $4 }' /proc/self/mountinfo | head -n 1)
ln -s "$hostdir/%s" lure-%s
echo PLANTED`, name, name, name, name, name, p.name))
				if !strings.Contains(r.stdout, "PLANTED") {
					t.Fatalf("plant: %v", r)
				}
				found := 0
				for _, pat := range []string{"tmp/" + name, "*/" + name + "-d"} {
					dirs, _ := filepath.Glob(filepath.Join(states[p.name], "agentbox", "tmp", "*", pat))
					for _, d := range dirs {
						found++
						assertAbsent(t, filepath.Join(d, ".git"))
					}
				}
				if found != 2 {
					t.Fatalf("the planted directories are not where the private /tmp and $TMPDIR live on the host (found %d): the test does not see the attack: %v", found, r)
				}
				if plantedConfig(t, fx, filepath.Join(fx.ws, "lure-"+p.name), "/tmp/"+name+"/x") {
					t.Errorf("the user's git, through the workspace's symlink into the private /tmp, reads the planted config: %v", r)
				}
			})
		}
	})
}

// TestTrustAttackRepoInsideGitDir: a repository made inside a git
// directory is what git finds from a directory below it: inside the
// root's own .git (writable with --allow-git-writes) and inside a nested
// repository's .git that was there before.
func TestTrustAttackRepoInsideGitDir(t *testing.T) {
	needGit(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := gitFixture(t, u)
		mustGit(t, fx, fx.ws, "init", "-q", filepath.Join(fx.ws, "nested"))
		time.Sleep(50 * time.Millisecond)
		for _, p := range runPaths(t, fx, "--allow-git-writes") {
			t.Run(p.name, func(t *testing.T) {
				in := []string{".git/refs/in-" + p.name, "nested/.git/in-" + p.name}
				script := "set -e\n"
				for _, d := range in {
					script += fmt.Sprintf("git init -q %s && git -C %s config core.fsmonitor %s/x\n", d, d, d)
				}
				r := p.run(t, script+"echo PLANTED")
				if !strings.Contains(r.stdout, "PLANTED") {
					t.Fatalf("plant: %v", r)
				}
				for _, d := range in {
					// Moved aside whole (nothing of the user's in it), or
					// its .git moved out of it.
					if exists(filepath.Join(fx.ws, d)) && plantedConfig(t, fx, filepath.Join(fx.ws, d), d+"/x") {
						t.Errorf("the user's git in %s reads the config the command planted: %v", d, r)
					}
				}
				mustGit(t, fx, fx.ws, "status")
			})
		}
	})
}

// TestTrustAttackRuntimeSockets: the per-user server sockets that live
// outside /tmp (which TestPrivateTmpPlantedServers covers): in
// $XDG_RUNTIME_DIR (D-Bus, Wayland, emacs, gpg-agent, tmux with
// TMUX_TMPDIR there) and in the home (ssh ControlPath, emacs' and
// gpg-agent's own directories). Their directories exist and are the
// user's, so a bind on the host works (the control); from the sandbox,
// through every path, none of them appears on the host.
func TestTrustAttackRuntimeSockets(t *testing.T) {
	needPython(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		runtime := filepath.Join(fx.dir, "run-user")
		dirs := []string{runtime, filepath.Join(runtime, "emacs"), filepath.Join(runtime, "gnupg"),
			filepath.Join(fx.home, ".ssh"), filepath.Join(fx.home, ".emacs.d", "server"), filepath.Join(fx.home, ".gnupg")}
		for _, d := range dirs {
			if err := os.MkdirAll(d, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		chownR(t, fx.dir, u)
		env := []string{"XDG_RUNTIME_DIR=" + runtime, "TMUX_TMPDIR=" + runtime}
		sockets := func(tag string) []string {
			return []string{
				filepath.Join(runtime, "bus-"+tag), filepath.Join(runtime, "wayland-"+tag),
				filepath.Join(runtime, "emacs", "server-"+tag), filepath.Join(runtime, "gnupg", "S.gpg-agent-"+tag),
				filepath.Join(runtime, fmt.Sprintf("tmux-%d", u.uid), "default-"+tag),
				filepath.Join(fx.home, ".ssh", "cm-git@github.com:22-"+tag), filepath.Join(fx.home, ".emacs.d", "server", "server-"+tag),
				filepath.Join(fx.home, ".gnupg", "S.gpg-agent-"+tag),
			}
		}
		bind := func(tag string) string {
			var q []string
			for _, p := range sockets(tag) {
				q = append(q, "'"+p+"'")
			}
			// Each on its own: one refused must not hide another.
			return fmt.Sprintf(`for p in %s; do %s -c '%s' "$p" >/dev/null 2>&1 && echo "BOUND $p"; done; echo TRIED`, strings.Join(q, " "), python, listenPy)
		}
		ctl := host(t, u, runOpts{env: append(fx.env(), env...), dir: fx.ws}, "/bin/sh", "-c", bind("ctl"))
		if n := strings.Count(ctl.stdout, "BOUND "); n != len(sockets("ctl")) {
			t.Fatalf("control: %d of %d sockets bound on the host; the test no longer sees the attack: %v", n, len(sockets("ctl")), ctl)
		}
		for _, p := range runPathsEnv(t, fx, env) {
			t.Run(p.name, func(t *testing.T) {
				tag := p.name
				r := p.run(t, bind(tag))
				if !strings.Contains(r.stdout, "TRIED") {
					t.Fatalf("the command did not run: %v", r)
				}
				for _, s := range sockets(tag) {
					assertAbsent(t, s)
				}
			})
		}
	})
}

// TestTrustAttackQuarantineLure: the quarantine is readable by the user,
// and a later command can learn where a repository it planted went (the
// state directory is read-only in the sandbox, not hidden) and leave a
// symlink to it in the workspace. The user's git through that symlink
// must not use the quarantined repository: it is unreadable (mode 0),
// and as root (which reads it anyway) owned by nobody, which git refuses.
func TestTrustAttackQuarantineLure(t *testing.T) {
	needGit(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := gitFixture(t, u)
		mark := marker(fx, "lure")
		states := map[string]string{
			"lone": filepath.Join(fx.dir, "state-lone"), "helper": filepath.Join(fx.dir, "state"),
			"mcp": filepath.Join(u.home, ".state"),
		}
		for _, p := range runPaths(t, fx) {
			t.Run(p.name, func(t *testing.T) {
				sub := "q-" + p.name
				r := p.run(t, "MARK="+mark+"\n"+plantScript+"plant "+sub+" && echo PLANTED")
				if !strings.Contains(r.stdout, "PLANTED") {
					t.Fatalf("plant: %v", r)
				}
				// Where it went, as the next command can read it too.
				var moved string
				for _, line := range strings.Split(r.stderr, "\n") {
					if _, rest, ok := strings.Cut(line, "/"+sub+"/.git to "); ok {
						moved, _, _ = strings.Cut(rest, ":")
					}
				}
				if moved == "" || !strings.HasPrefix(moved, states[p.name]) {
					t.Fatalf("no note says where %s/.git went: %v", sub, r)
				}
				r = p.run(t, fmt.Sprintf(`ls %q >/dev/null && ln -s %q lure-%s && echo LURED`, filepath.Dir(moved), moved, p.name))
				if !strings.Contains(r.stdout, "LURED") {
					t.Fatalf("the command could not read the quarantine or link to it (the test does not see the attack): %v", r)
				}
				lure := filepath.Join(fx.ws, "lure-"+p.name)
				cfg := host(t, u, runOpts{env: append(fx.env(), "GIT_CONFIG_NOSYSTEM=1"), dir: fx.ws}, "/bin/sh", "-c", `cd "$1" && git config core.fsmonitor`, "sh", lure)
				if strings.Contains(cfg.stdout, "fsmon.sh") {
					t.Errorf("the user's git through the symlink reads the quarantined repository's config: %v", cfg)
				}
				host(t, u, runOpts{env: append(fx.env(), "GIT_CONFIG_NOSYSTEM=1"), dir: fx.ws}, "/bin/sh", "-c", `cd "$1" && git status`, "sh", lure)
				if exists(mark) {
					t.Fatal("the user's git through the symlink ran the quarantined repository's core.fsmonitor")
				}
			})
		}
	})
}

// TestTrustAttackMountInside: a file system mounted inside the workspace
// (here a tmpfs) is shown to the command as on the host (the writable
// roots are recursive binds), so what it plants there is on the host's
// mount; the check crosses the mount point and, since a rename cannot
// leave that file system, moves the repository aside in place, to a
// random name, unreadable.
func TestTrustAttackMountInside(t *testing.T) {
	needGit(t)
	if os.Geteuid() != 0 {
		t.Fatal("the suite runs as root (it mounts the tmpfs)")
	}
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := gitFixture(t, u)
		mnt := filepath.Join(fx.ws, "mnt")
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", mnt).CombinedOutput(); err != nil {
			t.Fatalf("mount: %v: %s", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
		chownR(t, mnt, u)
		mark := marker(fx, "mount")
		time.Sleep(50 * time.Millisecond)
		for _, p := range runPaths(t, fx) {
			t.Run(p.name, func(t *testing.T) {
				sub := "mnt/deep/" + p.name
				r := p.run(t, "MARK="+mark+"\n"+plantScript+"plant "+sub+" && echo PLANTED")
				if !strings.Contains(r.stdout, "PLANTED") {
					t.Fatalf("plant: %v", r)
				}
				assertAbsent(t, filepath.Join(fx.ws, sub, ".git"))
				ents, _ := os.ReadDir(filepath.Join(fx.ws, sub))
				moved := 0
				for _, e := range ents {
					if strings.HasPrefix(e.Name(), ".git.agentbox-quarantine-") {
						moved++
						if fi, err := os.Lstat(filepath.Join(fx.ws, sub, e.Name())); err != nil || fi.Mode().Perm() != 0 {
							t.Errorf("the repository moved aside in place is readable: %v %v", fi.Mode(), err)
						}
					}
				}
				if moved != 1 {
					t.Errorf("%s holds %d repositories moved aside in place, want 1: %v", sub, moved, r)
				}
				userGit(t, fx, filepath.Join(fx.ws, sub), "status")
				if exists(mark) {
					t.Fatal("the user's git status ran what the command planted on the mounted file system")
				}
			})
		}
	})
}

// TestTrustAttackRepoAssembledOverRuns: the command lays out a
// repository's parts over several runs, none of which leaves one git
// takes for a repository, and in the last adds HEAD and renames it to a
// .git that looks older than that run.
func TestTrustAttackRepoAssembledOverRuns(t *testing.T) {
	needGit(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := gitFixture(t, u)
		mark := marker(fx, "assembled")
		for _, p := range runPaths(t, fx) {
			t.Run(p.name, func(t *testing.T) {
				foo, sub := "parts-"+p.name, "assembled-"+p.name
				steps := []string{
					fmt.Sprintf(`mkdir -p %[1]s/objects && printf '#!/bin/sh\ntouch %[2]s\n' > %[1]s.fsmon && chmod +x %[1]s.fsmon && printf '[core]\n\tbare = false\n\tfsmonitor = %%s\n' "$PWD/%[1]s.fsmon" > %[1]s/config`, foo, mark),
					fmt.Sprintf(`mkdir -p %s/refs/heads`, foo),
					fmt.Sprintf(`printf 'ref: refs/heads/main\n' > %[1]s/HEAD && mkdir -p %[2]s && mv %[1]s %[2]s/.git`, foo, sub),
				}
				for i, step := range steps {
					if r := p.run(t, "set -e\n"+step+"\necho STEP"); !strings.Contains(r.stdout, "STEP") {
						t.Fatalf("step %d: %v", i, r)
					}
					time.Sleep(30 * time.Millisecond)
				}
				dir := filepath.Join(fx.ws, sub)
				if !exists(dir) {
					return
				}
				if plantedConfig(t, fx, dir, filepath.Join(fx.ws, foo+".fsmon")) {
					t.Error("the user's git reads the config of the repository assembled over three runs")
				}
				userGit(t, fx, dir, "status")
				if exists(mark) {
					t.Fatal("the user's git status ran the assembled repository's core.fsmonitor")
				}
			})
		}
	})
}
