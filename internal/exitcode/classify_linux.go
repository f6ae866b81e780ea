package exitcode

import "syscall"

// libErr: the ELF loader's refusals (a bad or missing shared library
// section, a wrong architecture's interpreter).
func libErr(e syscall.Errno) bool {
	return e == syscall.ELIBBAD || e == syscall.ELIBEXEC || e == syscall.ELIBMAX || e == syscall.ELIBACC
}
