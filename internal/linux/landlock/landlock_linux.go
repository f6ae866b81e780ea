package landlock

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
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
	// llcfg is not BestEffort: go-landlock enforces exactly llcfg or
	// fails, and plan only asked for what this ABI supports.
	if err := llcfg.Restrict(rules...); err != nil {
		return Applied{}, fmt.Errorf("landlock: enforcing %v: %w", llcfg, err)
	}
	return applied, nil
}
