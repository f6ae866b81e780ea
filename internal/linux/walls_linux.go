package linux

import (
	"fmt"

	"github.com/agentbox/agentbox/internal/linux/landlock"
	"github.com/agentbox/agentbox/internal/linux/seccomp"
)

// applyWalls adds Landlock and seccomp on top of the namespaces: a second
// filesystem wall that holds even if a mount were undone, and a syscall
// filter that takes away the kernel interfaces a sandbox escape needs.
// Seccomp goes last: its filter denies mount and friends.
func applyWalls(spec *Spec) error {
	if spec.Landlock {
		roots := append([]string{}, spec.WritableRoots...)
		// /dev/shm is the sandbox's own tmpfs; POSIX semaphores and
		// shared memory (Python multiprocessing, Chromium) need it.
		roots = append(roots, "/dev/shm")
		if _, err := landlock.Restrict(landlock.Config{
			WritableRoots: roots,
			// Without a network namespace, abstract unix sockets of the
			// host would be reachable; scope them when the network is off.
			ScopeAbstractUnix: !spec.Network,
			ScopeSignals:      true,
		}); err != nil {
			return fmt.Errorf("landlock: %w", err)
		}
	}
	if spec.Seccomp {
		prog, err := seccomp.BuildNativeProgram(seccomp.Options{DenyInetSockets: spec.DenyInetSockets})
		if err != nil {
			return fmt.Errorf("seccomp: %w", err)
		}
		if err := seccomp.Install(prog); err != nil {
			return fmt.Errorf("seccomp: %w", err)
		}
	}
	return nil
}
