package linux

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Securebits that make root inside the sandbox an ordinary user for good:
// exec never grants capabilities to uid 0, setuid transitions do not touch
// them, ambient capabilities cannot be raised, and all of it is locked.
const lockedSecurebits = 1<<0 | 1<<1 | // SECBIT_NOROOT(+_LOCKED)
	1<<2 | 1<<3 | // SECBIT_NO_SETUID_FIXUP(+_LOCKED)
	1<<5 | // SECBIT_KEEP_CAPS_LOCKED
	1<<6 | 1<<7 // SECBIT_NO_CAP_AMBIENT_RAISE(+_LOCKED)

// thisThread runs a prctl on the calling thread only. Credentials,
// no_new_privs and the bounding set are per-thread in Linux; the init stage
// keeps its main goroutine locked to one thread (see init in init_linux.go)
// and forks the command from it, so the command inherits exactly this
// thread's state. Changing every thread (psx) cost ~70 ms per run.
func thisThread(option, arg2, arg3 uintptr) error {
	if _, _, errno := unix.RawSyscall6(unix.SYS_PRCTL, option, arg2, arg3, 0, 0, 0); errno != 0 {
		return errno
	}
	return nil
}

// lockDown removes every way back to privilege before the command starts,
// and returns how to wait for the command once started.
func lockDown(spec *Spec) (waitFunc, error) {
	if err := thisThread(unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
		return nil, &os.SyscallError{Syscall: "prctl(PR_SET_NO_NEW_PRIVS)", Err: err}
	}
	// The init's other threads too (threads_linux.go); their securebits
	// only where we may change them, as for this thread below.
	haveSetpcap, err := raiseSetpcap()
	if err != nil {
		return nil, err
	}
	if err := lockOtherThreads(haveSetpcap); err != nil {
		return nil, err
	}
	if err := dropCapabilities(); err != nil {
		return nil, err
	}
	if err := dropOtherThreads(); err != nil {
		return nil, err
	}
	return applyWalls(spec)
}

func dropCapabilities() error {
	// Securebits and the bounding set need CAP_SETPCAP; a caller without
	// it (any plain uid in degraded mode, a container that dropped it)
	// cannot change them, and needs not: no_new_privs, set above, caps
	// what any later execve may grant at the permitted set we hold, which
	// is emptied below, so neither uid 0 nor a file capability can bring
	// a capability back. With CAP_SETPCAP, both are locked down as well.
	if haveSetpcap, err := raiseSetpcap(); err != nil {
		return err
	} else if haveSetpcap {
		if err := lockSecurebitsAndBounding(); err != nil {
			return err
		}
	}
	if err := thisThread(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); err != nil {
		return &os.SyscallError{Syscall: "prctl(PR_CAP_AMBIENT_CLEAR_ALL)", Err: err}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if _, _, errno := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return &os.SyscallError{Syscall: "capset", Err: errno}
	}
	// Trust but verify: a capability left behind would let root inside
	// the sandbox remount or unmount its walls.
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return &os.SyscallError{Syscall: "capget", Err: err}
	}
	for _, d := range data {
		if d.Effective|d.Permitted|d.Inheritable != 0 {
			return fmt.Errorf("capabilities remain after dropping them: %+v", data)
		}
	}
	return nil
}

// raiseSetpcap reports whether this thread holds CAP_SETPCAP, making it
// effective if it is only permitted.
func raiseSetpcap() (bool, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false, &os.SyscallError{Syscall: "capget", Err: err}
	}
	const bit = uint32(1) << unix.CAP_SETPCAP // CAP_SETPCAP is 8: the first word
	if data[0].Permitted&bit == 0 {
		return false, nil
	}
	if data[0].Effective&bit == 0 {
		data[0].Effective |= bit
		if _, _, errno := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
			return false, &os.SyscallError{Syscall: "capset(CAP_SETPCAP)", Err: errno}
		}
	}
	return true, nil
}

// lockSecurebitsAndBounding locks the securebits and empties the bounding
// set; both need CAP_SETPCAP.
func lockSecurebitsAndBounding() error {
	// Securebits first: changing them needs CAP_SETPCAP, which goes next.
	if err := thisThread(unix.PR_SET_SECUREBITS, lockedSecurebits, 0); err != nil {
		return &os.SyscallError{Syscall: "prctl(PR_SET_SECUREBITS)", Err: err}
	}
	for c := 0; c <= 63; c++ {
		err := thisThread(unix.PR_CAPBSET_DROP, uintptr(c), 0)
		if err == unix.EINVAL {
			break // past the kernel's last capability
		}
		if err != nil {
			return &os.SyscallError{Syscall: fmt.Sprintf("prctl(PR_CAPBSET_DROP, %d)", c), Err: err}
		}
	}
	return nil
}
