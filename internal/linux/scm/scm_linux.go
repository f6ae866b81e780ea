// Package scm passes descriptors as SCM_RIGHTS on unix sockets, for the
// hops between agentbox's processes (the host and its stage, the zygote
// and its callers, the resident helper and its clients).
package scm

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Send sends b on the socket fd, with fds (if any) as SCM_RIGHTS,
// retrying on EINTR; a peer gone is an error, not a SIGPIPE.
func Send(fd int, b []byte, fds []int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	for {
		err := unix.Sendmsg(fd, b, oob, nil, unix.MSG_NOSIGNAL)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// Rights returns the descriptors the control messages oob carry (none
// when it is malformed).
func Rights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if f, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}

// CloseAll closes every descriptor in fds.
func CloseAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
