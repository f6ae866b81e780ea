package stage

import (
	"fmt"
	"io"
	"os"

	"github.com/agentbox/agentbox/internal/linux/spec"

	"golang.org/x/sys/unix"
)

// The stage's side of the standard streams: the command's, built inside
// the sandbox (the host's relay is in stdio_linux.go).

// commandStdio is what the init hands the command.
type commandStdio struct {
	files [3]*os.File
	// ctty is the stream that becomes the command's controlling
	// terminal, or -1.
	ctty int
	// opened are files to close once the command has them.
	opened []*os.File
	// stdinReopened: stdin is the caller's file, opened here by path.
	stdinReopened bool
}

// sandboxStdio prepares the command's streams: devices reopened from the
// sandbox's own /dev, and the sandbox's pseudo-terminal when asked for.
// It runs after the root is built (the new devpts is mounted) and before
// the walls go up.
func sandboxStdio(sp *spec.Spec) (*commandStdio, error) {
	s := &commandStdio{files: [3]*os.File{os.Stdin, os.Stdout, os.Stderr}, ctty: -1}
	for i := range 3 {
		f, err := reopenDevice(i)
		if err != nil {
			return nil, err
		}
		if f != nil {
			s.files[i] = f
			s.opened = append(s.opened, f)
		}
	}
	for _, rs := range sp.Command.Reopen {
		if rs.Stream < 0 || rs.Stream > 2 {
			continue
		}
		if f := reopenFile(rs); f != nil {
			s.files[rs.Stream] = f
			s.opened = append(s.opened, f)
			if rs.Stream == 0 {
				s.stdinReopened = true
			}
		}
	}
	if sp.Command.Pty != nil {
		slave, err := openPty(sp.Command.Pty)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("allocating the sandbox's terminal: %w", err)
		}
		s.opened = append(s.opened, slave)
		for _, i := range sp.Command.Pty.Streams {
			if i >= 0 && i < 3 {
				s.files[i] = slave
				if s.ctty < 0 {
					s.ctty = i
				}
			}
		}
	}
	return s, nil
}

func (s *commandStdio) close() {
	for _, f := range s.opened {
		f.Close()
	}
	s.opened = nil
}

// reopenDevice returns stream fd reopened from the sandbox's /dev when it
// is one of sandboxDevices (the caller's /dev/null is the host's node, on
// a writable mount), or nil.
func reopenDevice(fd int) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		if err == unix.EBADF {
			return nil, nil // a closed stream stays closed
		}
		return nil, os.NewSyscallError("fstat", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return nil, nil
	}
	name, ok := spec.SandboxDevices[spec.DevNumber(st.Rdev)]
	if !ok {
		return nil, nil
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return nil, os.NewSyscallError("fcntl(F_GETFL)", err)
	}
	p := "/dev/" + name
	nfd, err := unix.Open(p, fl&unix.O_ACCMODE|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(nfd), p), nil
}

// reopenFile opens rs by its path in the sandbox's view, or returns nil
// when that fails (outside the writable roots for writing, say) or names
// another inode than the caller's: the relay then stays.
func reopenFile(rs spec.ReopenSpec) *os.File {
	flags := unix.O_RDONLY
	if rs.Stream > 0 {
		flags = unix.O_WRONLY | unix.O_APPEND
	}
	fd, err := unix.Open(rs.Path, flags|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Dev != rs.Dev || st.Ino != rs.Ino {
		unix.Close(fd)
		return nil
	}
	if rs.Stream == 0 && rs.Offset > 0 {
		if _, err := unix.Seek(fd, rs.Offset, io.SeekStart); err != nil {
			unix.Close(fd)
			return nil
		}
	}
	return os.NewFile(uintptr(fd), rs.Path)
}

// openPty allocates a pseudo-terminal from /dev/ptmx (the sandbox's own
// devpts instance; the host's only in degraded mode, where /dev is the
// host's), sets it up like the caller's terminal, sends the master to
// agentbox and returns the slave.
func openPty(ps *spec.PtySpec) (*os.File, error) {
	defer unix.Close(ps.FD)
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: "/dev/ptmx", Err: err}
	}
	defer unix.Close(m)
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		return nil, os.NewSyscallError("ioctl(TIOCSPTLCK)", err)
	}
	sfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		return nil, os.NewSyscallError("ioctl(TIOCGPTPEER)", errno)
	}
	slave := os.NewFile(sfd, "pty-slave")
	t := unix.Termios{Iflag: ps.Iflag, Oflag: ps.Oflag, Cflag: ps.Cflag, Lflag: ps.Lflag, Ispeed: ps.Ispeed, Ospeed: ps.Ospeed}
	copy(t.Cc[:], ps.Cc)
	if err := unix.IoctlSetTermios(int(sfd), unix.TCSETS, &t); err != nil {
		slave.Close()
		return nil, os.NewSyscallError("ioctl(TCSETS)", err)
	}
	ws := unix.Winsize{Row: ps.Rows, Col: ps.Cols, Xpixel: ps.Xpixel, Ypixel: ps.Ypixel}
	if err := unix.IoctlSetWinsize(int(sfd), unix.TIOCSWINSZ, &ws); err != nil {
		slave.Close()
		return nil, os.NewSyscallError("ioctl(TIOCSWINSZ)", err)
	}
	if err := unix.Sendmsg(ps.FD, []byte{0}, unix.UnixRights(m), nil, 0); err != nil {
		slave.Close()
		return nil, os.NewSyscallError("sendmsg(pty master)", err)
	}
	return slave, nil
}
