package linux

import (
	"fmt"

	"github.com/agentbox/agentbox/internal/linux/landlock"
	"github.com/agentbox/agentbox/internal/linux/seccomp"
	"github.com/agentbox/agentbox/internal/linux/unixsock"
	"github.com/agentbox/agentbox/policy"
	"golang.org/x/sys/unix"
)

// wait4 is how RunInit waits for the command. With unix socket mediation
// it is the supervisor's, which does the part of its work that must run
// on this thread (the one the command is forked from) while it waits.
var wait4 = unix.Wait4

// applyWalls adds Landlock and seccomp on top of the namespaces: a second
// filesystem wall that holds even if a mount were undone, and a syscall
// filter that takes away the kernel interfaces a sandbox escape needs.
// Seccomp goes last: its filter denies mount and friends.
func applyWalls(spec *Spec) error {
	if spec.Landlock {
		roots := append([]string{}, spec.WritableRoots...)
		if !spec.Degraded {
			// /dev/shm is the sandbox's own tmpfs; POSIX semaphores and
			// shared memory (Python multiprocessing, Chromium) need it.
			// Degraded runs see the host's, which stays out of reach.
			roots = append(roots, "/dev/shm")
		}
		// Scoping needs ABI 6. Below it, the pid and network namespaces
		// already keep signals and abstract sockets in; degraded runs
		// name the gap (DegradedGaps).
		// First every thread of the init, the same filesystem rules
		// without scoping: its other threads (the signal forwarder,
		// the supervisor's connects) then write nowhere the command
		// cannot. The command's thread adds its own, scoped domain
		// below; the command inherits both.
		if _, err := landlock.Restrict(landlock.Config{WritableRoots: roots, UnixConnect: true}); err != nil {
			return fmt.Errorf("landlock on the init's threads: %w", err)
		}
		abi, _ := landlock.ABI()
		scoped := abi >= 6
		if _, err := landlock.Restrict(landlock.Config{
			// Only the thread the command is forked from: the init's
			// other threads forward signals to the command, which
			// signal scoping forbids across sibling domains.
			ThisThread:    true,
			WritableRoots: roots,
			// Without a network namespace, abstract unix sockets of the
			// host would be reachable; scope them when the network is off.
			ScopeAbstractUnix: scoped && !spec.Network,
			ScopeSignals:      scoped,
		}); err != nil {
			return fmt.Errorf("landlock: %w", err)
		}
	}
	if spec.Seccomp {
		prog, err := seccomp.BuildNativeProgram(seccomp.Options{
			DenyInetSockets: spec.DenyInetSockets,
			// Allow-list without a network namespace: TCP only, every
			// connect checked by the supervisor below.
			TCPOnly: len(spec.ProxyAddrs) > 0,
			// With the network off, only the socket families the network
			// namespace isolates: AF_VSOCK, for one, would reach the
			// hypervisor from any namespace. With --network the user
			// allowed the network, and families are left alone.
			RestrictSocketFamilies: !spec.Network,
			// Without an IPC namespace, SysV IPC and POSIX message
			// queues are the host's.
			DenyIPC: spec.Degraded,
		})
		if err != nil {
			return fmt.Errorf("seccomp: %w", err)
		}
		if err := seccomp.Install(prog); err != nil {
			return fmt.Errorf("seccomp: %w", err)
		}
	}
	if spec.MediateUnixConnect {
		// After the main filter: its TSYNC would copy this thread-only
		// filter onto the supervisor's threads.
		roots := spec.WritableRoots
		ownNetns := !spec.Degraded
		sup, err := unixsock.Start(func(p string, st *unix.Stat_t) bool {
			inside := false
			for _, r := range roots {
				if policy.Within(p, r) {
					inside = true
				}
			}
			if !inside || !ownNetns {
				return inside
			}
			// Inside a writable root is not enough: /tmp holds host
			// daemons' sockets (X11, tmux, ssh agents). Only a socket
			// bound in the sandbox's own network namespace, that is by
			// the command itself, may be reached.
			ok, err := unixsock.BoundInThisNetns(st)
			return err == nil && ok
		}, unixsock.Options{
			// Without a network namespace the abstract names are the
			// host's, and the supervisor's connect escapes the
			// Landlock scoping that would refuse them (ScopeAbstractUnix
			// above): refuse them itself, as Landlock would offline.
			RefuseAbstract: !ownNetns && !spec.Network,
			AllowInet:      proxyOnly(spec.ProxyAddrs),
		})
		if err != nil {
			return fmt.Errorf("unix socket mediation: %w", err)
		}
		wait4 = sup.Wait4
	}
	return nil
}
