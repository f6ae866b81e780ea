//go:build !linux

package landlock

import (
	"errors"
	"fmt"
	"runtime"
)

func abi() (int, []string, error) {
	return 0, nil, fmt.Errorf("landlock: %w: Linux only, this is %s: %w", ErrUnavailable, runtime.GOOS, errors.ErrUnsupported)
}

func restrict(Config) (Applied, error) {
	_, _, err := abi()
	return Applied{}, err
}
