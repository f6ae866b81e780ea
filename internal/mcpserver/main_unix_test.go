//go:build linux || darwin

package mcpserver

import (
	"fmt"
	"os"
	"testing"
)

// TestMain gives the package's tests a state directory of their own:
// placeholder records, the post-run check's windows and the quarantine
// are per state directory, and other agentbox runs on the machine (other
// test processes among them) must not share this one's.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agentbox-sandbox-test-state-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_STATE_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
