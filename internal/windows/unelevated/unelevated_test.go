package unelevated

import (
	"os"
	"path/filepath"
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
