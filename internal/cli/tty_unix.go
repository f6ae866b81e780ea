//go:build linux || darwin

package cli

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// saveTerminal records the settings of stdin's terminal, if it is one, and
// returns a function that puts them back: a command that turned echo off
// or switched to raw mode and was then killed must not leave the user's
// terminal that way.
func saveTerminal(stdin io.Reader) func() {
	f, ok := stdin.(*os.File)
	if !ok {
		return func() {}
	}
	fd := int(f.Fd())
	t, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return func() {}
	}
	return func() {
		// Only when they changed: setting them from the background
		// (`agentbox run -- make &`) would stop agentbox with SIGTTOU.
		if now, err := unix.IoctlGetTermios(fd, ioctlGetTermios); err == nil && *now == *t {
			return
		}
		unix.IoctlSetTermios(fd, ioctlSetTermios, t)
	}
}
