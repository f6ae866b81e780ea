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
