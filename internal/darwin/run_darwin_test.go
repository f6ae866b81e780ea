package darwin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests run real commands under sandbox-exec. They need a Mac; the
// authors of this package had none, so they were compiled but never run
// (GOOS=darwin go test -c). Treat a failure here as a finding about
// Seatbelt, not as a flaky test.

func requireSandboxExec(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(SandboxExec); err != nil {
		t.Skipf("%s not available: %v", SandboxExec, err)
	}
}

// workspace returns a fresh directory with a .git directory holding a
// config file, and a directory outside it.
func workspace(t *testing.T) (ws, outside string) {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	outside, err = filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return ws, outside
}

func wsInput(ws string) Input {
	return Input{WritableRoots: []string{ws}, ProtectedNames: []string{".git", ".codex", ".agents"}}
}

type result struct {
	code           int
	stdout, stderr string
}

// sh runs script with /bin/sh -c under in, in dir, and returns how it ended.
func sh(t *testing.T, ctx context.Context, in Input, dir, script string) result {
	t.Helper()
	cmd, err := Command(ctx, in, []string{"/bin/sh", "-c", script})
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &stdout, &stderr
	err = cmd.Run()
	defer KillGroup(cmd)
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.code = 128 + int(ws.Signal())
		}
	default:
		t.Fatalf("run %q: %v", script, err)
	}
	return r
}

func mustFail(t *testing.T, r result, what string) {
	t.Helper()
	if r.code == 0 {
		t.Errorf("%s succeeded inside the sandbox (stdout %q)", what, r.stdout)
	}
}

func mustSucceed(t *testing.T, r result, what string) {
	t.Helper()
	if r.code != 0 {
		t.Errorf("%s failed: exit %d, stderr %q", what, r.code, r.stderr)
	}
}

func absent(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists after the run (err %v)", p, err)
	}
}

func TestDarwinWrites(t *testing.T) {
	requireSandboxExec(t)
	ctx := context.Background()
	ws, outside := workspace(t)
	in := wsInput(ws)

	mustSucceed(t, sh(t, ctx, in, ws, "echo hi > inside && mkdir -p a/b && echo x > a/b/c && rm inside"), "writing in the workspace")
	if b, err := os.ReadFile(filepath.Join(ws, "a/b/c")); err != nil || string(b) != "x\n" {
		t.Errorf("a/b/c = %q, %v", b, err)
	}
	mustSucceed(t, sh(t, ctx, in, ws, "echo hi > /dev/null"), "writing /dev/null")

	mustFail(t, sh(t, ctx, in, ws, "echo hi > "+outside+"/f"), "writing outside the roots")
	absent(t, filepath.Join(outside, "f"))
	mustFail(t, sh(t, ctx, in, ws, "mkdir "+outside+"/d"), "mkdir outside the roots")
	absent(t, filepath.Join(outside, "d"))
	mustFail(t, sh(t, ctx, in, ws, "echo hi > \"$HOME/.agentbox-escape-test\""), "writing in $HOME")
	home, _ := os.UserHomeDir()
	absent(t, filepath.Join(home, ".agentbox-escape-test"))
}

func TestDarwinReadOnly(t *testing.T) {
	requireSandboxExec(t)
	ws, _ := workspace(t)
	r := sh(t, context.Background(), Input{}, ws, "cat .git/config && echo x > /dev/null && echo y > f")
	mustFail(t, r, "writing with a read-only policy")
	if !strings.Contains(r.stdout, "[core]") {
		t.Errorf("reading failed under a read-only policy: %q", r.stdout)
	}
	absent(t, filepath.Join(ws, "f"))
}

func TestDarwinProtected(t *testing.T) {
	requireSandboxExec(t)
	ctx := context.Background()
	ws, _ := workspace(t)
	in := wsInput(ws)
	cfg := filepath.Join(ws, ".git", "config")

	for _, script := range []string{
		"echo evil >> .git/config",
		"echo evil >> .GIT/config",
		"echo evil >> .Git/config",
		"echo '#!/bin/sh' > .git/hooks/pre-commit",
		"rm .git/config",
		"mv .git/config .git/config.bak",
		"ln -s .git/config link && echo evil >> link",
		"ln .git/config hard && echo evil >> hard",
		"mv .git moved",
		"mv .GIT moved",
		"rm -rf .git",
		"cd .. && mv " + filepath.Base(ws) + " moved",
	} {
		mustFail(t, sh(t, ctx, in, ws, script), script)
		if b, err := os.ReadFile(cfg); err != nil || string(b) != "[core]\n" {
			t.Errorf("after %q: .git/config = %q, %v", script, b, err)
			// Restore it so the next attempt is judged on its own.
			if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cfg, []byte("[core]\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range []string{".codex", ".CODEX", ".Agents", ".agent\u017f", ".co\u200cdex", ".codex\ufeff"} {
		mustFail(t, sh(t, ctx, in, ws, "mkdir '"+name+"'"), "mkdir "+strconv.Quote(name))
		absent(t, filepath.Join(ws, name))
		mustFail(t, sh(t, ctx, in, ws, "echo x > '"+name+"'"), "create "+strconv.Quote(name))
		absent(t, filepath.Join(ws, name))
		mustFail(t, sh(t, ctx, in, ws, "mkdir d && mv d '"+name+"'; rc=$?; rmdir d 2>/dev/null; exit $rc"), "rename into "+strconv.Quote(name))
		absent(t, filepath.Join(ws, name))
	}
	// Look-alikes are ordinary names.
	mustSucceed(t, sh(t, ctx, in, ws, "mkdir -p .github/workflows && echo x > .gitignore && mkdir -p sub/clone/.git && echo y > sub/clone/.git/config"), "writing look-alikes and a nested clone")
}

func TestDarwinProtectedDeeper(t *testing.T) {
	requireSandboxExec(t)
	ws, _ := workspace(t)
	if err := os.MkdirAll(filepath.Join(ws, "sub", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	in := wsInput(ws)
	in.Protected = []string{filepath.Join(ws, "sub", ".git")}
	ctx := context.Background()
	mustFail(t, sh(t, ctx, in, ws, "echo x > sub/.git/config"), "writing a deeper protected path")
	mustFail(t, sh(t, ctx, in, ws, "echo x > SUB/.git/config"), "writing a deeper protected path through a case variant of its parent")
	mustFail(t, sh(t, ctx, in, ws, "mv sub sub2"), "renaming the parent of a protected path")
	absent(t, filepath.Join(ws, "sub", ".git", "config"))
	absent(t, filepath.Join(ws, "sub2"))
}

func TestDarwinSymlinkedRootAndHostileName(t *testing.T) {
	requireSandboxExec(t)
	parent, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(parent, "q\"uo(te) ;x #\"y\nz")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(parent, "link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	// The root is given through a symbolic link; Command must resolve it.
	in := wsInput(link)
	ctx := context.Background()
	mustSucceed(t, sh(t, ctx, in, ws, "echo ok > f"), "writing in a root with a hostile name given through a symlink")
	mustFail(t, sh(t, ctx, in, ws, "echo no > ../g"), "writing beside the root")
	absent(t, filepath.Join(parent, "g"))
	mustFail(t, sh(t, ctx, in, ws, "mkdir .git"), "mkdir .git in a hostile root")
}

func TestDarwinCanonicalPath(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "MixedCase"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := canonicalPath(filepath.Join(dir, "mixedcase", "missing", "x"), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "mixedcase")); err != nil {
		t.Skipf("case-sensitive volume: %v", err)
	}
	if want := filepath.Join(dir, "MixedCase", "missing", "x"); got != want {
		t.Errorf("canonicalPath = %q, want %q", got, want)
	}
	// A root that is a symbolic link is its target; a protected path that
	// is one is the link itself (its target is protected separately).
	if got, err := canonicalPath("/tmp", true); err != nil || got != "/private/tmp" {
		t.Errorf("canonicalPath(/tmp, follow) = %q, %v; want /private/tmp", got, err)
	}
	if got, err := canonicalPath("/tmp", false); err != nil || got != "/tmp" {
		t.Errorf("canonicalPath(/tmp, no follow) = %q, %v; want /tmp", got, err)
	}
	if got, err := canonicalPath("/tmp/agentbox-missing/x", false); err != nil || got != "/private/tmp/agentbox-missing/x" {
		t.Errorf("canonicalPath(/tmp/agentbox-missing/x) = %q, %v", got, err)
	}
}

// listener accepts connections in the background and counts them.
func listener(t *testing.T) (port int, accepted func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	n := make(chan int, 1)
	n <- 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n <- (<-n) + 1
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, func() int { v := <-n; n <- v; return v }
}

func TestDarwinNetwork(t *testing.T) {
	requireSandboxExec(t)
	ws, _ := workspace(t)
	ctx := context.Background()
	port, accepted := listener(t)
	other, otherAccepted := listener(t)
	connect := func(p int) string { return fmt.Sprintf("/usr/bin/nc -z -G 2 127.0.0.1 %d", p) }

	in := wsInput(ws)
	mustFail(t, sh(t, ctx, in, ws, connect(port)), "connecting to a local listener with the network off")
	mustFail(t, sh(t, ctx, in, ws, "/usr/bin/nc -z -G 2 1.1.1.1 443"), "connecting out with the network off")
	if n := accepted(); n != 0 {
		t.Errorf("listener accepted %d connections with the network off", n)
	}

	in.Network, in.ProxyPort = NetworkLocalhostPort, port
	mustSucceed(t, sh(t, ctx, in, ws, connect(port)), "connecting to the proxy port")
	mustFail(t, sh(t, ctx, in, ws, connect(other)), "connecting to another local port in proxy mode")
	if n := otherAccepted(); n != 0 {
		t.Errorf("the other listener accepted %d connections in proxy mode", n)
	}

	in.Network, in.ProxyPort = NetworkOn, 0
	mustSucceed(t, sh(t, ctx, in, ws, connect(other)), "connecting with the network on")
}

func TestDarwinExitStatusAndStdio(t *testing.T) {
	requireSandboxExec(t)
	ws, _ := workspace(t)
	ctx := context.Background()
	in := wsInput(ws)
	if r := sh(t, ctx, in, ws, "echo out; echo err >&2; exit 7"); r.code != 7 || r.stdout != "out\n" || r.stderr != "err\n" {
		t.Errorf("got %+v, want exit 7 with out/err", r)
	}
	if r := sh(t, ctx, in, ws, "kill -TERM $$"); r.code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit code %d, want %d", r.code, 128+int(syscall.SIGTERM))
	}

	cmd, err := Command(ctx, in, []string{"/bin/cat"})
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = strings.NewReader("through stdin")
	out, err := cmd.Output()
	if err != nil || string(out) != "through stdin" {
		t.Errorf("cat = %q, %v", out, err)
	}
}

func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

func TestDarwinTimeoutKillsGroup(t *testing.T) {
	requireSandboxExec(t)
	ws, _ := workspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	r := sh(t, ctx, wsInput(ws), ws, "sleep 60 & echo $! > bg.pid; sleep 60")
	if time.Since(start) > 15*time.Second {
		t.Errorf("the run took %v after a 1s timeout", time.Since(start))
	}
	if r.code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit code %d, want %d (SIGKILL)", r.code, 128+int(syscall.SIGKILL))
	}
	b, err := os.ReadFile(filepath.Join(ws, "bg.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	time.Sleep(100 * time.Millisecond)
	if pid > 0 && alive(pid) {
		t.Errorf("background process %d survived the timeout", pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

func TestDarwinKillGroupAfterExit(t *testing.T) {
	requireSandboxExec(t)
	ws, _ := workspace(t)
	cmd, err := Command(context.Background(), wsInput(ws), []string{"/bin/sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	if pid <= 0 || !alive(pid) {
		t.Fatalf("background pid %q not running", out)
	}
	if err := KillGroup(cmd); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if alive(pid) {
		t.Errorf("background process %d survived KillGroup", pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

func TestDarwinNoControllingTerminal(t *testing.T) {
	requireSandboxExec(t)
	ws, _ := workspace(t)
	// In a new session /dev/tty cannot be opened: there is no controlling
	// terminal to inject keystrokes into.
	mustFail(t, sh(t, context.Background(), wsInput(ws), ws, "exec 3</dev/tty"), "opening /dev/tty")
}

func TestDarwinCheck(t *testing.T) {
	requireSandboxExec(t)
	ws, _ := workspace(t)
	for _, in := range []Input{{}, wsInput(ws), {WritableRoots: []string{ws}, ProtectedNames: []string{".git"}, Network: NetworkOn, AllowPTY: true}, {Network: NetworkLocalhostPort, ProxyPort: 3128}} {
		if err := Check(context.Background(), in); err != nil {
			t.Errorf("Check(%+v): %v", in, err)
		}
	}
}

// TestDarwinPrivateTmp: with a private temporary directory and /tmp not a
// root (the default policy), a socket-like file planted in /tmp is refused
// and one in the private directory is written.
func TestDarwinPrivateTmp(t *testing.T) {
	requireSandboxExec(t)
	ctx := context.Background()
	ws, priv := workspace(t)
	in := wsInput(ws)
	in.TempDirs = []string{priv}
	name := fmt.Sprintf("agentbox-test-%d", os.Getpid())
	mustFail(t, sh(t, ctx, in, ws, "mkdir /tmp/"+name), "mkdir in the host's /tmp")
	absent(t, filepath.Join("/private/tmp", name))
	mustSucceed(t, sh(t, ctx, in, ws, "mkdir "+priv+"/tmux-501 && echo x > "+priv+"/tmux-501/default"), "writing the private temporary directory")
	if _, err := os.Stat(filepath.Join(priv, "tmux-501", "default")); err != nil {
		t.Error(err)
	}
}

// TestHiddenEnforced: a hidden file, a file a hide rule matches (one
// made after the start included) and a hidden directory cannot be read,
// copied or moved; a re-opened file and the rest of the workspace can.
func TestHiddenEnforced(t *testing.T) {
	requireSandboxExec(t)
	ws, outside := workspace(t)
	for p, c := range map[string]string{
		filepath.Join(ws, ".env"):               "SECRET1",
		filepath.Join(ws, "a/b/c/d/x.env"):      "SECRET2",
		filepath.Join(outside, "creds/key"):     "SECRET3",
		filepath.Join(outside, "creds/key.pub"): "PUBLIC",
		filepath.Join(ws, "main.go"):            "package main",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in := wsInput(ws)
	in.Hidden = []string{filepath.Join(ws, ".env"), filepath.Join(ws, "a/b/c/d/x.env"), filepath.Join(outside, "creds")}
	in.Reopen = []string{filepath.Join(outside, "creds/key.pub")}
	in.HideRules = []HideRule{{Base: ws, Pattern: "**/*.env"}, {Base: filepath.Join(outside, "creds"), Keep: []string{"*.pub"}}}
	script := `cat .env a/b/c/d/x.env "$OUT/creds/key"; ls "$OUT/creds"; cp .env copied; mv .env moved; mv a a2
echo SECRET4 > late.env; cat late.env
echo; cat "$OUT/creds/key.pub"; echo; cat main.go; echo; echo ok > new.txt && echo WROTE`
	r := sh(t, context.Background(), in, ws, "OUT="+outside+"; export OUT; "+script)
	if strings.Contains(r.stdout, "SECRET") {
		t.Errorf("a hidden file was read:\n%s\n%s", r.stdout, r.stderr)
	}
	for _, want := range []string{"PUBLIC", "package main", "WROTE"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("%s missing:\n%s\n%s", want, r.stdout, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, ".env")); err != nil {
		t.Errorf(".env moved: %v", err)
	}
}
