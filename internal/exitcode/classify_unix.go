//go:build unix

package exitcode

import "syscall"

// notFound: the path names nothing (fs.ErrNotExist is ENOENT alone).
func notFound(err error) bool {
	e, ok := errnoOf[syscall.Errno](err)
	return ok && e == syscall.ENOTDIR
}

// notExecutable: errors execve(2) gives for a file it found but would
// not run (EACCES and EPERM are fs.ErrPermission).
func notExecutable(err error) bool {
	e, ok := errnoOf[syscall.Errno](err)
	if !ok {
		return false
	}
	switch e {
	case syscall.ENOEXEC, syscall.EISDIR, syscall.E2BIG, syscall.ETXTBSY, syscall.ELOOP, syscall.ENAMETOOLONG:
		return true
	}
	return libErr(e)
}
