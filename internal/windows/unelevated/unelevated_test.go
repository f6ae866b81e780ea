package unelevated

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/windows/winenv"
	"github.com/agentbox/agentbox/policy"
)

func TestWriteDenybin(t *testing.T) {
	dir := filepath.Join(tempDir(t), "denybin")
	if err := WriteDenybin(dir); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "ssh.cmd"), []byte("tampered"), 0o644)
	if err := WriteDenybin(dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range winenv.StubFiles() {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v", name, got, err)
		}
	}
}

func TestChildEnv(t *testing.T) {
	env := []string{"PATH=C:\\bin"}
	if got := ChildEnv(&policy.Policy{Network: true}, env, `C:\d`); len(got) != 1 {
		t.Errorf("network on changed env: %v", got)
	}
	got := ChildEnv(&policy.Policy{}, env, `C:\d`)
	if p, _ := winenv.Get(got, "PATH"); p != `C:\d;C:\bin` {
		t.Errorf("PATH = %q", p)
	}
}

// tempDir is t.TempDir without its failing cleanup under Wine, where Go's
// RemoveAll gets "Invalid function"; removal here is best effort.
func tempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "agentbox-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestLimits(t *testing.T) {
	ws := &policy.Policy{Mode: policy.WorkspaceWrite, WritableRoots: []string{`C:\w`}, Protected: []policy.Protected{
		{Path: `C:\w\.git`, Kind: policy.Dir, Root: `C:\w`},
		{Path: `C:\w\vendor\x\.git`, Kind: policy.Dir, Root: `C:\w`},
	}}
	got := Limits(ws)
	if len(got) != 2 || !strings.Contains(got[0], "Low integrity label") || !strings.Contains(got[1], `C:\w\vendor\x\.git`) {
		t.Errorf("workspace-write limits = %q", got)
	}
	if got := Limits(&policy.Policy{Mode: policy.ReadOnly}); len(got) != 1 || !strings.Contains(got[0], "delete or rename") {
		t.Errorf("read-only limits = %q", got)
	}
	if got := Limits(&policy.Policy{Mode: policy.DangerFullAccess}); got != nil {
		t.Errorf("full access limits = %q", got)
	}
	if Limits(nil) != nil {
		t.Error("nil policy has limits")
	}
}
