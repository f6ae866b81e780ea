package landlock

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"
)

// erratumSignalScope is the bit landlock_create_ruleset(...ERRATA)
// sets once the kernel has the fix for signal scoping across threads;
// go-landlock treats ABI 6+ kernels without it as ABI 5.
const erratumSignalScope = 0x2

func abi() (int, []string, error) {
	v, err := ll.LandlockGetABIVersion()
	switch {
	case errors.Is(err, syscall.ENOSYS):
		return 0, nil, fmt.Errorf("landlock: %w: the kernel has no Landlock (needs Linux 5.13+ with CONFIG_SECURITY_LANDLOCK=y): %w", ErrUnavailable, err)
	case errors.Is(err, syscall.EOPNOTSUPP):
		return 0, nil, fmt.Errorf("landlock: %w: built into the kernel but disabled at boot; add \"landlock\" to the lsm= kernel parameter (active list: /sys/kernel/security/lsm): %w", ErrUnavailable, err)
	case err != nil:
		return 0, nil, fmt.Errorf("landlock: %w: probing ABI version: %w", ErrUnavailable, os.NewSyscallError("landlock_create_ruleset", err))
	}
	var notes []string
	if v >= 6 {
		errata, err := ll.LandlockGetErrata()
		if err != nil || errata&erratumSignalScope == 0 {
			notes = append(notes, fmt.Sprintf("kernel ABI %d lacks the signal-scoping fix (erratum 2); using ABI 5", v))
			v = 5
		}
	}
	if v > maxKnownABI {
		notes = append(notes, fmt.Sprintf("kernel ABI %d is newer than go-landlock knows; using ABI %d", v, maxKnownABI))
		v = maxKnownABI
	}
	return v, notes, nil
}

func restrict(cfg Config) (Applied, error) {
	v, notes, err := abi()
	if err != nil {
		return Applied{}, err
	}
	llcfg, rules, applied, err := plan(cfg, v, os.Stat)
	if err != nil {
		return Applied{}, err
	}
	applied.Notes = notes
	if cfg.ThisThread {
		if err := restrictThread(llcfg, rules); err != nil {
			return Applied{}, fmt.Errorf("landlock: enforcing %v: %w", llcfg, err)
		}
		return applied, nil
	}
	// Every thread. go-landlock always sets no_new_privs on each thread
	// first, which costs a second stop-the-world round of signals to
	// every thread when the caller has done it already; the same ruleset
	// as for one thread, enforced on each through psx, does not.
	if !cfg.NoNewPrivsSet {
		if _, _, errno := psx.Syscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); errno != 0 {
			return Applied{}, fmt.Errorf("landlock: %w", &os.SyscallError{Syscall: "prctl(PR_SET_NO_NEW_PRIVS) on every thread", Err: errno})
		}
	}
	if err := restrictEveryThread(llcfg, rules); err != nil {
		return Applied{}, fmt.Errorf("landlock: enforcing %v on every thread: %w", llcfg, err)
	}
	return applied, nil
}

// restrictThread enforces the ruleset on the calling thread only, with the
// raw syscalls: go-landlock always restricts every thread. The caller
// must hold runtime.LockOSThread and have set no_new_privs on this thread.
func restrictThread(c landlock.Config, rules []pathRule) error {
	fd, err := ruleset(c, rules)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := ll.LandlockRestrictSelf(fd, 0); err != nil {
		return &os.SyscallError{Syscall: "landlock_restrict_self", Err: err}
	}
	return nil
}

// restrictEveryThread enforces the ruleset on every thread, with psx
// (package threads_linux.go in internal/linux says how). The caller must
// have set no_new_privs on every thread. On kernels before ABI 8 each
// thread gets a sibling domain with the same rules, as go-landlock's
// enforcement gives them; the rules always let every directory be listed,
// so libpsx's own look at /proc/self/task after the call (go-landlock's
// issue 39) is never refused.
func restrictEveryThread(c landlock.Config, rules []pathRule) error {
	fd, err := ruleset(c, rules)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if _, _, errno := psx.Syscall6(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(fd), 0, 0, 0, 0, 0); errno != 0 {
		return &os.SyscallError{Syscall: "landlock_restrict_self on every thread", Err: errno}
	}
	return nil
}

// ruleset builds the ruleset for c and rules and returns its fd.
func ruleset(c landlock.Config, rules []pathRule) (int, error) {
	attr := ll.RulesetAttr{HandledAccessFS: uint64(c.HandledAccessFS), Scoped: uint64(c.Scoped)}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return -1, &os.SyscallError{Syscall: "landlock_create_ruleset", Err: err}
	}
	for _, r := range rules {
		for _, p := range r.paths {
			pfd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
			if err != nil {
				unix.Close(fd)
				return -1, &os.PathError{Op: "open", Path: p, Err: err}
			}
			access := r.access
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				// The kernel refuses directory-only rights on a file.
				access &= fileRights
			}
			err = ll.LandlockAddPathBeneathRule(fd, &ll.PathBeneathAttr{AllowedAccess: uint64(access), ParentFd: pfd}, 0)
			unix.Close(pfd)
			if err != nil {
				unix.Close(fd)
				return -1, &os.PathError{Op: "landlock_add_rule", Path: p, Err: err}
			}
		}
	}
	return fd, nil
}

// Ruleset is the ruleset of [Restrict] with [Config].ThisThread, built
// once so that many threads can each be restricted by it without opening
// the paths and adding the rules again: a session's zygote restricts one
// thread per command. Every [Ruleset.RestrictThread] makes a domain of
// its own (the kernel copies the rules into a new domain each time), so
// threads restricted from one Ruleset are as separate as threads
// restricted by separate Restrict calls: scoping keeps each one's
// signals and abstract sockets, and ptrace, within its own domain. The
// rules hold the inodes the paths named when the Ruleset was built.
type Ruleset struct {
	fd      int
	applied Applied
}

// NewRuleset checks cfg as Restrict does and builds its ruleset, without
// enforcing anything. cfg.ThisThread is implied.
func NewRuleset(cfg Config) (*Ruleset, error) {
	v, notes, err := abi()
	if err != nil {
		return nil, err
	}
	llcfg, rules, applied, err := plan(cfg, v, os.Stat)
	if err != nil {
		return nil, err
	}
	applied.Notes = notes
	fd, err := ruleset(llcfg, rules)
	if err != nil {
		return nil, fmt.Errorf("landlock: building %v: %w", llcfg, err)
	}
	return &Ruleset{fd: fd, applied: applied}, nil
}

// RestrictThread enforces the ruleset on the calling thread only, in a
// new domain. The caller must hold runtime.LockOSThread and never unlock
// it, and must have set no_new_privs on this thread.
func (r *Ruleset) RestrictThread() (Applied, error) {
	if err := ll.LandlockRestrictSelf(r.fd, 0); err != nil {
		return Applied{}, fmt.Errorf("landlock: enforcing: %w", &os.SyscallError{Syscall: "landlock_restrict_self", Err: err})
	}
	return r.applied, nil
}

// Close releases the ruleset; domains made from it stay.
func (r *Ruleset) Close() error { return unix.Close(r.fd) }
