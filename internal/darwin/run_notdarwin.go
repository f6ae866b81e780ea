//go:build !darwin

package darwin

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
)

func command(context.Context, Input, []string) (*exec.Cmd, error) {
	return nil, fmt.Errorf("seatbelt sandbox on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func killGroup(*exec.Cmd) error {
	return fmt.Errorf("seatbelt sandbox on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func check(context.Context, Input) error {
	return fmt.Errorf("seatbelt sandbox on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
