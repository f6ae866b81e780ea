//go:build unix

package stdio

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// needStop makes the pipe that wakes the polling input copies.
func (r *Relay) needStop() error {
	if r.stopR != nil {
		return nil
	}
	var err error
	r.stopR, r.stopW, err = os.Pipe()
	return err
}

// copyIn copies src into dst. A file is read only when poll says it has
// data, and the copy ends when stop becomes readable, so that no read of
// the caller's terminal or FIFO outlives the child and swallows input
// meant for whoever reads it next.
func copyIn(dst *os.File, src io.Reader, stop *os.File) {
	f, ok := src.(*os.File)
	if !ok || stop == nil {
		io.Copy(dst, src)
		return
	}
	sfd, err := RawFd(f)
	if err != nil {
		return
	}
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	buf := (*bp)[:64<<10]
	for {
		fds := []unix.PollFd{{Fd: int32(sfd), Events: unix.POLLIN}, {Fd: int32(stop.Fd()), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents == 0 {
			continue
		}
		n, err := unix.Read(sfd, buf)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if n <= 0 {
			return // EOF, or an error: either way the child sees EOF
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

// copyOut copies src into w until EOF (or EIO, a pty without slaves).
// A file is written by its own descriptor, so O_APPEND and the offset
// the caller shares are honoured and a non-blocking descriptor (someone
// else's O_NONBLOCK on a shared terminal) is waited out.
func copyOut(w io.Writer, src *os.File) error {
	f, ok := w.(*os.File)
	if !ok {
		return copyTo(w, src)
	}
	dfd, err := RawFd(f)
	if err != nil {
		return err
	}
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	for {
		n, err := src.Read(*bp)
		if n > 0 {
			if err := writeAll(dfd, (*bp)[:n]); err != nil {
				return &os.PathError{Op: "write", Path: f.Name(), Err: err}
			}
		}
		if err == io.EOF || errors.Is(err, unix.EIO) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// CopyOut copies src into w as the relay copies output, until src ends.
// For a backend's own stream (a pty's master) that it waits for with
// [Relay.Go].
func CopyOut(w io.Writer, src *os.File) error { return copyOut(w, src) }

// writeAll writes b to fd, waiting out a non-blocking descriptor.
func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}, -1)
			continue
		case err != nil:
			return err
		}
		b = b[n:]
	}
	return nil
}

// sameFile reports whether a and b are files of one inode.
func sameFile(a, b any) bool {
	f, ok1 := a.(*os.File)
	g, ok2 := b.(*os.File)
	if !ok1 || !ok2 || f == nil || g == nil {
		return false
	}
	x, err1 := f.Stat()
	y, err2 := g.Stat()
	return err1 == nil && err2 == nil && os.SameFile(x, y)
}

// RawFd is f's descriptor. Unlike f.Fd it leaves the descriptor's
// blocking mode alone: the open file description is shared with the
// caller (a shell's terminal), and O_NONBLOCK on it is theirs.
func RawFd(f *os.File) (int, error) {
	sc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	if err := sc.Control(func(u uintptr) { fd = int(u) }); err != nil {
		return -1, err
	}
	return fd, nil
}
