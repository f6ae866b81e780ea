//go:build linux || darwin

package sandbox

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/policy"
)

// A background child of an unsandboxed command holds its output pipe; the
// run still ends when the command does, and the child dies with it, as in
// a sandboxed run.
func TestUnsandboxedDoesNotWaitForBackground(t *testing.T) {
	pol, err := policytest.Resolve(policy.Options{Mode: policy.DangerFullAccess, Cwd: t.TempDir()}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := Command(pol, "sh", "-c", "sleep 30 & echo hi").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(out)) != "hi" {
		t.Errorf("output %q, want hi", out)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Output took %v: it waited for the background sleep", d)
	}
	// Input from a reader, output to a writer: both relayed, nothing lost.
	var sb strings.Builder
	c := Command(pol, "sh", "-c", "cat; echo done >&2")
	c.Stdin = strings.NewReader(strings.Repeat("x", 1<<20))
	c.Stdout, c.Stderr = &sb, &sb
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	if got := sb.String(); len(got) != 1<<20+5 || !strings.HasSuffix(got, "done\n") {
		t.Errorf("relayed %d bytes ending %q, want %d ending done", len(got), got[max(0, len(got)-8):], 1<<20+5)
	}
}

// Without a sandbox, Process.Pid is the command itself.
func TestUnsandboxedProcessPid(t *testing.T) {
	pol, err := policy.Resolve(policy.Options{Mode: policy.DangerFullAccess, Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	c := Command(pol, "sh", "-c", "echo $$")
	c.Stdout = &out
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != strconv.Itoa(c.Process.Pid) {
		t.Errorf("the command's pid is %s, Process.Pid %d", got, c.Process.Pid)
	}
}
