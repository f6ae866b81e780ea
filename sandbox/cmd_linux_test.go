package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

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
