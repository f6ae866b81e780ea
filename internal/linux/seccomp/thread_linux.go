package seccomp

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// InstallThread loads prog onto the calling thread only, without
// SECCOMP_FILTER_FLAG_TSYNC: a session's zygote restricts one locked
// thread per command and forks that command from it, while its other
// threads keep serving the session unfiltered. The caller must hold
// runtime.LockOSThread and never unlock it (the thread must die with the
// goroutine), and must have set no_new_privs on this thread or hold
// CAP_SYS_ADMIN.
func InstallThread(prog []bpf.RawInstruction) error {
	if len(prog) == 0 || len(prog) > maxInstructions {
		return fmt.Errorf("seccomp: program length %d outside 1..%d", len(prog), maxInstructions)
	}
	filter := make([]unix.SockFilter, len(prog))
	for i, ins := range prog {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return os.NewSyscallError("seccomp(SECCOMP_SET_MODE_FILTER)", errno)
	}
	return nil
}
