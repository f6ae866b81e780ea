package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/policy"
)

func newTestSession(t *testing.T) (*Session, string) {
	t.Helper()
	pol, ws := testPolicy(t)
	return sessionFor(t, pol), ws
}

// sessionFor is a session for pol, with its zygote (closed at the test's
// end).
func sessionFor(t *testing.T, pol *policy.Policy) *Session {
	t.Helper()
	s, err := NewSession(pol)
	if err != nil {
		t.Fatal(err)
	}
	if s.impl == nil {
		t.Fatal("no session sandbox on this machine (user namespaces unavailable?)")
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func sh(s *Session, script string) *Cmd {
	return s.Command(context.Background(), "sh", "-c", script)
}

// TestSessionIsolation: a session's command holds no capability, has
// no_new_privs and the seccomp filter, is PID 1 of its own pid
// namespace, starts in the workspace and inherits no descriptor but its
// stdio.
func TestSessionIsolation(t *testing.T) {
	s, ws := newTestSession(t)
	out, err := sh(s, "pwd; grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status; echo pid=$$; ls /proc/self/fd | tr '\\n' ' '").Output()
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, want := range []string{ws + "\n", "CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", "pid=1\n", "\n0 1 2 3 "} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, " 4 ") {
		t.Errorf("the command inherited a descriptor beyond its stdio:\n%s", got)
	}
}

func TestSessionWritesConfined(t *testing.T) {
	s, ws := newTestSession(t)
	os.Mkdir(filepath.Join(ws, ".git"), 0o755)
	err := sh(s, "echo in > in.txt").Run()
	if err != nil {
		t.Fatalf("write inside: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "in.txt")); string(b) != "in\n" {
		t.Errorf("host sees %q in in.txt", b)
	}
	// /var/tmp is outside every writable root.
	vt, err := os.MkdirTemp("/var/tmp", "agentbox-session-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(vt)
	if err := sh(s, "echo out > "+vt+"/out.txt").Run(); err == nil {
		t.Error("writing outside the roots succeeded")
	}
	if _, err := os.Stat(filepath.Join(vt, "out.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("host: file written outside the roots (%v)", err)
	}
}

func TestSessionTreeKillAndNext(t *testing.T) {
	s, ws := newTestSession(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	c := s.Command(ctx, "sh", "-c", "(sleep 2; echo late > late.txt) & setsid sh -c 'sleep 2; echo late2 > late2.txt' & sleep 30")
	err := c.Run()
	var ee *ExitError
	if !errors.As(err, &ee) || !ee.TimedOut || ee.Signal != 9 {
		t.Fatalf("err = %v (%#v)", err, c.ProcessState)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancel took %v", d)
	}
	// Background children died with the command, not at the session's end.
	time.Sleep(2500 * time.Millisecond)
	for _, f := range []string{"late.txt", "late2.txt"} {
		if _, err := os.Stat(filepath.Join(ws, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a background child survived the cancel: %s exists", f)
		}
	}
	if out, err := sh(s, "echo next").Output(); err != nil || string(out) != "next\n" {
		t.Errorf("next command: %q, %v", out, err)
	}
	// A normal exit ends the tree too.
	if err := sh(s, "(sleep 1; echo late > late3.txt) &").Run(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(ws, "late3.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Error("a background child outlived its command's normal exit")
	}
}

func TestSessionSignals(t *testing.T) {
	s, _ := newTestSession(t)
	// run starts c, waits until ready says it is in place, signals it and
	// returns how it ended.
	run := func(c *Cmd, ready func(), sig syscall.Signal) *Status {
		t.Helper()
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		ready()
		// A session's command has no process of agentbox's own: Pid
		// is 0, and Process.Signal goes through the session.
		if c.Process == nil || c.Process.Pid != 0 {
			t.Fatalf("session command's Process = %+v, want Pid 0", c.Process)
		}
		if err := c.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			c.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			c.proc.Kill()
			<-done
			t.Fatalf("%q did not end on %v", c.Args, sig)
		}
		return c.ProcessState
	}
	// sleeping waits until the session's /proc shows a sleep (the
	// checking commands are sh, cat and grep).
	sleeping := func() {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if sh(s, "cat /proc/[0-9]*/comm 2>/dev/null | grep -qx sleep").Run() == nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("sleep never ran")
	}
	// Default action: the command is reported killed by the signal.
	if st := run(s.Command(context.Background(), "sleep", "30.1"), sleeping, syscall.SIGTERM); st.Signal != int(syscall.SIGTERM) {
		t.Errorf("SIGTERM to sleep: %v", st)
	}
	if st := run(s.Command(context.Background(), "sleep", "30.2"), sleeping, syscall.SIGINT); st.Signal != int(syscall.SIGINT) {
		t.Errorf("SIGINT to sleep: %v", st)
	}
	// A handler runs: the script says "ready" once its trap is set.
	c := sh(s, "trap 'exit 7' TERM; echo ready; while :; do sleep 0.05; done")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	c.Stdout = pw
	ready := func() {
		pw.Close()
		pr.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 6)
		if _, err := io.ReadFull(pr, buf); err != nil || string(buf) != "ready\n" {
			t.Fatalf("trap script: %q, %v", buf, err)
		}
	}
	if st := run(c, ready, syscall.SIGTERM); st.Code != 7 {
		t.Errorf("trapped SIGTERM: %v", st)
	}
}

func TestSessionParallel(t *testing.T) {
	s, ws := newTestSession(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := sh(s, fmt.Sprintf("echo %d > f%d; cat f%d; sleep 0.1", i, i, i)).Output()
			if err != nil || strings.TrimSpace(string(out)) != fmt.Sprint(i) {
				errs <- fmt.Errorf("command %d: %q, %v", i, out, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range 16 {
		if _, err := os.Stat(filepath.Join(ws, fmt.Sprintf("f%d", i))); err != nil {
			t.Error(err)
		}
	}
}

// TestSessionCrashAndStartErrors: a command that crashes, or kills every
// process it can see, or cannot start, leaves the session working.
func TestSessionCrashAndStartErrors(t *testing.T) {
	s, ws := newTestSession(t)
	if py, err := exec.LookPath("python3"); err == nil {
		err := s.Command(context.Background(), py, "-c", "import ctypes; ctypes.string_at(0)").Run()
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Signal != int(syscall.SIGSEGV) {
			t.Errorf("segfault: %v", err)
		}
	}
	if err := sh(s, "sleep 5 & kill -9 -1; kill -9 1; exit 3").Run(); err == nil {
		t.Error("exit 3 reported as success")
	}
	err := s.Command(context.Background(), "no-such-command-agentbox").Run()
	var se *StartError
	if !errors.As(err, &se) || se.Code != CodeNotFound {
		t.Errorf("not found: %v", err)
	}
	os.WriteFile(filepath.Join(ws, "noexec"), []byte("#!/bin/sh\n"), 0o644)
	err = s.Command(context.Background(), "./noexec").Run()
	if !errors.As(err, &se) || se.Code != CodeNotExecutable {
		t.Errorf("not executable: %v", err)
	}
	if out, err := sh(s, "echo alive").Output(); err != nil || string(out) != "alive\n" {
		t.Errorf("after the crashes: %q, %v", out, err)
	}
}

// TestSessionEscapes: a command tries to reach the zygote (PID 1 of the
// session's /proc) and its control socket, and another command of the
// session; every attempt must fail, and the session must keep working.
func TestSessionEscapes(t *testing.T) {
	s, _ := newTestSession(t)
	// A neighbour to attack, running while the attacker runs. Only its
	// own Landlock domain keeps it apart from the attacker (same user,
	// same policy): without Landlock the two can read each other's /proc
	// entries, as the Session documentation says.
	if landlockUsable() {
		nb := sh(s, "exec sleep 30")
		if err := nb.Start(); err != nil {
			t.Fatal(err)
		}
		defer nb.proc.Kill()
		time.Sleep(100 * time.Millisecond)
	} else {
		t.Log("no Landlock: not probing a neighbouring command")
	}
	script := `
read -r me _ < /proc/self/stat # this shell, as the session's /proc numbers it
for p in /proc/[0-9]*; do
	pid=${p#/proc/}
	[ "$pid" = "$me" ] && continue
	grep -q "^PPid:[[:space:]]*$me\$" $p/status 2>/dev/null && continue # our own subshells
	# Listing the names may work (the directory's owner is our uid when
	# agentbox runs as root); what the descriptors are must stay hidden.
	for fd in $p/fd/*; do
		readlink $fd >/dev/null 2>&1 && echo "LEAK fd $fd -> $(readlink $fd)"
		(: <$fd) 2>/dev/null && echo "LEAK open $fd"
	done
	cat $p/environ >/dev/null 2>&1 && echo "LEAK environ $pid"
	head -c1 $p/mem >/dev/null 2>&1 && echo "LEAK mem read $pid"
	(printf x | dd of=$p/mem bs=1 seek=4096 conv=notrunc) >/dev/null 2>&1 && echo "LEAK mem write $pid"
	readlink $p/cwd >/dev/null 2>&1 && echo "LEAK cwd $pid"
	ls $p/root/ >/dev/null 2>&1 && echo "LEAK root $pid"
	kill -0 $pid 2>/dev/null && [ "$pid" != 1 ] && echo "SIGNAL $pid"
done
# Descriptors beyond stdio, such as the control socket, are not ours.
for fd in 3 4 5 6 7 8 9; do
	{ true >&$fd; } 2>/dev/null && echo "LEAK inherited fd $fd"
done
echo done
`
	out, err := sh(s, script).CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), "done\n") {
		t.Fatalf("probe failed: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "LEAK") || strings.Contains(string(out), "SIGNAL") {
		t.Errorf("reached the zygote or a neighbour:\n%s", out)
	}
	if py, err := exec.LookPath("python3"); err == nil {
		// ptrace and process_vm_readv against the zygote and the neighbour.
		probe := `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
me = os.readlink("/proc/self")
for p in os.listdir("/proc"):
    if not p.isdigit() or p == me: continue
    if libc.ptrace(16, int(p), 0, 0) == 0: print("LEAK ptrace", p)
    if libc.ptrace(0x4206, int(p), 0, 0) == 0: print("LEAK seize", p)
# The session's filter lets clone ask for CLONE_NEWPID (the zygote needs
# it): without CAP_SYS_ADMIN the kernel must still refuse.
nr = {"x86_64": 56, "aarch64": 220}[os.uname().machine]
r = libc.syscall(nr, 0x20000000 | 17, 0, 0, 0, 0)
if r == 0: os._exit(0)
if r > 0: print("LEAK clone(CLONE_NEWPID)", r)
if libc.unshare(0x10000000) == 0: print("LEAK unshare(CLONE_NEWUSER)")
print("done")
`
		out, err := s.Command(context.Background(), py, "-c", probe).CombinedOutput()
		if err != nil || strings.Contains(string(out), "LEAK") || !strings.Contains(string(out), "done") {
			t.Errorf("ptrace probe: %v\n%s", err, out)
		}
	}
	if out, err := sh(s, "echo alive").Output(); err != nil || string(out) != "alive\n" {
		t.Errorf("after the probes: %q, %v", out, err)
	}
}

func TestSessionClose(t *testing.T) {
	s, ws := newTestSession(t)
	c := sh(s, "sleep 1; echo late > late.txt")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	time.Sleep(100 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("a command running at Close succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after Close")
	}
	time.Sleep(1200 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(ws, "late.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Error("a command outlived Close")
	}
	if err := sh(s, "true").Run(); !errors.Is(err, ErrSessionClosed) {
		t.Errorf("command after Close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, ".codex")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("placeholder left behind: %v", err)
	}
}

// TestSessionPlaceholdersPerCommand (issue 21, finding 7): between a
// session's commands nothing of its placeholders is on the host, while
// each command finds every missing protected name there and read-only;
// a placeholder the host removes between commands (as the end of each
// command does) is no way in for the next one.
func TestSessionPlaceholdersPerCommand(t *testing.T) {
	s, ws := newTestSession(t)
	names := policy.DefaultProtectedNames()
	for i := range 3 {
		out, err := sh(s, `for n in .codex .claude .vscode .git; do test -d "$n" || echo "no $n"; mkdir "$n/x" 2>/dev/null && echo "made $n/x"; done; test -d .mcp.json || echo "no .mcp.json"; (echo x > .mcp.json) 2>/dev/null && echo "wrote .mcp.json"; echo end`).Output()
		if err != nil || string(out) != "end\n" {
			t.Errorf("command %d: %q, %v", i, out, err)
		}
		for _, n := range names {
			if _, err := os.Lstat(filepath.Join(ws, n)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("after command %d: %s on the host (%v)", i, n, err)
			}
		}
	}
}

func BenchmarkSessionTrue(b *testing.B) {
	ws := b.TempDir()
	pol, _ := testPolicyAt(b, ws)
	s, err := NewSession(pol)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for b.Loop() {
		if err := s.Command(context.Background(), "/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSessionNoThreadLeak: a finished command leaves nothing behind in
// the zygote, neither its restricted thread nor its unix socket
// supervisor's, however many commands the session runs.
func TestSessionNoThreadLeak(t *testing.T) {
	s, _ := newTestSession(t)
	pid := s.impl.(*linuxSession).z.Pid()
	threads := func() int {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	for range 5 {
		if err := sh(s, "true").Run(); err != nil {
			t.Fatal(err)
		}
	}
	base := threads()
	for range 40 {
		if err := sh(s, "true").Run(); err != nil {
			t.Fatal(err)
		}
	}
	// Threads end asynchronously; allow them a moment.
	deadline := time.Now().Add(3 * time.Second)
	for threads() > base+4 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := threads(); n > base+4 {
		t.Errorf("the zygote grew from %d to %d threads over 40 commands", base, n)
	}
	// Idle, the zygote uses no CPU: a finished command's supervisor must
	// not be left polling a listener nobody uses.
	cpu := func() int {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		var u, s int
		fmt.Sscan(f[11], &u)
		fmt.Sscan(f[12], &s)
		return u + s
	}
	c0 := cpu()
	time.Sleep(500 * time.Millisecond)
	if d := cpu() - c0; d > 10 {
		t.Errorf("the idle zygote used %d clock ticks of CPU in 0.5 s", d)
	}
}

// TestSessionStdioHostFiles: a host file given as stdout and the host's
// /dev/null (nil stdin) never reach the command as descriptors: through
// /proc/self/fd it could otherwise chmod or touch them (the mounts and
// Landlock do not cover metadata reached that way). The output still
// arrives in the file.
func TestSessionStdioHostFiles(t *testing.T) {
	s, _ := newTestSession(t)
	vt, err := os.MkdirTemp("/var/tmp", "agentbox-session-stdio-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(vt)
	out, err := os.OpenFile(filepath.Join(vt, "out"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	os.Chmod(out.Name(), 0o644)
	null, err := os.Stat(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if fi, err := os.Stat(os.DevNull); err == nil && fi.Mode() != null.Mode() {
			os.Chmod(os.DevNull, null.Mode().Perm())
		}
	}()
	c := sh(s, "chmod 0777 /proc/self/fd/0 /proc/self/fd/1 2>/dev/null; touch -d 2001-01-01 /proc/self/fd/1 2>/dev/null; echo hi")
	c.Stdout = out
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out.Name()); string(b) != "hi\n" {
		t.Errorf("output in the file: %q", b)
	}
	fi, err := os.Stat(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 || fi.ModTime().Year() == 2001 {
		t.Errorf("the command changed the host file's metadata: %v %v", fi.Mode(), fi.ModTime())
	}
	if fi, err := os.Stat(os.DevNull); err != nil || fi.Mode() != null.Mode() {
		t.Errorf("the command changed the host's /dev/null: %v", fi.Mode())
	}
}

// TestSessionGitWritesChecked: with allow_git_writes, what a session's
// command leaves in .git is checked when that command ends, as after a
// lone run: a symlink it planted at logs/HEAD (git would append reflogs
// through it) is gone before the next command.
func TestSessionGitWritesChecked(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on this machine")
	}
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	pol, ws := testPolicyAt(t, dir)
	pol = policytest.Edit(pol, func(f *policytest.Fields) { f.AllowGitWrites = true })
	s := sessionFor(t, pol)
	outside := filepath.Join(t.TempDir(), "bashrc")
	var diag bytes.Buffer
	c := sh(s, "mkdir -p .git/logs && ln -s "+outside+" .git/logs/HEAD && echo PLANTED")
	c.Diagnostics = &diag
	out, err := c.Output()
	if err != nil || !strings.Contains(string(out), "PLANTED") {
		t.Fatalf("plant: %v %q", err, out)
	}
	if _, err := os.Lstat(filepath.Join(ws, ".git", "logs", "HEAD")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the planted logs/HEAD symlink is still there after the command: %v", err)
	}
	if !strings.Contains(diag.String(), "logs/HEAD") {
		t.Errorf("no message names the removed symlink: %q", diag.String())
	}
}

// TestSessionNullStdioAndBigRequest: streams left nil are the sandbox's
// /dev/null, with a request too big for one packet (it travels in a
// memfd) as with a small one.
func TestSessionNullStdioAndBigRequest(t *testing.T) {
	s, _ := newTestSession(t)
	// All three streams nil: the findings go to a file in the workspace.
	script := `exec 3>&1; stat -L -c '%t:%T' /proc/self/fd/0 /proc/self/fd/3 /proc/self/fd/2 >>report; cat; echo err >&2; echo "$#" >>report`
	for _, n := range []int{1, 2000} { // 2000 arguments of 100 bytes: over 64 KiB
		args := []string{"-c", script, "sh"}
		for range n {
			args = append(args, strings.Repeat("a", 100))
		}
		c := s.Command(context.Background(), "sh", args...)
		if err := c.Run(); err != nil {
			t.Fatalf("%d arguments: %v", n, err)
		}
		report := filepath.Join(c.Policy.Cwd(), "report")
		b, err := os.ReadFile(report)
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(report)
		// /dev/null is character device 1:3.
		if want := fmt.Sprintf("1:3\n1:3\n1:3\n%d\n", n); string(b) != want {
			t.Errorf("%d arguments: got %q, want %q", n, b, want)
		}
	}
}
