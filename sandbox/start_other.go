//go:build !linux && !windows && !darwin

package sandbox

import (
	"context"
	"io"

	"fmt"
	"runtime"

	"github.com/agentbox/agentbox/policy"
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

func doctor(pol *policy.Policy) *Report {
	return &Report{OS: runtime.GOOS, Backend: "none", Missing: []string{"no sandbox backend for " + runtime.GOOS}}
}

func setup(ctx context.Context, pol *policy.Policy, out io.Writer) error {
	return fmt.Errorf("sandbox.Setup on %s: %w", runtime.GOOS, ErrUnsupported)
}

func cleanup(ctx context.Context, out io.Writer) error { return nil }

func stateDir() string { return "" }
