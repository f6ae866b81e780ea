package exitcode

import "syscall"

// libErr: the Mach-O loader's refusals (a wrong architecture, a file
// that is not a program, a library of the wrong version).
func libErr(e syscall.Errno) bool {
	return e == syscall.EBADARCH || e == syscall.EBADEXEC || e == syscall.EBADMACHO || e == syscall.ESHLIBVERS
}
