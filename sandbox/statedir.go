package sandbox

import (
	"os"
	"runtime"

	"github.com/agentbox/agentbox/internal/agentdirs"
)

// stateDir is where agentbox keeps its own bookkeeping (agentdirs.State:
// the placeholder records on Unix, the synthetic SIDs and the record of
// granted paths on Windows); "" when the environment names none. The
// Windows backend, which cannot run without one, asks
// agentdirs.RequireState for the reason instead.
func stateDir() string { return agentdirs.State(os.Getenv, runtime.GOOS) }
