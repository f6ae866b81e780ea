//go:build !windows

package setup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
)

// ErrUnsupported is wrapped by every entry point off Windows.
var ErrUnsupported = errors.New("elevated sandbox setup exists only on Windows")

func unsupported() error { return fmt.Errorf("%s: %w", runtime.GOOS, ErrUnsupported) }

// Main reports that agentbox-setup only works on Windows.
func Main(args []string, stdout io.Writer) int {
	fmt.Fprintln(stdout, "agentbox-setup:", unsupported())
	return ExitFailed
}

// Run is unsupported off Windows.
func Run(ctx context.Context, opts Options, out io.Writer) error { return unsupported() }

// Cleanup has nothing to remove off Windows.
func Cleanup(ctx context.Context, out io.Writer) error { return nil }

// GetStatus reports that elevated mode does not exist here.
func GetStatus() *Status { return &Status{Err: unsupported()} }

// LoadLogin is unsupported off Windows.
func LoadLogin(network bool, proxyPorts []int) (*Login, error) { return nil, unsupported() }
