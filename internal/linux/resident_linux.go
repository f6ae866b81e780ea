package linux

import "os"

// PassesStdio reports whether a lone run hands f to the command as it is
// (or reopens it from the sandbox's /dev): an anonymous pipe, a connected
// unix stream socket, or one of the sandbox's devices. Anything else a
// lone run relays or gives a pseudo-terminal (see classifyStdio).
func PassesStdio(f *os.File) bool { return passable(f) }

// ParseRights returns the descriptors an SCM_RIGHTS control message
// carries (none when it is malformed).
func ParseRights(oob []byte) []int { return parseRights(oob) }

// SendMsg sends b on the socket fd with fds as SCM_RIGHTS, retrying on
// EINTR, without raising SIGPIPE.
func SendMsg(fd int, b []byte, fds []int) error { return sendMsg(fd, b, fds) }

// CloseAll closes every descriptor in fds.
func CloseAll(fds []int) { closeAll(fds) }
