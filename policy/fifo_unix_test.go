//go:build unix

package policy

import (
	"os/exec"
)

// mkfifo uses mkfifo(1): the policy package's tests, like the package,
// stay free of syscall imports.
func mkfifo(path string) error { return exec.Command("mkfifo", path).Run() }
