// Package darwin is the macOS backend: it turns a resolved policy into a
// Seatbelt (SBPL) profile and runs commands under it with
// /usr/bin/sandbox-exec.
//
// Profile generation ([Profile]) is pure Go with no build tag, so the
// generated profiles are tested on every platform; only [Command] needs a Mac.
//
// # Paths are parameters
//
// No path ever appears in the profile text. Every path is passed to
// sandbox-exec as a parameter (-D KEY=VALUE) and referenced from the
// profile as (param "KEY"), so a path containing quotes, parentheses, #",
// newlines or ";" cannot change the meaning of the profile: the text for two
// policies whose paths differ only in their characters (same number of
// components, same pattern of equal paths) is byte for byte the same. The
// only things derived from paths that do reach the text are counts: how many
// components a protected path's parent has, written as a repetition of the
// constant pattern /[^/]+.
//
// # What the profile allows
//
//   - Everything is denied unless allowed (deny default).
//   - Processes may fork and exec, signal and inspect processes in the same
//     sandbox, read sysctls, and look up a short fixed list of system
//     services (user and group lookup, notifications, logging, preferences).
//   - Reads are allowed everywhere but the hidden paths and what the hide
//     rules match (credential files, deny_read), as every agentbox mode
//     allows; see hidden.go.
//   - Writes are allowed beneath [Input.WritableRoots] (the host's temp
//     directories are roots like any other when the policy shares them),
//     beneath [Input.TempDirs] (the workspace's private ones, which the
//     command's TMPDIR names), and to /dev/null, /dev/zero, /dev/stdout,
//     /dev/stderr and /dev/fd/N.
//     New pseudo-terminals only when [Input.AllowPTY] is set.
//   - Protected paths are denied every kind of write, whether or not they
//     exist yet, and so is unlinking or renaming any directory on the way
//     from a protected path up to the filesystem root, so a protected
//     directory cannot be moved aside and replaced.
//   - Network: nothing ([NetworkOff]), everything ([NetworkOn]), or only
//     outbound connections to one localhost port ([NetworkLocalhostPort]),
//     meant for the future allow-list proxy.
//
// Allow rules come first and deny rules last: Seatbelt lets the last
// matching rule decide, so the denials for protected paths override the
// allowance for the roots that contain them.
//
// # Case and Unicode variants of protected names
//
// APFS and HFS+ volumes are case-insensitive and normalisation-insensitive
// by default, so ".GIT" names the same directory as ".git". Two situations
// differ:
//
//   - An existing protected path is matched by Seatbelt against the path of
//     the file the kernel resolved, which is spelled as stored on disk
//     (this is why profiles must say /private/tmp, not /tmp). A literal
//     (subpath (param …)) rule therefore covers every spelling of an existing
//     path, provided the parameter is spelled as stored on disk; [Command]
//     canonicalises paths with F_GETPATH for that reason (following a
//     writable root that is a symbolic link, keeping a protected one).
//   - A name that does not exist yet is checked as the parent's path plus the
//     name exactly as the caller spelled it. A literal rule for ".git" would
//     not stop mkdir ".GIT", which then serves as .git for every git command.
//
// For the second case each protected path whose last element is one of
// [Input.ProtectedNames] also gets a rule
//
//	(require-all (subpath (param "PARENT_n")) (regex #"^/[^/]+/[^/]+/VARIANTS(/|$)"))
//
// where the repetition of /[^/]+ pins the depth to the parent's own (so the
// rule matches the parent's direct child and nothing deeper, which keeps
// ".git" directories of nested clones writable), and VARIANTS is a regular
// expression built only from the configured name, never from a path:
//
//   - each ASCII letter matches both cases ([gG]);
//   - the non-ASCII code points that case-fold or canonically decompose to a
//     single ASCII letter are accepted in its place: U+017F LONG S for "s" and
//     U+212A KELVIN SIGN for "k";
//   - the ligatures whose full case folding is ASCII (U+00DF and U+1E9E for
//     "ss", U+FB00–U+FB06 for "ff", "fi", "fl", "ffi", "ffl", "st") are
//     accepted in place of those letters, in case the volume folds fully;
//   - any number of the code points HFS+ ignores in names (U+200C–U+200F,
//     U+202A–U+202E, U+206A–U+206F, U+FEFF) may appear between and around
//     the characters. APFS is not believed to ignore them, so this may
//     over-protect; over-protecting an odd spelling of ".git" costs nothing.
//
// Because protected names are restricted to ASCII letters, digits, ".", "-"
// and "_", NFC and NFD spellings are identical, and the only other canonical
// decompositions onto ASCII (U+037E to ";", U+1FEF to "`") involve
// characters such names cannot contain; so this list is complete for them
// with respect to NFD plus full case folding. Compatibility forms (for
// example fullwidth letters) are distinct names on APFS and are not covered;
// they need not be. Non-ASCII protected names are rejected rather than
// covered partially.
//
// The alternative, enumerating spellings as parameters, was rejected: ".agents"
// alone has 2^6 case spellings before any Unicode variant, and ignorable code
// points make the set infinite. The cost of the regex is that non-ASCII
// characters appear raw (UTF-8) in the profile text, as alternatives rather
// than inside bracket expressions, so the expression means the same whether
// Seatbelt's regex engine works on bytes or on characters.
//
// # Limitations
//
//   - Intermediate directories between a writable root and a deeper protected
//     path (for example root/sub/.git) are matched as spelled on disk; this
//     relies on Seatbelt matching existing directories by their on-disk path,
//     which is believed but not verified here.
//   - A hard link made to a protected file before the run, or by a process
//     outside the sandbox, is a second name for it that the profile does not
//     know.
//   - Loopback is not isolated: with NetworkOff the command cannot reach any
//     socket, including Unix sockets and local servers in the workspace.
//   - The process tree: macOS has no PID namespace or job object. The
//     command runs in a new session and its process group is killed on
//     cancel and by [KillGroup], but a descendant that starts a session or
//     group of its own escapes that kill, and nothing kills the tree if
//     agentbox itself is killed with SIGKILL.
//   - The operation and filter names used (process-info* with target
//     same-sandbox, ipc-posix-sem, user-preference-read, pseudo-tty,
//     system-socket, file-ioctl, remote ip "localhost:N") and the regex
//     features (groups, alternation, *, raw UTF-8) are what Apple's and
//     other public profiles use, but an unknown name or construct makes
//     sandbox-exec reject the whole profile: that fails closed, and [Check]
//     reports it with sandbox-exec's message.
//   - Everything in this package that talks to the kernel has been compiled
//     but not run on a Mac by its authors; see run_darwin_test.go.
package darwin

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// SandboxExec is the program that applies a profile and executes the command.
const SandboxExec = "/usr/bin/sandbox-exec"

// NetworkMode is what network access the profile allows.
type NetworkMode int

const (
	// NetworkOff denies every socket connection, bind and listen, local
	// Unix sockets included (DNS through mDNSResponder is a socket too).
	NetworkOff NetworkMode = iota
	// NetworkOn allows all network operations.
	NetworkOn
	// NetworkLocalhostPort allows only outbound connections to
	// localhost:[Input.ProxyPort], for a proxy that enforces an allow-list.
	NetworkLocalhostPort
)

func (m NetworkMode) String() string {
	switch m {
	case NetworkOff:
		return "off"
	case NetworkOn:
		return "on"
	case NetworkLocalhostPort:
		return "localhost-port"
	}
	return "NetworkMode(" + strconv.Itoa(int(m)) + ")"
}

// Input is what the profile is generated from: the parts of a resolved
// policy the macOS backend needs. All paths are absolute, cleaned and, for
// the profile to match what the kernel sees, spelled as on disk with
// symbolic links resolved (/private/tmp, not /tmp); [Command] does that
// canonicalisation, [Profile] only checks the syntax.
//
// A read-only policy is an Input without WritableRoots.
type Input struct {
	// WritableRoots are the directories writable beneath, including the
	// temp directories when the policy allows them.
	WritableRoots []string
	// ProtectedNames are names protected directly inside every writable
	// root, whether they exist or not, in every case and Unicode spelling
	// (".git", ".codex", ".agents"). ASCII letters, digits, ".", "-", "_".
	ProtectedNames []string
	// Protected are further paths kept read-only, existing or not: a
	// worktree's gitdir outside any root, the target of a protected
	// symlink, a protected name found deeper in a root. Those whose last
	// element is one of ProtectedNames get the same variant coverage.
	Protected []string
	// Network is what network access the command gets.
	Network NetworkMode
	// ProxyPort is the localhost port allowed by NetworkLocalhostPort.
	ProxyPort int
	// SOCKSPort, when not 0, is a second localhost port allowed by
	// NetworkLocalhostPort (the allow-list proxy's SOCKS5 listener).
	SOCKSPort int
	// AllowPTY lets the command open new pseudo-terminals (script, expect).
	AllowPTY bool
	// GitWritable are .git directories opened for writing by
	// allow_git_writes although they are protected, minus GitReadOnly:
	// the paths in them that make git run a program or read another
	// repository (gitguard.ReadOnlyPaths), existing or not, kept
	// unwritable in every spelling and unrenamable.
	GitWritable []string
	GitReadOnly []string
	// CacheDirs are private per-workspace tool cache directories, writable
	// although they lie in agentbox's (protected) state directory.
	CacheDirs []string
	// Hidden are paths the command must not read, found when it started
	// (policy.Hidden); Reopen are paths inside them that stay readable
	// (their re-opened entries and policy.AllowRead); HideRules hide
	// what their patterns match whenever it appears (policy.HideRule).
	Hidden    []string
	Reopen    []string
	HideRules []HideRule
	// TempDirs are the workspace's private temporary directories
	// (policy.PrivateTemp), writable although they lie in agentbox's
	// state directory: the command's TMPDIR names one, and /tmp itself
	// is not among WritableRoots (Seatbelt cannot show another
	// directory there).
	TempDirs []string
}

// Param is one profile parameter, passed to sandbox-exec as -D Key=Value
// and referenced in the profile as (param "Key").
type Param struct {
	Key, Value string
}

// Profile returns the Seatbelt profile for in and the parameters it
// references. The same shape of Input always yields the same text; only the
// parameter values carry paths.
func Profile(in Input) (profile string, params []Param, err error) {
	g := gen{keys: map[string]string{}}
	if err := g.validate(in); err != nil {
		return "", nil, err
	}
	return g.profile(in)
}

// SandboxExecArgs returns the argument list (without argv[0]) for running
// argv under profile: sandbox-exec -p PROFILE -D K=V ... -- argv...
func SandboxExecArgs(profile string, params []Param, argv []string) []string {
	args := make([]string, 0, 3+2*len(params)+len(argv))
	args = append(args, "-p", profile)
	for _, p := range params {
		// One argument per -D value: sandbox-exec splits it at the first
		// "=", and keys never contain one, so any value survives intact.
		args = append(args, "-D", p.Key+"="+p.Value)
	}
	args = append(args, "--")
	return append(args, argv...)
}

// gen accumulates parameters while the profile is written.
type gen struct {
	params []Param
	// keys maps "PREFIX\x00value" to the key already allocated, so a path
	// used twice in the same role is one parameter.
	keys   map[string]string
	counts map[string]int
}

// param returns the (param "KEY") expression for value, allocating KEY as
// PREFIX_n on first use.
func (g *gen) param(prefix, value string) string {
	id := prefix + "\x00" + value
	key, ok := g.keys[id]
	if !ok {
		if g.counts == nil {
			g.counts = map[string]int{}
		}
		key = prefix + "_" + strconv.Itoa(g.counts[prefix])
		g.counts[prefix]++
		g.keys[id] = key
		g.params = append(g.params, Param{Key: key, Value: value})
	}
	return `(param "` + key + `")`
}

func checkPath(what, p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%s: empty path", what)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("%s %q: path contains a NUL byte", what, p)
	case !path.IsAbs(p):
		return fmt.Errorf("%s %q: path is not absolute", what, p)
	case path.Clean(p) != p:
		// The depth pattern counts components, so "//", "." and ".."
		// would make it match the wrong directory.
		return fmt.Errorf("%s %q: path is not clean (want %q)", what, p, path.Clean(p))
	}
	return nil
}

func (g *gen) validate(in Input) error {
	for _, r := range in.WritableRoots {
		if err := checkPath("writable root", r); err != nil {
			return err
		}
	}
	for _, p := range in.Protected {
		if err := checkPath("protected path", p); err != nil {
			return err
		}
		if p == "/" {
			return errors.New(`protected path "/": the whole filesystem cannot be a carve-out`)
		}
	}
	for _, n := range in.ProtectedNames {
		if err := checkName(n); err != nil {
			return err
		}
	}
	for _, list := range [][]string{in.GitWritable, in.GitReadOnly, in.CacheDirs, in.TempDirs} {
		for _, p := range list {
			if err := checkPath("path", p); err != nil {
				return err
			}
		}
	}
	for _, p := range in.GitReadOnly {
		if err := checkName(path.Base(p)); err != nil {
			return fmt.Errorf("git read-only path %q: %w", p, err)
		}
		inside := false
		for _, g := range in.GitWritable {
			inside = inside || strings.HasPrefix(p, g+"/")
		}
		if !inside {
			return fmt.Errorf("git read-only path %q is in no writable git directory", p)
		}
	}
	if err := g.validateHidden(in); err != nil {
		return err
	}
	switch in.Network {
	case NetworkOff, NetworkOn:
		if in.ProxyPort != 0 || in.SOCKSPort != 0 {
			return fmt.Errorf("proxy port %d given with network %v", max(in.ProxyPort, in.SOCKSPort), in.Network)
		}
	case NetworkLocalhostPort:
		if in.ProxyPort < 1 || in.ProxyPort > 65535 {
			return fmt.Errorf("proxy port %d: want 1 to 65535", in.ProxyPort)
		}
		if in.SOCKSPort < 0 || in.SOCKSPort > 65535 {
			return fmt.Errorf("SOCKS port %d: want 1 to 65535", in.SOCKSPort)
		}
	default:
		return fmt.Errorf("unknown network mode %v", in.Network)
	}
	return nil
}

// Fixed parts of the profile. They hold no path of the policy's.
const (
	header = `(version 1)
; Generated by agentbox. Every policy path is a parameter (-D KEY=VALUE).
(deny default)
`
	processRules = `
; Processes: run programs, and signal or inspect only this sandbox's.
(allow process-exec)
(allow process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))
(allow sysctl-read)
(allow ipc-posix-sem)
(allow user-preference-read)
`
	readRules = `
; Reads: everywhere, as every agentbox mode allows.
(allow file-read*)
`
	deviceRules = `
; Devices every program expects to write. /dev/fd/N only reopens
; descriptors the command already holds.
(allow file-write-data
  (literal "/dev/null")
  (literal "/dev/zero")
  (literal "/dev/stdout")
  (literal "/dev/stderr")
  (regex #"^/dev/fd/[0-9]+$"))
(allow file-ioctl
  (literal "/dev/null")
  (literal "/dev/zero")
  (literal "/dev/dtracehelper"))
`
	ptyRules = `
; New pseudo-terminals.
(allow pseudo-tty)
(allow file-read* file-write* file-ioctl
  (literal "/dev/ptmx")
  (regex #"^/dev/ttys[0-9]+$"))
`
)

// Mach services the command may reach. Each one is a door out of the
// sandbox, so the list is short: user and group lookup, notifications,
// logging, and reading preferences.
var baseServices = []string{
	"com.apple.cfprefsd.agent",
	"com.apple.cfprefsd.daemon",
	"com.apple.logd",
	"com.apple.system.logger",
	"com.apple.system.notification_center",
	"com.apple.system.opendirectoryd.libinfo",
	"com.apple.system.opendirectoryd.membership",
}

// Services that network clients need for name resolution, proxy settings
// and certificate checks; only with NetworkOn.
var networkServices = []string{
	"com.apple.SystemConfiguration.DNSConfiguration",
	"com.apple.SystemConfiguration.configd",
	"com.apple.dnssd.service",
	"com.apple.networkd",
	"com.apple.ocspd",
	"com.apple.trustd",
	"com.apple.trustd.agent",
}

func writeServices(b *strings.Builder, names []string) {
	b.WriteString("(allow mach-lookup")
	for _, n := range names {
		b.WriteString("\n  (global-name \"" + n + "\")")
	}
	b.WriteString(")\n")
}

func (g *gen) profile(in Input) (string, []Param, error) {
	var b strings.Builder
	b.WriteString(header)
	b.WriteString(processRules)
	writeServices(&b, baseServices)
	b.WriteString(readRules)
	b.WriteString(deviceRules)
	if in.AllowPTY {
		b.WriteString(ptyRules)
	}

	roots := dedupe(in.WritableRoots)
	g.rule(&b, "\n; Writable roots.\n(allow file-write*", "subpath", "ROOT", roots)

	switch in.Network {
	case NetworkOn:
		b.WriteString("\n; Network: on.\n(allow network*)\n(allow system-socket)\n")
		writeServices(&b, networkServices)
	case NetworkLocalhostPort:
		// The port is an integer checked by validate; it is the only
		// policy value written into the text.
		fmt.Fprintf(&b, "\n; Network: only the local proxy.\n(allow network-outbound (remote ip \"localhost:%d\"))\n", in.ProxyPort)
		if in.SOCKSPort != 0 {
			fmt.Fprintf(&b, "(allow network-outbound (remote ip \"localhost:%d\"))\n", in.SOCKSPort)
		}
	default:
		b.WriteString("\n; Network: off (nothing allowed).\n")
	}

	// Protected paths: each name in each root, then the extra paths.
	var protected []string
	for _, r := range roots {
		for _, n := range in.ProtectedNames {
			protected = append(protected, path.Join(r, n))
		}
	}
	protected = dedupe(append(protected, in.Protected...))
	if len(protected) == 0 {
		g.hidden(&b, in)
		return b.String(), g.params, nil
	}

	b.WriteString("\n; Protected paths, existing or not, and every spelling of a protected\n; name in its parent. Last, so they override the writable roots.\n(deny file-write*")
	g.filters(&b, "subpath", "PROTECTED", protected)
	for _, p := range protected {
		name := protectedName(path.Base(p), in.ProtectedNames)
		if name == "" {
			continue
		}
		re, err := variantRegex(name)
		if err != nil {
			return "", nil, err
		}
		g.spellings(&b, p, re)
	}
	b.WriteString(")\n")

	// Renaming a directory moves everything below it, so a protected path
	// could be moved aside (mv .git x, or mv the root itself) and a fresh
	// one put in its place. Pin every ancestor up to the filesystem root;
	// those outside the writable roots are unwritable anyway, and pinning
	// them too keeps nested roots correct without reasoning about them.
	var pinned []string
	for _, p := range protected {
		pinned = ancestors(pinned, path.Dir(p))
	}
	g.rule(&b, "\n; Directories above protected paths cannot be renamed or removed.\n(deny file-write-unlink", "literal", "ANCESTOR", dedupe(pinned))
	if err := g.gitWrites(&b, in, protected); err != nil {
		return "", nil, err
	}
	g.rule(&b, "\n; Private tool caches of this workspace, inside agentbox's state directory.\n(allow file-write*", "subpath", "CACHE", dedupe(in.CacheDirs))
	g.rule(&b, "\n; Private temporary directories of this workspace (TMPDIR), inside agentbox's\n; state directory.\n(allow file-write*", "subpath", "TMP", dedupe(in.TempDirs))
	g.hidden(&b, in)
	return b.String(), g.params, nil
}

// gitWrites opens the GitWritable directories, after the protected-path
// denials so it overrides them, then takes back the GitReadOnly paths (in
// every spelling, existing or not), the protected paths inside those
// directories, and renaming or removing the directories themselves and
// everything between them and a read-only path.
func (g *gen) gitWrites(b *strings.Builder, in Input, protected []string) error {
	gitdirs := dedupe(in.GitWritable)
	if len(gitdirs) == 0 {
		return nil
	}
	g.rule(b, "\n; allow_git_writes: these git directories are writable...\n(allow file-write*", "subpath", "GITDIR", gitdirs)
	var deny []string
	for _, p := range protected {
		for _, d := range gitdirs {
			if strings.HasPrefix(p, d+"/") {
				deny = append(deny, p)
			}
		}
	}
	deny = dedupe(append(deny, in.GitReadOnly...))
	b.WriteString("\n; ...except what makes git run a program or read another repository.\n(deny file-write*")
	g.filters(b, "subpath", "GITRO", deny)
	for _, p := range dedupe(in.GitReadOnly) {
		re, err := variantRegex(path.Base(p))
		if err != nil {
			return err
		}
		g.spellings(b, p, re)
	}
	b.WriteString(")\n")
	var pinned []string
	for _, d := range gitdirs {
		pinned = append(pinned, d)
		for _, p := range in.GitReadOnly {
			for a := path.Dir(p); strings.HasPrefix(a, d+"/"); a = path.Dir(a) {
				pinned = append(pinned, a)
			}
		}
	}
	g.rule(b, "\n; The git directories, and directories above read-only git paths, cannot be\n; renamed or removed.\n(deny file-write-unlink", "literal", "ANCESTOR", dedupe(pinned))
	return nil
}

// rule writes a rule of b: head (its comment and its opening, up to the
// operations), a filter of kind for each of paths (their parameters named
// after prefix) and its close; nothing when paths is empty.
func (g *gen) rule(b *strings.Builder, head, kind, prefix string, paths []string) {
	if len(paths) == 0 {
		return
	}
	b.WriteString(head)
	g.filters(b, kind, prefix, paths)
	b.WriteString(")\n")
}

// filters writes a filter of kind ("subpath", "literal") for each of
// paths, in the rule being written.
func (g *gen) filters(b *strings.Builder, kind, prefix string, paths []string) {
	for _, p := range paths {
		b.WriteString("\n  (" + kind + " " + g.param(prefix, p) + ")")
	}
}

// spellings writes the filter of every spelling of p's name in its
// parent, re being the name's regex (variantRegex).
func (g *gen) spellings(b *strings.Builder, p, re string) {
	parent := path.Dir(p)
	b.WriteString("\n  (require-all (subpath " + g.param("PARENT", parent) + ")")
	b.WriteString("\n    (regex #\"^" + strings.Repeat("/[^/]+", depth(parent)) + "/" + re + "(/|$)\"))")
}

// ancestors appends to out dir, a clean absolute path, and each
// directory above it but "/".
func ancestors(out []string, dir string) []string {
	for a := dir; a != "/" && a != "."; a = path.Dir(a) {
		out = append(out, a)
	}
	return out
}

// depth is the number of components in a clean absolute path ("/" has 0).
func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// protectedName returns the entry of names that base is a spelling of, by
// ASCII case folding (paths from the policy are spelled as on disk, so
// exotic spellings need not be recognised here), or "".
func protectedName(base string, names []string) string {
	for _, n := range names {
		if strings.EqualFold(base, n) && isASCII(base) {
			return n
		}
	}
	return ""
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// dedupe returns s without repeated elements, in first-seen order.
func dedupe(s []string) []string {
	seen := make(map[string]bool, len(s))
	out := make([]string, 0, len(s))
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
