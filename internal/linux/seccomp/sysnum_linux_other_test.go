//go:build linux && !amd64

package seccomp

// archOnlyNumbers: arm64 has only the syscalls of the generic table.
var archOnlyNumbers = map[string]uintptr{}
