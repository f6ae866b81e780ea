//go:build unix

package lookpath

import "syscall"

// mayExecute asks the kernel, which knows this process's ids, groups and
// the file's ACLs: mode bits alone say yes to a file only its owner may run.
// It uses the standard library's call so that policy, which looks commands
// up, links no system-call package (policy/deps_test.go).
func mayExecute(p string) bool { return syscall.Access(p, 0x1 /* X_OK */) == nil }
