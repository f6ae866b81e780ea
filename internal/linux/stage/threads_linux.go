package stage

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"
)

// The init stage forks the command from its locked main thread, but its
// other threads share its namespaces and would keep whatever they started
// with. The few steps that must reach them go through psx, which runs one
// syscall on every thread of the process (syscall.AllThreadsSyscall in a
// cgo-free binary, libpsx's signal in a cgo one, where AllThreadsSyscall
// refuses). Threads created later are cloned from these, and inherit what
// they have. Each such call stops the world and signals every thread, so
// the init makes as few as it can, each once: no_new_privs
// (setNoNewPrivs), the capset that empties every set (emptyEveryThread),
// and the Landlock restriction (landlockWalls).
//
// psx requires every thread to get the same result, so the steps that
// need CAP_SETPCAP run on the main thread before this, and the capset
// (allowed without any capability) is the same call everywhere.

// allThreads runs prctl(option, arg) on every thread.
func allThreads(option, arg uintptr) error {
	if _, _, errno := psx.Syscall6(unix.SYS_PRCTL, option, arg, 0, 0, 0, 0); errno != 0 {
		return errno
	}
	return nil
}

// emptyEveryThread empties the capability sets of every thread (which
// clears their ambient sets too), then checks each.
func emptyEveryThread() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if _, _, errno := psx.Syscall6(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0, 0, 0, 0); errno != 0 {
		return &os.SyscallError{Syscall: "capset on every thread", Err: errno}
	}
	runtime.KeepAlive(&hdr)
	runtime.KeepAlive(&data)
	// Trust but verify: a capability left behind would let root inside
	// the sandbox remount or unmount its walls.
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
