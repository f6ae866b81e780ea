// Package apparmor lets agentbox create user namespaces where AppArmor
// restricts them (Ubuntu 23.10 and later:
// kernel.apparmor_restrict_unprivileged_userns = 1): it generates the
// profile Ubuntu's own packages ship for programs that need them (AppArmor
// 4 syntax: an unconfined profile attached to one binary, granting
// `userns`), reads the machine's state for `doctor`, and installs or
// removes the profile for `setup` and `cleanup`.
//
// The pure parts (profile text, quoting, reading the state through
// [System]) compile on every OS so they are tested anywhere.
package apparmor

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ProfileName is the profile's name, and its file's name in ProfileDir.
const ProfileName = "agentbox"

// ProfileDir is where AppArmor loads profiles from at boot.
const ProfileDir = "/etc/apparmor.d"

// ProfilePath is the profile file agentbox writes.
var ProfilePath = filepath.Join(ProfileDir, ProfileName)

// header marks the file as agentbox's; the path after it names the binary
// the profile attaches to, so doctor can tell a stale profile (the binary
// moved) from a current one without parsing AppArmor syntax.
const header = "# Written by `agentbox setup`; `agentbox cleanup` removes it.\n# binary: "

// Profile returns the profile that lets exe (an absolute path with no
// symlinks: AppArmor attaches to the path the kernel executes) create user
// namespaces. Like Ubuntu's profiles for bwrap or chrome it confines
// nothing else (flags=(unconfined)): agentbox builds its own walls.
func Profile(exe string) (string, error) {
	attach, err := quotePath(exe)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(header + exe + "\n")
	b.WriteString("#\n# Lets this binary create user namespaces where\n")
	b.WriteString("# kernel.apparmor_restrict_unprivileged_userns restricts them; it confines\n")
	b.WriteString("# nothing else, like the profiles Ubuntu ships for bwrap and chrome.\n\n")
	b.WriteString("abi <abi/4.0>,\n")
	b.WriteString("include <tunables/global>\n\n")
	fmt.Fprintf(&b, "profile %s %s flags=(unconfined) {\n", ProfileName, attach)
	b.WriteString("  userns,\n\n")
	b.WriteString("  # Site-specific additions and overrides. See local/README for details.\n")
	fmt.Fprintf(&b, "  include if exists <local/%s>\n", ProfileName)
	b.WriteString("}\n")
	return b.String(), nil
}

// quotePath spells an absolute path as an AppArmor attachment, in double
// quotes (spaces are fine). AppArmor reads * ? [ ] { } ^ as a pattern even
// inside quotes, and " and \ quote; rather than trust an escape, such a
// path is refused: the profile must attach to exactly one file.
func quotePath(p string) (string, error) {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return "", fmt.Errorf("apparmor profile: binary path %q is not a clean absolute path", p)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(`*?[]{}^"\`, r) {
			return "", fmt.Errorf("apparmor profile: binary path %q has %q, which AppArmor reads as a pattern or quote; move agentbox to a plain path", p, r)
		}
	}
	return `"` + p + `"`, nil
}

// ProfileBinary returns the binary a profile file written by agentbox
// attaches to, or "" if the file is not agentbox's.
func ProfileBinary(content []byte) string {
	s, ok := strings.CutPrefix(string(content), header)
	if !ok {
		return ""
	}
	bin, _, _ := strings.Cut(s, "\n")
	return bin
}

// System is the part of the machine the state is read from: a seam, so
// doctor's wording is tested for restricted and unrestricted machines.
type System struct {
	ReadFile func(name string) ([]byte, error)
	Geteuid  func() int
	// ProfilePath is where the profile file is; "" means the real one.
	ProfilePath string
}

func (sys System) profilePath() string {
	if sys.ProfilePath != "" {
		return sys.ProfilePath
	}
	return ProfilePath
}

// Files read by Inspect.
const (
	restrictSysctl = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
	enabledParam   = "/sys/module/apparmor/parameters/enabled"
	loadedProfiles = "/sys/kernel/security/apparmor/profiles"
)

// State is what Inspect found.
type State struct {
	Enabled     bool   // AppArmor is active in the kernel
	Restricted  bool   // it restricts unprivileged user namespaces
	Exe         string // the binary that needs the profile (symlinks resolved)
	Installed   string // the binary the installed profile file attaches to, "" if none
	Loaded      bool   // the kernel has a profile named agentbox
	LoadedKnown bool   // the loaded-profile list could be read
	Root        bool   // the caller is root, whom the restriction does not bind
	File        string // the profile file
}

// Inspect reads the AppArmor state for exe.
func Inspect(sys System, exe string) State {
	st := State{Exe: exe, Root: sys.Geteuid() == 0, File: sys.profilePath()}
	if b, err := sys.ReadFile(enabledParam); err == nil && strings.TrimSpace(string(b)) == "Y" {
		st.Enabled = true
	}
	if b, err := sys.ReadFile(restrictSysctl); err == nil && strings.TrimSpace(string(b)) == "1" {
		st.Restricted = st.Enabled
	}
	if b, err := sys.ReadFile(st.File); err == nil {
		st.Installed = ProfileBinary(b)
	}
	if b, err := sys.ReadFile(loadedProfiles); err == nil {
		st.LoadedKnown = true
		for _, line := range strings.Split(string(b), "\n") {
			// "agentbox (unconfined)"
			if name, _, ok := strings.Cut(line, " ("); ok && name == ProfileName {
				st.Loaded = true
			}
		}
	}
	return st
}

// Needed reports whether this binary needs the profile and lacks it.
func (st State) Needed() bool {
	return st.Restricted && !(st.Installed == st.Exe && (st.Loaded || !st.LoadedKnown))
}

// Check is doctor's line about AppArmor: whether an unprivileged caller of
// this binary can create user namespaces as far as AppArmor goes, and what
// to do if not.
func (st State) Check() (ok bool, detail string) {
	switch {
	case !st.Enabled:
		return true, "AppArmor is not active: nothing restricts user namespaces here"
	case !st.Restricted:
		return true, "AppArmor does not restrict unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns is not 1): no profile needed"
	}
	what := "kernel.apparmor_restrict_unprivileged_userns = 1 restricts unprivileged user namespaces"
	loaded := "loaded"
	switch {
	case !st.LoadedKnown:
		loaded = "whether it is loaded is unknown (the kernel's profile list is unreadable)"
	case !st.Loaded:
		loaded = "not loaded (run `sudo apparmor_parser -r " + st.File + "`, or `sudo agentbox setup`)"
	}
	switch {
	case st.Installed == st.Exe && (st.Loaded || !st.LoadedKnown):
		return true, fmt.Sprintf("%s; the agentbox profile for %s is installed, %s", what, st.Exe, loaded)
	case st.Installed != "" && st.Installed != st.Exe:
		return st.Root, fmt.Sprintf("%s; the agentbox profile in %s is for %s, not this binary %s: run `sudo %s setup` to point it here", what, st.File, st.Installed, st.Exe, st.Exe)
	case st.Installed == st.Exe:
		return st.Root, fmt.Sprintf("%s; the agentbox profile for %s is installed but %s", what, st.Exe, loaded)
	}
	fix := fmt.Sprintf("run `sudo %s setup` to install an AppArmor profile that lets this binary create user namespaces", st.Exe)
	if st.Root {
		return true, fmt.Sprintf("%s (root is exempt; other users are not); no agentbox profile: %s", what, fix)
	}
	return false, fmt.Sprintf("%s and there is no agentbox profile, so the sandbox cannot start for this user: %s", what, fix)
}

// ErrNotRoot is returned by Setup and Remove when they need root.
var ErrNotRoot = errors.New("needs root")
