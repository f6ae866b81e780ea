package linux

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"
)

// The init stage forks the command from its locked main thread, and that
// thread drops everything (lockDown). Its other threads (the Go runtime's,
// the signal forwarder, the unix socket supervisor's connects) would keep
// the capabilities the init started with in the sandbox's user namespace
// (CAP_SYS_ADMIN, CAP_NET_ADMIN: enough to unmount the walls) for the
// whole run. They lose them too, through psx, which runs one syscall on
// every thread of the process (syscall.AllThreadsSyscall in a cgo-free
// binary, libpsx's signal in a cgo one, where AllThreadsSyscall refuses).
// Threads created later are cloned from these, and inherit what they have.
//
// psx requires every thread to get the same result, so the
// steps that need CAP_SETPCAP run before the main thread drops it, and the
// final capset (allowed without any capability) after.

// allThreads runs prctl(option, arg) on every thread.
func allThreads(option, arg uintptr) error {
	if _, _, errno := psx.Syscall6(unix.SYS_PRCTL, option, arg, 0, 0, 0, 0); errno != 0 {
		return errno
	}
	return nil
}

// lockOtherThreads, before dropCapabilities: no_new_privs and the locked
// securebits on every thread.
//
// The bounding set of the other threads is left alone: it only limits
// what an execve may grant, and with no_new_privs and SECBIT_NOROOT
// locked an execve grants nothing; emptying it would cost one all-thread
// call per capability (about 40) on every run.
func lockOtherThreads(securebits bool) error {
	if err := allThreads(unix.PR_SET_NO_NEW_PRIVS, 1); err != nil {
		return &os.SyscallError{Syscall: "prctl(PR_SET_NO_NEW_PRIVS) on every thread", Err: err}
	}
	if !securebits {
		// No CAP_SETPCAP (see dropCapabilities): no_new_privs and the
		// empty sets dropOtherThreads leaves are what holds.
		return nil
	}
	if err := allThreads(unix.PR_SET_SECUREBITS, lockedSecurebits); err != nil {
		return &os.SyscallError{Syscall: "prctl(PR_SET_SECUREBITS) on every thread", Err: err}
	}
	return nil
}

// dropOtherThreads, after dropCapabilities: empty capability sets on every
// thread (which clears the ambient set too), then a check of each.
func dropOtherThreads() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if _, _, errno := psx.Syscall6(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0, 0, 0, 0); errno != 0 {
		return &os.SyscallError{Syscall: "capset on every thread", Err: errno}
	}
	runtime.KeepAlive(&hdr)
	runtime.KeepAlive(&data)
	tasks, err := os.ReadDir("/proc/thread-self/..")
	if err != nil {
		return fmt.Errorf("listing the init's threads: %w", err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		h := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3, Pid: int32(tid)}
		var d [2]unix.CapUserData
		if err := unix.Capget(&h, &d[0]); err != nil {
			if err == unix.ESRCH {
				continue // an exited thread
			}
			return &os.SyscallError{Syscall: "capget", Err: err}
		}
		for _, x := range d {
			if x.Effective|x.Permitted|x.Inheritable != 0 {
				return fmt.Errorf("capabilities remain on thread %d of the init after dropping them: %+v", tid, d)
			}
		}
	}
	return nil
}
