//go:build linux || darwin

package sandbox

import (
	"os"
	"path/filepath"
)

// stateDir is where agentbox keeps its own bookkeeping on Unix:
// $XDG_STATE_HOME/agentbox or ~/.local/state/agentbox.
func stateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "agentbox")
	}
	if h := os.Getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "agentbox")
	}
	return ""
}
