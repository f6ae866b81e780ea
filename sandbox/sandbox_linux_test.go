package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/rawpolicy"
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
	pol, err := rawpolicy.Resolve(policy.Options{Cwd: ws}, func(string) string { return "" }, "linux")
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
