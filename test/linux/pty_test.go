//go:build linux

package linux

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openPty allocates a pseudo-terminal in raw mode (so an injected byte is
// readable at once) and returns its master and slave ends.
func openPty() (master, slave *os.File, err error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("unlockpt: %w", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("ptsname: %w", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	tio, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
	if err == nil {
		tio.Lflag &^= unix.ICANON | unix.ECHO | unix.ISIG
		tio.Cc[unix.VMIN], tio.Cc[unix.VTIME] = 0, 0
		err = unix.IoctlSetTermios(int(s.Fd()), unix.TCSETS, tio)
	}
	if err != nil {
		m.Close()
		s.Close()
		return nil, nil, fmt.Errorf("termios: %w", err)
	}
	return m, s, nil
}

// inputPending is the number of bytes waiting in the terminal's input queue.
func inputPending(slave *os.File) int {
	n, err := unix.IoctlGetInt(int(slave.Fd()), unix.TIOCINQ)
	if err != nil {
		return -1
	}
	return n
}
