package stage

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
// thread's state.
func thisThread(option, arg2, arg3 uintptr) error {
	if _, _, errno := unix.RawSyscall6(unix.SYS_PRCTL, option, arg2, arg3, 0, 0, 0); errno != 0 {
		return errno
	}
	return nil
}

// setNoNewPrivs sets no_new_privs on every thread of the init, once: from
// here on no execve can grant a privilege (setuid bits, file capabilities,
// root's implicit capabilities are all ignored), and Landlock and seccomp
// may be applied without CAP_SYS_ADMIN, which the next step drops.
func setNoNewPrivs() error {
	if err := allThreads(unix.PR_SET_NO_NEW_PRIVS, 1); err != nil {
		return &os.SyscallError{Syscall: "prctl(PR_SET_NO_NEW_PRIVS) on every thread", Err: err}
	}
	return nil
}

// dropCapabilities leaves every thread of the init without a capability:
// the thread the command is forked from, and the others (the Go runtime's,
// the signal forwarder, the unix socket supervisor's), which would keep
// CAP_SYS_ADMIN and CAP_NET_ADMIN in the sandbox's user namespace for the
// whole run, enough to unmount the walls.
//
// Securebits and the bounding set need CAP_SETPCAP and are changed on this
// thread only, the one the command inherits its credentials from: they only
// limit what an execve grants, and the other threads never exec. A caller
// without CAP_SETPCAP (any plain uid in degraded mode, a container that
// dropped it) cannot change them, and needs not: no_new_privs caps what an
// execve may grant at the permitted set, emptied below, so neither uid 0
// nor a file capability can bring a capability back
// (TestNoNewPrivsAloneKeepsExecEmpty).
func dropCapabilities() error {
	if haveSetpcap, err := raiseSetpcap(); err != nil {
		return err
	} else if haveSetpcap {
		if err := lockSecurebitsAndBounding(); err != nil {
			return err
		}
	}
	// Empty effective, permitted and inheritable sets, on every thread
	// in one call (threads_linux.go). The ambient set goes with them: the
	// kernel keeps it a subset of permitted and inheritable, so emptying
	// those clears it (cap_capset in security/commoncap.c).
	return emptyEveryThread()
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
// set of this thread; both need CAP_SETPCAP.
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

// keepOnlyNewPIDCap leaves this thread CAP_SYS_ADMIN in its effective and
// permitted sets and nothing else anywhere: clone(CLONE_NEWPID) needs it,
// and exec takes it away (locked SECBIT_NOROOT grants root nothing, an
// empty bounding set lets no file capability in, ambient is empty and
// cannot be raised).
func keepOnlyNewPIDCap() error {
	if err := lockSecurebitsAndBounding(); err != nil {
		return err
	}
	if err := thisThread(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); err != nil {
		return &os.SyscallError{Syscall: "prctl(PR_CAP_AMBIENT_CLEAR_ALL)", Err: err}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	data[0].Effective = 1 << unix.CAP_SYS_ADMIN
	data[0].Permitted = 1 << unix.CAP_SYS_ADMIN
	if _, _, errno := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return &os.SyscallError{Syscall: "capset", Err: errno}
	}
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return &os.SyscallError{Syscall: "capget", Err: err}
	}
	if data[0].Inheritable|data[1].Inheritable != 0 || data[0].Permitted != 1<<unix.CAP_SYS_ADMIN || data[1].Permitted != 0 {
		return fmt.Errorf("capabilities other than CAP_SYS_ADMIN remain on the spawning thread: %+v", data)
	}
	return nil
}
