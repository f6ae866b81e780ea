//go:build unix

package stdio

import (
	"os"
	"syscall"
)

// openDevNull opens the null device for a command's stream. Not through
// os.OpenFile, which tries the runtime's poller on every file it opens:
// for a device that cannot be polled that is five more system calls
// (flags read, non-blocking set, the poller's refusal, flags read and
// reset) for a descriptor the relay only hands on, blocking as it ends
// up anyway.
func openDevNull(flag int) (*os.File, error) {
	for {
		fd, err := syscall.Open(os.DevNull, flag|syscall.O_CLOEXEC, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: os.DevNull, Err: err}
		}
		return os.NewFile(uintptr(fd), os.DevNull), nil
	}
}
