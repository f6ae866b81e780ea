//go:build !linux && !windows && !darwin

package sandbox

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/agentbox/agentbox/policy"
)

func doctor(pol *policy.Policy) *Report {
	return &Report{OS: runtime.GOOS, Backend: "none", Missing: []string{"no sandbox backend for " + runtime.GOOS}}
}

func setup(ctx context.Context, pol *policy.Policy, out io.Writer) error {
	return fmt.Errorf("sandbox.Setup on %s: %w", runtime.GOOS, ErrUnsupported)
}

func cleanup(ctx context.Context, out io.Writer) error { return nil }
