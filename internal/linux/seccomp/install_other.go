//go:build !linux

package seccomp

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/net/bpf"
)

func install([]bpf.RawInstruction) error {
	return fmt.Errorf("seccomp: not available on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func installListener([]bpf.RawInstruction) (int, error) {
	return -1, fmt.Errorf("seccomp: not available on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
