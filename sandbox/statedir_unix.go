//go:build linux || darwin

package sandbox

import (
	"os"
	"runtime"

	"github.com/agentbox/agentbox/policy"
)

// stateDir is where agentbox keeps its own bookkeeping on Unix.
func stateDir() string { return policy.StateDir(os.Getenv, runtime.GOOS) }
