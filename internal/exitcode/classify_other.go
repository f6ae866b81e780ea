//go:build unix && !linux && !darwin

package exitcode

import "syscall"

// libErr: no loader errnos of their own here.
func libErr(e syscall.Errno) bool { return false }
