package inotify

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Drain reads fd, an inotify descriptor opened with IN_NONBLOCK, until
// its queue is empty, handing each event to fn; buf is the read buffer
// (MaxEventSize or more: a larger one takes fewer reads). An error (a
// failed read, a malformed record) ends it: events may have been lost,
// which a caller that answers for every change must take as such.
func Drain(fd int, buf []byte, fn func(Event)) error {
	if len(buf) < MaxEventSize {
		return fmt.Errorf("inotify: a read buffer of %d bytes, short of the %d one event may take", len(buf), MaxEventSize)
	}
	for {
		n, err := unix.Read(fd, buf)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return nil
		case err != nil:
			return os.NewSyscallError("read inotify", err)
		case n <= 0:
			return nil
		}
		if err := Parse(buf[:n], fn); err != nil {
			return err
		}
	}
}
