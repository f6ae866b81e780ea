package seccomp

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// sockFprog converts prog to the kernel's struct sock_fprog. The caller
// must keep filter alive (runtime.KeepAlive) until the syscall returns.
func sockFprog(prog []bpf.RawInstruction) (fprog unix.SockFprog, filter []unix.SockFilter) {
	// bpf.RawInstruction and struct sock_filter have the same layout
	// (u16 code, u8 jt, u8 jf, u32 k), but the copy is cheap and avoids
	// depending on that.
	filter = make([]unix.SockFilter, len(prog))
	for i, ins := range prog {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	return unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}, filter
}

func install(prog []bpf.RawInstruction) error {
	fprog, filter := sockFprog(prog)

	// no_new_privs and (in the prctl fallback) the filter are attributes
	// of the calling thread; stay on it between the calls. The caller
	// is expected to hold the lock until exec as well.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return os.NewSyscallError("prctl(PR_SET_NO_NEW_PRIVS)", err)
	}

	r1, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(filter)
	switch {
	case errno == unix.ENOSYS:
		// Kernel older than 3.17: no seccomp(2), no TSYNC.
		// Raw syscall rather than unix.Prctl: the pointer-to-uintptr
		// conversion is only guaranteed safe inside the argument list of
		// an assembly syscall function.
		_, _, errno := unix.Syscall6(unix.SYS_PRCTL, unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER,
			uintptr(unsafe.Pointer(&fprog)), 0, 0, 0)
		runtime.KeepAlive(filter)
		if errno != 0 {
			return os.NewSyscallError("prctl(PR_SET_SECCOMP)", errno)
		}
		return nil
	case errno != 0:
		return os.NewSyscallError("seccomp(SECCOMP_SET_MODE_FILTER, TSYNC)", errno)
	case r1 != 0:
		// With TSYNC, a positive return is the ID of a thread that
		// could not be synchronized (it already has a diverging
		// filter); nothing was installed.
		return os.NewSyscallError("seccomp(SECCOMP_SET_MODE_FILTER, TSYNC)",
			fmt.Errorf("thread %d could not be synchronized; no filter installed", r1))
	}
	return nil
}

func installListener(prog []bpf.RawInstruction) (int, error) {
	fprog, filter := sockFprog(prog)
	// no_new_privs is per thread; set it on this one even if the caller
	// has (it is idempotent), since the kernel refuses the filter without.
	if _, _, errno := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); errno != 0 {
		return -1, os.NewSyscallError("prctl(PR_SET_NO_NEW_PRIVS)", errno)
	}
	// WAIT_KILLABLE_RECV (5.19+): once the listener holds a call, only a
	// fatal signal interrupts the target, so a call already performed on
	// its behalf is never restarted. Older kernels answer EINVAL.
	flags := uintptr(unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV)
	for {
		fd, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
		runtime.KeepAlive(filter)
		if errno == unix.EINVAL && flags&unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV != 0 {
			flags &^= unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
			continue
		}
		if errno != 0 {
			return -1, os.NewSyscallError("seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER)", errno)
		}
		unix.CloseOnExec(int(fd))
		return int(fd), nil
	}
}
