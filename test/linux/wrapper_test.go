//go:build linux

package linux

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestDevWrapper: scripts/agentbox runs agentbox from a checkout with
// agentbox's own exit status (go run ./cmd/agentbox reports 1 for any
// failure of the program it ran), builds once, and again only after a
// source changed.
func TestDevWrapper(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain")
	}
	cache := t.TempDir()
	env := append(os.Environ(), "AGENTBOX_DEV_CACHE="+cache, "AGENTBOX_RESIDENT=0")
	wrapper := filepath.Join(moduleRoot, "scripts", "agentbox")
	status := func(name string, args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = moduleRoot, env
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return 0, string(out)
	}
	run := []string{"run", "-s", "danger-full-access", "--", "sh", "-c", "exit 7"}
	if code, out := status(wrapper, run...); code != 7 {
		t.Fatalf("scripts/agentbox: status %d, want the command's 7\n%s", code, out)
	}
	if code, out := status(wrapper, "run", "-s", "bogus", "--", "true"); code != 125 {
		t.Errorf("scripts/agentbox with a bad mode: status %d, want 125\n%s", code, out)
	}
	bins, _ := filepath.Glob(filepath.Join(cache, "*", "agentbox"))
	if len(bins) != 1 {
		t.Fatalf("binaries in the cache: %v", bins)
	}
	fi, _ := os.Stat(bins[0])
	if code, _ := status(wrapper, "version"); code != 0 {
		t.Fatal("version failed")
	}
	if after, _ := os.Stat(bins[0]); !after.ModTime().Equal(fi.ModTime()) {
		t.Errorf("rebuilt without a source change")
	}
	// A source changes (its time stands for its content: nothing else
	// in the tree changes): the next run builds again.
	time.Sleep(10 * time.Millisecond)
	now := time.Now()
	if err := os.Chtimes(filepath.Join(moduleRoot, "cmd", "agentbox", "main.go"), now, now); err != nil {
		t.Fatal(err)
	}
	if code, _ := status(wrapper, "version"); code != 0 {
		t.Fatal("version after the change failed")
	}
	if after, _ := os.Stat(bins[0]); after.ModTime().Equal(fi.ModTime()) {
		t.Errorf("not rebuilt after a source changed")
	}
}
