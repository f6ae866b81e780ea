//go:build linux || darwin

package sandbox

import (
	"os"
	"runtime"

	"github.com/agentbox/agentbox/internal/agentdirs"
)

// stateDir is where agentbox keeps its own bookkeeping on Unix.
func stateDir() string { return agentdirs.State(os.Getenv, runtime.GOOS) }
