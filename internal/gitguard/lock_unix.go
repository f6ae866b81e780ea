//go:build linux || darwin

package gitguard

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// lockFile is a flock(2) lock on a file of the guard directory. The kernel
// drops it when the holder dies, however it dies.
type lockFile struct{ fd int }

func openLock(d *dir, name string) (*lockFile, error) {
	fd, err := unix.Openat(d.fd, name, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: d.child(name), Err: err}
	}
	return &lockFile{fd: fd}, nil
}

// try takes the lock without waiting; ok is false when another holds it.
func (l *lockFile) try(exclusive bool) (ok bool, err error) {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err = unix.Flock(l.fd, how|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

func (l *lockFile) close() { unix.Close(l.fd) }
