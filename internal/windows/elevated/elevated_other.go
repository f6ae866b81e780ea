//go:build !windows

package elevated

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/agentbox/agentbox/internal/exitcode"
)

// ErrUnsupported is wrapped off Windows.
var ErrUnsupported = errors.New("the elevated sandbox exists only on Windows")

// Process is a command running in the elevated sandbox (Windows only).
type Process struct{}

// Start is unsupported off Windows.
func Start(ctx context.Context, s Spec) (*Process, error) {
	return nil, &StartError{Code: exitcode.SandboxFailure, Err: fmt.Errorf("%s: %w", runtime.GOOS, ErrUnsupported)}
}

// Pid, Wait and Kill exist so callers compile everywhere.
func (p *Process) Pid() uint32           { return 0 }
func (p *Process) Wait() (uint32, error) { return 0, ErrUnsupported }
func (p *Process) Kill() error           { return ErrUnsupported }

// RunnerMain reports that agentbox-runner only works on Windows.
func RunnerMain(args []string) int {
	fmt.Fprintln(os.Stderr, "agentbox-runner:", ErrUnsupported)
	return exitcode.SandboxFailure
}
