//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestConfigAndStateProtected: with $XDG_CONFIG_HOME and $XDG_STATE_HOME
// in the workspace (a workspace at $HOME is refused), agentbox's own
// config and state are inside a writable root; a command that could write
// them would decide how the next command is sandboxed (a planted
// `sandbox_mode = "danger-full-access"`, forged placeholder records).
func TestConfigAndStateProtected(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		env := []string{"XDG_CONFIG_HOME=" + filepath.Join(fx.ws, ".config"), "XDG_STATE_HOME=" + filepath.Join(fx.ws, ".local", "state")}
		script := `mkdir -p "$XDG_CONFIG_HOME/agentbox" && echo 'sandbox_mode = "danger-full-access"' > "$XDG_CONFIG_HOME/agentbox/config.toml"
mkdir -p "$XDG_STATE_HOME/agentbox/placeholders" && echo "$OUT" > "$XDG_STATE_HOME/agentbox/placeholders/x"
echo ok`
		r := runWith(t, u, runOpts{env: append(fx.env(), env...), dir: fx.ws}, "run", "-C", fx.ws, "--", "/bin/sh", "-c", script)
		if r.code == 125 {
			t.Fatalf("run failed to start: %v", r)
		}
		assertAbsent(t, filepath.Join(fx.ws, ".config", "agentbox", "config.toml"))
		assertAbsent(t, filepath.Join(fx.ws, ".local", "state", "agentbox", "placeholders", "x"))
		// The next run is still sandboxed.
		r = runWith(t, u, runOpts{env: append(fx.env(), env...), dir: fx.ws}, "run", "-C", fx.ws, "--", "/bin/sh", "-c", `echo x > "$OUT/escaped"`)
		assertAbsent(t, filepath.Join(fx.out, "escaped"))
		if t.Failed() {
			t.Logf("second run: %v", r)
		}
	})
}

// TestExecutableProtected: agentbox run from a writable root (as `go run`
// leaves it under /tmp) cannot be replaced by the command it runs.
func TestExecutableProtected(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		bin := filepath.Join(fx.add, "agentbox")
		b, err := os.ReadFile(binPath)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Lchown(bin, u.uid, u.gid)
		script := `printf '#!/bin/sh\necho pwned\n' > "$ADD/agentbox.new"; chmod +x "$ADD/agentbox.new"; mv "$ADD/agentbox.new" "$ADD/agentbox"; echo x >> "$ADD/agentbox"; echo done`
		r := host(t, u, runOpts{env: fx.env(), dir: fx.ws}, bin, "run", "-C", fx.ws, "--add-dir", fx.add, "--", "/bin/sh", "-c", script)
		if !strings.Contains(r.stdout, "done") {
			t.Fatalf("run failed: %v", r)
		}
		after, err := os.ReadFile(bin)
		if err != nil || len(after) != len(b) {
			t.Errorf("host: the agentbox binary was replaced or changed (%d bytes, was %d; %v)", len(after), len(b), err)
		}
	})
}

// TestProcSysReadOnly: host-wide kernel knobs stay out of reach even for
// root inside the sandbox, whatever Landlock does.
func TestProcSysReadOnly(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		before, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
		r := sandboxed(t, fx, nil, `echo agentbox-test > /proc/sys/kernel/core_pattern; grep -q ' /proc/sys .*ro,' /proc/self/mountinfo && echo ro-mounted`)
		after, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
		if string(after) != string(before) {
			os.WriteFile("/proc/sys/kernel/core_pattern", before, 0o644)
			t.Fatalf("host: core_pattern changed to %q", after)
		}
		if !strings.Contains(r.stdout, "ro-mounted") {
			t.Errorf("/proc/sys is not a read-only mount inside: %v", r)
		}
	})
}

// TestInitSurvivesSignals: the command signalling its PID 1 gets no Go
// crash dump and does not change its own exit status.
func TestInitSurvivesSignals(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		r := sandboxed(t, fx, nil, `for s in ABRT SEGV SYS BUS TRAP; do kill -$s 1; done; sleep 0.2; exit 4`)
		if r.code != 4 || strings.Contains(r.stderr, "goroutine") || strings.Contains(r.stderr, "SIGABRT") {
			t.Errorf("exit %d, want 4, and no runtime dump: %v", r.code, r)
		}
	})
}

// TestProtectedThroughSymlinkChain: .codex reached through a symlink to a
// symlinked directory in another writable root; re-pointing the middle
// link would redirect .codex to the command's own content.
func TestProtectedThroughSymlinkChain(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, noCodex)
		real := filepath.Join(fx.add, "real")
		evil := filepath.Join(fx.add, "evil")
		for _, d := range []string{filepath.Join(real, "x"), filepath.Join(evil, "x")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		os.WriteFile(filepath.Join(real, "x", "config.toml"), []byte("model = \"orig\"\n"), 0o644)
		os.WriteFile(filepath.Join(evil, "x", "config.toml"), []byte("model = \"evil\"\n"), 0o644)
		link := filepath.Join(fx.add, "link")
		os.Symlink(real, link)
		os.Symlink(filepath.Join(link, "x"), filepath.Join(fx.ws, ".codex"))
		chownR(t, fx.dir, u)
		r := sandboxed(t, fx, []string{"--add-dir", fx.add}, `rm "$ADD/link"; ln -s "$ADD/evil" "$ADD/link"; ln -sfn "$ADD/evil" "$ADD/link"; mv "$ADD/real" "$ADD/real2"; echo done`)
		if !strings.Contains(r.stdout, "done") {
			t.Fatalf("run failed: %v", r)
		}
		assertContent(t, filepath.Join(fx.ws, ".codex", "config.toml"), "model = \"orig\"\n")
	})
}

// TestSubmoduleGitFileProtected: a submodule's .git file points git at the
// submodule's gitdir; re-pointed at a gitdir the command made, `git status`
// in the superproject would run that gitdir's core.fsmonitor on the host.
func TestSubmoduleGitFileProtected(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		gitfile := "gitdir: ../.git/modules/lib\n"
		os.MkdirAll(filepath.Join(fx.ws, ".git", "modules", "lib"), 0o755)
		os.MkdirAll(filepath.Join(fx.ws, "lib"), 0o755)
		os.WriteFile(filepath.Join(fx.ws, ".gitmodules"), []byte("[submodule \"lib\"]\n\tpath = lib\n\turl = ../lib.git\n"), 0o644)
		os.WriteFile(filepath.Join(fx.ws, "lib", ".git"), []byte(gitfile), 0o644)
		chownR(t, fx.dir, u)
		// git knows a submodule by its gitlink in the index, and so does
		// agentbox (the index is in the read-only .git).
		needGit(t)
		mustGit(t, fx, fx.ws, "update-index", "--add", "--cacheinfo", "160000,1234567890123456789012345678901234567890,lib")
		r := sandboxed(t, fx, nil, `echo "gitdir: $WS/evil" > "$WS/lib/.git"; rm -f "$WS/lib/.git"; mv "$WS/lib" "$WS/lib2"; echo done`)
		if !strings.Contains(r.stdout, "done") {
			t.Fatalf("run failed: %v", r)
		}
		assertContent(t, filepath.Join(fx.ws, "lib", ".git"), gitfile)
	})
}

// TestInvokedLinkProtected: agentbox started through a symlink in a
// writable root (~/.local/bin/agentbox with the workspace at $HOME,
// node_modules/.bin) must not have that link re-pointed by the command.
func TestInvokedLinkProtected(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		link := filepath.Join(fx.add, "bin", "agentbox")
		os.MkdirAll(filepath.Dir(link), 0o755)
		if err := os.Symlink(binPath, link); err != nil {
			t.Fatal(err)
		}
		chownR(t, fx.dir, u)
		r := host(t, u, runOpts{env: fx.env(), dir: fx.ws}, link, "run", "-C", fx.ws, "--add-dir", fx.add, "--",
			"/bin/sh", "-c", `ln -sfn /bin/false "$ADD/bin/agentbox"; rm -f "$ADD/bin/agentbox"; echo done`)
		if !strings.Contains(r.stdout, "done") {
			t.Fatalf("run failed: %v", r)
		}
		if got, err := os.Readlink(link); err != nil || got != binPath {
			t.Errorf("host: the link agentbox was started through now points at %q (%v)", got, err)
		}
	})
}

// TestStoppedCommandStillStops: SIGTERM to agentbox ends a command that
// stopped itself (it is continued after the signal is passed on).
func TestStoppedCommandStillStops(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		cmd := command(u, runOpts{dir: fx.ws, env: fx.env()}, binPath, "run", "-C", fx.ws, "--", "/bin/sh", "-c", `echo ready > "$WS/ready"; kill -STOP $$; echo resumed`)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		if !waitFor(10*time.Second, func() bool { return exists(filepath.Join(fx.ws, "ready")) }) {
			t.Fatal("command never became ready")
		}
		time.Sleep(200 * time.Millisecond)
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if got := exitCode(cmd, err); got != 143 {
				t.Errorf("exit %d, want 143", got)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("agentbox hung on a stopped command after SIGTERM")
		}
	})
}
