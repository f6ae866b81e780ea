package stage

import (
	"fmt"
	"net/netip"
	"os"

	"github.com/agentbox/agentbox/internal/linux/landlock"
	"github.com/agentbox/agentbox/internal/linux/seccomp"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/internal/linux/unixsock"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The hardening of what the command is forked from, written once: every
// way back to privilege goes, in the order the kernel requires. A lone
// run's init applies it to its whole process, whose main thread forks the
// command (RunInit); a session's zygote applies it to the one thread each
// command is forked from, while its other threads keep serving the
// session (zygote.worker). Each step names what the two scopes do.

// hardenScope is what a hardening applies to.
type hardenScope int

const (
	// wholeProcess is a lone run's init: every thread of the process.
	wholeProcess hardenScope = iota
	// oneThread is a session's command: the calling, locked thread.
	oneThread
)

// hardening is what the steps need.
type hardening struct {
	sp    *spec.Spec
	scope hardenScope
	// rules and prog, with oneThread, are the commands' Landlock rules
	// and seccomp filter, which the zygote builds once for every command.
	rules *landlock.Ruleset
	prog  []bpf.RawInstruction
	// connected, when set, also sees each connect the supervisor lets
	// through (a session's port owners).
	connected func(sock int, dst netip.AddrPort, errno unix.Errno)
	unreach   *unreachables
	files     *filesSeen
}

// harden applies the steps in order, and returns the unix socket
// supervisor (nil when the spec asks for none). The command must be forked
// from the calling thread, which is left as the command inherits it.
func (h *hardening) harden() (*unixsock.Supervisor, error) {
	// 1. Nobody, not even the command running as the same uid, may read
	// our memory or fds (the supervisor's notify fd, a session's control
	// socket) through /proc/1. Per process: a session's zygote made
	// itself so at its start, before it served anything.
	if h.scope == wholeProcess {
		if err := notDumpable(); err != nil {
			return nil, err
		}
	}
	// 2. no_new_privs, first: Landlock and seccomp need it, and from here
	// on no execve grants a privilege (lockdown_linux.go).
	if h.scope == wholeProcess {
		if err := setNoNewPrivs(); err != nil {
			return nil, err
		}
	} else if err := thisThread(unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
		return nil, &os.SyscallError{Syscall: "prctl(PR_SET_NO_NEW_PRIVS)", Err: err}
	}
	// 3. Capabilities: securebits locked and the bounding set emptied on
	// this thread while CAP_SETPCAP is held, then the sets themselves:
	// every thread's emptied, or, on a command's thread, all but
	// CAP_SYS_ADMIN, which its pid namespace needs and exec drops.
	if h.scope == wholeProcess {
		if err := dropCapabilities(); err != nil {
			return nil, err
		}
	} else if err := keepOnlyNewPIDCap(); err != nil {
		return nil, err
	}
	// 4. Landlock: a lone run's every thread, then this thread's own
	// scoped domain (landlockWalls); a command's thread, its own domain
	// nested in the one the zygote put on all its threads at its start.
	if h.sp.Walls.Landlock {
		if h.scope == wholeProcess {
			if err := landlockWalls(h.sp); err != nil {
				return nil, err
			}
		} else if h.rules != nil {
			if _, err := h.rules.RestrictThread(); err != nil {
				return nil, err
			}
		}
	}
	// 5. seccomp, after the steps whose syscalls its filter denies: on
	// every thread (TSYNC), or on this thread alone.
	if h.sp.Walls.Seccomp {
		if h.scope == wholeProcess {
			if err := installSeccomp(h.sp); err != nil {
				return nil, err
			}
		} else if err := seccomp.InstallThread(h.prog); err != nil {
			return nil, fmt.Errorf("seccomp: %w", err)
		}
	}
	// 6. The unix socket supervisor's filter, on this thread only, last:
	// the main filter must not be installed with TSYNC on top of it.
	return superviseConnects(h.sp, h.unreach, h.files, h.connected)
}

// notDumpable makes this process not dumpable (see harden).
func notDumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return &os.SyscallError{Syscall: "prctl(PR_SET_DUMPABLE)", Err: err}
	}
	return nil
}
