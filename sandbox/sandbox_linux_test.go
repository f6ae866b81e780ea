package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/policy"
)

func testPolicy(t *testing.T) (*policy.Policy, string) {
	t.Helper()
	return testPolicyAt(t, t.TempDir())
}

func testPolicyAt(t testing.TB, dir string) (*policy.Policy, string) {
	t.Helper()
	ws, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policytest.Resolve(policy.Options{Cwd: ws}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return pol, ws
}

func TestOutputAndExitError(t *testing.T) {
	pol, ws := testPolicy(t)
	out, err := Command(pol, "sh", "-c", "pwd; echo err >&2; exit 3").Output()
	var ee *ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || string(ee.Stderr) != "err\n" {
		t.Fatalf("err = %#v", err)
	}
	if strings.TrimSpace(string(out)) != ws {
		t.Errorf("cwd inside = %q, want %q", out, ws)
	}
	if _, err := os.Stat(filepath.Join(ws, ".codex")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("placeholder left behind: %v", err)
	}
}

func TestWritesConfined(t *testing.T) {
	_, ws := testPolicy(t)
	outside := t.TempDir() // under /tmp, which this policy leaves read-only
	yes := true
	pol, err := policy.Resolve(policy.Options{Cwd: ws, Config: &policy.Config{SandboxWorkspaceWrite: policy.WorkspaceWriteSection{
		ExcludeSlashTmp: &yes, ExcludeTmpdirEnvVar: &yes}}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pol.WritableRoots(), []string{ws}) {
		t.Fatalf("writable roots %q, want only %s", pol.WritableRoots(), ws)
	}
	err = Command(pol, "sh", "-c", "echo in > in.txt; echo out > "+outside+"/out.txt").Run()
	if err == nil {
		t.Error("writing outside succeeded")
	}
	if _, err := os.Stat(filepath.Join(ws, "in.txt")); err != nil {
		t.Errorf("write inside failed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "out.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("host: file written outside the roots (%v)", err)
	}
}

func TestContextKillsTree(t *testing.T) {
	pol, ws := testPolicy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	c := CommandContext(ctx, pol, "sh", "-c", "(sleep 30; echo late > late.txt) & sleep 30")
	err := c.Run()
	var ee *ExitError
	if !errors.As(err, &ee) || !ee.TimedOut || ee.Signal != 9 {
		t.Fatalf("err = %v (%#v)", err, c.ProcessState)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancel took %v", d)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(ws, "late.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Error("background child survived the cancel")
	}
}

func TestStartErrors(t *testing.T) {
	pol, ws := testPolicy(t)
	err := Command(pol, "no-such-command-agentbox").Run()
	var se *StartError
	if !errors.As(err, &se) || se.Code != CodeNotFound {
		t.Errorf("not found: %v", err)
	}
	os.WriteFile(filepath.Join(ws, "noexec"), []byte("#!/bin/sh\n"), 0o644)
	err = Command(pol, "./noexec").Run()
	if !errors.As(err, &se) || se.Code != CodeNotExecutable {
		t.Errorf("not executable: %v", err)
	}
	c := Command(pol, "true")
	c.Run()
	if err := c.Start(); err == nil {
		t.Error("second Start succeeded")
	}
}

// readyLine starts c with its stdout on a pipe and returns once the
// command has printed its first line.
func readyLine(t *testing.T, c *Cmd) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c.Stdout = w
	err = c.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(r).ReadString('\n'); err != nil {
		t.Fatalf("no ready line: %v", err)
	}
}

// Cmd.Process: its Pid is the sandbox's init (our child, not the
// command), Signal reaches the command, Kill ends the whole tree.
func TestCmdProcess(t *testing.T) {
	pol, ws := testPolicy(t)
	c := Command(pol, "sh", "-c", `trap 'echo term > term.txt; exit 7' TERM; echo $$; while :; do sleep 0.05; done`)
	if c.Process != nil {
		t.Fatal("Process set before Start")
	}
	readyLine(t, c)
	if c.Process == nil || c.Process.Pid <= 0 {
		t.Fatalf("Process after Start = %+v", c.Process)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ppid ...
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if ppid, _ := strconv.Atoi(fields[1]); ppid != os.Getpid() {
		t.Errorf("Process.Pid %d has parent %d, want this test (%d): it should be the init agentbox started", c.Process.Pid, ppid, os.Getpid())
	}
	if err := c.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var ee *ExitError
	if err := c.Wait(); !errors.As(err, &ee) || ee.Code != 7 {
		t.Fatalf("Wait after SIGTERM = %v, want exit 7 from the trap", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "term.txt")); string(b) != "term\n" {
		t.Errorf("the command's trap did not run: term.txt = %q", b)
	}

	// Kill: a background child that keeps writing its heartbeat stops
	// with the command.
	beat := filepath.Join(ws, "beat")
	c = Command(pol, "sh", "-c", `(while :; do date +%s%N > beat; sleep 0.05; done) & echo ready; sleep 60`)
	readyLine(t, c)
	if err := c.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); !errors.As(err, &ee) || ee.Signal != 9 {
		t.Fatalf("Wait after Kill = %v, want killed", err)
	}
	before, _ := os.ReadFile(beat)
	time.Sleep(300 * time.Millisecond)
	if after, _ := os.ReadFile(beat); !bytes.Equal(before, after) {
		t.Errorf("the background child outlived Process.Kill: heartbeat %q then %q", before, after)
	}
}

// Dir starts the command elsewhere than the workspace, alone and in a
// session, without changing what it may write.
func TestCmdDir(t *testing.T) {
	pol, ws := testPolicy(t)
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(pol)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, mk := range map[string]func() *Cmd{
		"lone":    func() *Cmd { return Command(pol, "sh", "-c", "pwd; echo x > here") },
		"session": func() *Cmd { return s.Command(context.Background(), "sh", "-c", "pwd; echo x > here") },
	} {
		for _, dir := range []string{"sub", filepath.Join(ws, "sub")} {
			c := mk()
			c.Dir = dir
			out, err := c.Output()
			if err != nil {
				t.Fatalf("%s Dir=%s: %v", name, dir, err)
			}
			if got := strings.TrimSpace(string(out)); got != filepath.Join(ws, "sub") {
				t.Errorf("%s Dir=%s: pwd %q, want %s/sub", name, dir, got, ws)
			}
			os.Remove(filepath.Join(ws, "sub", "here"))
		}
	}
	// Outside the writable roots Dir is a place to read, not to write.
	c := Command(pol, "sh", "-c", "pwd; echo x > here")
	c.Dir = "/usr"
	out, err := c.Output()
	if err == nil || strings.TrimSpace(string(out)) != "/usr" {
		t.Errorf("Dir=/usr: out %q, err %v; want pwd /usr and a failed write", out, err)
	}
	if _, err := os.Stat("/usr/here"); err == nil {
		os.Remove("/usr/here")
		t.Fatal("BREACH: a command started in /usr wrote /usr/here")
	}
}

// Cancel replaces the kill when the context ends; WaitDelay bounds it.
func TestCmdCancel(t *testing.T) {
	pol, _ := testPolicy(t)
	ctx, cancel := context.WithCancel(context.Background())
	c := CommandContext(ctx, pol, "sh", "-c", `trap 'echo term; exit 7' TERM; echo ready; while :; do sleep 0.05; done`)
	c.Cancel = func() error { return c.Signal(syscall.SIGTERM) }
	var out strings.Builder
	c.Stdout = &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	cancel()
	err := c.Wait()
	var ee *ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 || !strings.Contains(out.String(), "term") {
		t.Fatalf("Wait = %v, output %q; want exit 7 after the trap ran", err, out.String())
	}

	// A Cancel the command ignores: the tree is killed WaitDelay later.
	ctx, cancel = context.WithCancel(context.Background())
	c = CommandContext(ctx, pol, "sh", "-c", `trap '' TERM; while :; do sleep 0.05; done`)
	c.Cancel = func() error { return c.Signal(syscall.SIGTERM) }
	c.WaitDelay = 300 * time.Millisecond
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	cancel()
	err = c.Wait()
	if !errors.As(err, &ee) || ee.Signal != int(syscall.SIGKILL) {
		t.Fatalf("Wait = %v; want killed by SIGKILL after WaitDelay", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 10*time.Second {
		t.Errorf("killed %v after cancel; want about WaitDelay (300ms)", d)
	}
}
