package policy

import (
	"fmt"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/fspath"
)

// A writable root that is the whole file system, the caller's home or a
// directory above it, or a system directory itself, confines nothing:
// the command could rewrite the user's shell start-up files, the
// programs on PATH, the per-user servers' sockets (for those the
// system's temp and runtime directories count too). Resolve refuses
// such a root in workspace-write mode; subdirectories (/var/tmp/x) stay
// fine, and read-only mode and danger-full-access (the explicit way to
// run with no sandbox) are unaffected.

// systemDirs are the directories refused as writable roots themselves,
// per OS, as spelled before symlinks are resolved: each is compared
// both as written and resolved (/bin is /usr/bin where /usr is merged).
var systemDirs = map[string][]string{
	"linux": {"/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/var", "/opt",
		// Not in the list, refused for the same reason: /tmp
		// and /run are where per-user servers listen (tmux, ssh
		// control sockets, X11, D-Bus; share_slash_tmp is the way to
		// share the host's /tmp), and /proc, /sys and /dev are the
		// kernel's (a writable root there would hand Landlock's write
		// right over host-wide knobs and devices in degraded mode).
		"/tmp", "/run", "/proc", "/sys", "/dev"},
	"darwin": {"/usr", "/bin", "/sbin", "/opt", "/etc", "/var", "/tmp", "/dev", "/System", "/Library",
		"/Applications", "/Volumes", "/private", "/private/etc", "/private/var", "/private/tmp"},
}

// windowsSystemVars name the Windows system directories; windowsSystem
// are their usual places, refused as well in case a variable is unset.
var (
	windowsSystemVars = []string{"SystemRoot", "windir", "ProgramFiles", "ProgramFiles(x86)", "ProgramW6432", "ProgramData"}
	windowsSystem     = []string{`C:\Windows`, `C:\Program Files`, `C:\Program Files (x86)`, `C:\ProgramData`}
)

// confineRule is what decides whether a writable root confines nothing:
// every path resolved as the roots are.
type confineRule struct {
	goos string
	// homes are directories a writable root may not be or contain:
	// $HOME and the account's home (%USERPROFILE% on Windows), and
	// $XDG_RUNTIME_DIR, where the user's own servers listen.
	homes []namedDir
	// system are directories a writable root may not be exactly.
	system []string
}

// namedDir is a directory and what messages call it; runtime marks
// $XDG_RUNTIME_DIR, the others are homes.
type namedDir struct {
	path, what string
	runtime    bool
}

// accountHome is the caller's home directory as the user database
// records it, which $HOME may not name; "" when unknown. Tests replace
// it.
var accountHome = func() string {
	u, err := user.Current()
	if err != nil {
		return ""
	}
	return u.HomeDir
}

// resolvedSystem is each OS's list with symlinks resolved (on this
// machine; another OS's list as written). The system's own links do not
// change while a process (the resident helper) lives.
var resolvedSystem = sync.OnceValue(func() map[string][]string {
	out := map[string][]string{}
	for goos, dirs := range systemDirs {
		for _, d := range dirs {
			out[goos] = append(out[goos], d)
			if r, err := filepath.EvalSymlinks(d); err == nil && r != d {
				out[goos] = append(out[goos], r)
			}
		}
	}
	return out
})

// newConfineRule builds the rule for the caller whose environment getenv
// reads, on goos.
func newConfineRule(getenv func(string) string, goos string) confineRule {
	r := confineRule{goos: goos}
	resolved := func(p string) string {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return real
		}
		return filepath.Clean(p)
	}
	homes := []namedDir{{path: accountHome(), what: "your home directory"}}
	if goos == "windows" {
		homes = append(homes, namedDir{path: getenv("USERPROFILE"), what: "your profile (%USERPROFILE%)"})
	} else {
		homes = append(homes, namedDir{path: getenv("HOME"), what: "your home directory ($HOME)"},
			namedDir{getenv("XDG_RUNTIME_DIR"), "$XDG_RUNTIME_DIR, where your own servers listen", true})
	}
	for _, h := range homes {
		if h.path != "" && agentdirs.Abs(h.path, goos) {
			h.path = resolved(h.path)
			r.homes = append(r.homes, h)
		}
	}
	if goos == "windows" {
		for _, v := range windowsSystemVars {
			if d := getenv(v); d != "" && agentdirs.Abs(d, goos) {
				r.system = append(r.system, resolved(d))
			}
		}
		r.system = append(r.system, windowsSystem...)
		return r
	}
	r.system = resolvedSystem()[goos]
	return r
}

// check returns why the writable root path (absolute, symlinks
// resolved) confines nothing, or "" when it is fine.
func (r confineRule) check(path string) string {
	within, same := fspath.Within, func(a, b string) bool { return a == b }
	isRoot := path == "/"
	switch r.goos {
	case "windows":
		within = fspath.WinWithin
		same = func(a, b string) bool { return fspath.WinKey(a) == fspath.WinKey(b) }
		clean := fspath.WinClean(path)
		// C:\, or a share's root \\server\share.
		isRoot = fspath.WinParent(clean) == clean ||
			strings.HasPrefix(clean, `\\`) && strings.Count(strings.TrimRight(clean[2:], `\`), `\`) == 1
	case "darwin":
		// APFS and HFS+ compare names without case by default.
		within = func(p, root string) bool { return fspath.Within(strings.ToLower(p), strings.ToLower(root)) }
		same = strings.EqualFold
	}
	if isRoot {
		return "is the root of a file system"
	}
	for _, h := range r.homes {
		switch {
		case same(path, h.path):
			return "is " + h.what
		case within(h.path, path):
			return fmt.Sprintf("contains %s %s", h.what, h.path)
		}
	}
	for _, d := range r.system {
		if same(path, d) {
			return whySystem
		}
	}
	return ""
}

// whySystem is check's reason for a system directory.
const whySystem = "is a system directory"

// homePaths are the caller's home directories (not the runtime
// directory), resolved.
func (r confineRule) homePaths() []string {
	var out []string
	for _, h := range r.homes {
		if !h.runtime && !slices.Contains(out, h.path) {
			out = append(out, h.path)
		}
	}
	return out
}

// RootError is a writable root [Resolve] refuses because it confines
// nothing: the whole file system, the caller's home or a directory above
// it, or a system directory itself.
type RootError struct {
	// What names the root as the caller gave it: "workspace
	// (Options.Cwd)", "Options.AddDirs", "writable_roots in FILE",
	// "$TMPDIR".
	What string
	// Path is the root as given, Real the same with symlinks resolved.
	Path, Real string
	// Why says what the root is ("is your home directory ($HOME)").
	Why string
	// Fix says what to do instead.
	Fix string
}

func (e *RootError) Error() string {
	given := e.Path
	if filepath.Clean(given) != e.Real {
		given = fmt.Sprintf("%s (%s)", given, e.Real)
	}
	return fmt.Sprintf("%s %s %s: a writable root there confines nothing (what the command writes there, your own programs would later run or trust); %s", e.What, given, e.Why, e.Fix)
}

// refusal is the error for a writable root, named as given and resolved
// to real, that confines nothing; fix says what the user should do
// instead.
func refusal(what, given, real, why, fix string) error {
	return &RootError{What: what, Path: given, Real: real, Why: why, Fix: fix}
}
