//go:build !linux && !windows && !darwin

package sandbox

import (
	"fmt"
	"runtime"
)

// preflight has nothing to refuse before the backend starts here.
func preflight(*Cmd) error { return nil }

func start(c *Cmd, p *proc) error {
	return &StartError{Code: CodeSandboxFailure, Err: fmt.Errorf("agentbox has no sandbox backend for %s: %w", runtime.GOOS, ErrUnsupported)}
}

// Main is a no-op where there is no re-exec stage.
//
// Deprecated: nothing needs to call Main.
func Main() {}
