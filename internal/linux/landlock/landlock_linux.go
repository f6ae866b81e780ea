package landlock

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
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
	var llrules []landlock.Rule
	for _, r := range rules {
		llrules = append(llrules, landlock.PathAccess(r.access, r.paths...))
	}
	// llcfg is not BestEffort: go-landlock enforces exactly llcfg or
	// fails, and plan only asked for what this ABI supports.
	if err := llcfg.Restrict(llrules...); err != nil {
		return Applied{}, fmt.Errorf("landlock: enforcing %v: %w", llcfg, err)
	}
	return applied, nil
}

// restrictThread enforces the ruleset on the calling thread only, with the
// raw syscalls: go-landlock always restricts every thread. The caller
// must hold runtime.LockOSThread and have set no_new_privs on this thread.
func restrictThread(c landlock.Config, rules []pathRule) error {
	attr := ll.RulesetAttr{HandledAccessFS: uint64(c.HandledAccessFS), Scoped: uint64(c.Scoped)}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return &os.SyscallError{Syscall: "landlock_create_ruleset", Err: err}
	}
	defer unix.Close(fd)
	for _, r := range rules {
		for _, p := range r.paths {
			pfd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
			if err != nil {
				return &os.PathError{Op: "open", Path: p, Err: err}
			}
			access := r.access
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				// The kernel refuses directory-only rights on a file.
				access &= fileRights
			}
			err = ll.LandlockAddPathBeneathRule(fd, &ll.PathBeneathAttr{AllowedAccess: uint64(access), ParentFd: pfd}, 0)
			unix.Close(pfd)
			if err != nil {
				return &os.PathError{Op: "landlock_add_rule", Path: p, Err: err}
			}
		}
	}
	if err := ll.LandlockRestrictSelf(fd, 0); err != nil {
		return &os.SyscallError{Syscall: "landlock_restrict_self", Err: err}
	}
	return nil
}
