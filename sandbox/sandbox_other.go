//go:build !linux && !windows && !darwin

package sandbox

import (
	"fmt"
	"runtime"
)

func start(c *Cmd) (process, error) {
	return nil, &StartError{CodeSandboxFailure, fmt.Errorf("agentbox has no sandbox backend for %s: %w", runtime.GOOS, ErrUnsupported)}
}

// Main is a no-op where there is no re-exec stage.
func Main() {}
