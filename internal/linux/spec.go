// Package linux is agentbox's Linux backend: a re-exec'd init stage that
// builds the sandbox from the kernel's own primitives (user, mount, pid, ipc,
// uts and network namespaces; read-only bind mounts; a fresh /proc and a
// private /dev), drops every capability, sets no_new_privs, adds Landlock
// and seccomp, and then runs the command as its child, so that the whole
// process tree dies with it.
//
// The mount plan is computed here by pure functions so it can be tested
// anywhere; the syscalls live in the _linux.go files.
package linux

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/internal/fsreport"
	"github.com/agentbox/agentbox/internal/wirestr"
	"github.com/agentbox/agentbox/policy"
)

// Spec is everything the init stage needs, sent to it over a pipe as JSON.
type Spec struct {
	// Path is the command to run, looked up in PATH from Env when it has no slash.
	Path string          `json:"path"`
	Argv wirestr.Strings `json:"argv"`
	Env  wirestr.Strings `json:"env"`
	Cwd  string          `json:"cwd"`
	// Mounts are applied in order on top of a read-only view of the host.
	Mounts []Mount `json:"mounts"`
	// Caches are the tool cache mounts, applied after Mounts (see
	// CachePlan).
	Caches []CacheMount `json:"caches,omitempty"`
	// Hides are the masks over hidden paths, applied after everything
	// else is mounted (see HidePlan).
	Hides []Hide `json:"hides,omitempty"`
	// HidePins are directories pinned (made mount points of themselves)
	// before the masks: see HidePlan.
	HidePins []string `json:"hide_pins,omitempty"`
	// Network keeps the host network; otherwise only loopback exists.
	Network bool `json:"network"`
	// WritableRoots, for the Landlock layer.
	WritableRoots []string `json:"writable_roots"`
	// Landlock and Seccomp switch the second walls on.
	Landlock bool `json:"landlock"`
	Seccomp  bool `json:"seccomp"`
	// DenyInetSockets makes seccomp refuse non-unix sockets: used when no
	// network namespace separates the command from the host.
	DenyInetSockets bool `json:"deny_inet_sockets"`
	// MediateUnixConnect routes every connect(2) of the command through a
	// supervisor in the init stage that refuses pathname unix sockets
	// outside WritableRoots (host daemons under /run, $XDG_RUNTIME_DIR,
	// $SSH_AUTH_SOCK); see package unixsock. Set with the network on too.
	MediateUnixConnect bool `json:"mediate_unix_connect"`
	// Files, when set, has the connect supervisor observe the command's
	// write-intent file calls and judge them by these rules, for the run
	// report's "filesystem" section (package fsreport). It needs
	// MediateUnixConnect (one listener per filter chain); it only
	// reports, and a filter that cannot take it runs without it.
	Files *fsreport.Rules `json:"files,omitempty"`
	// AllowUnixSockets are socket paths (real paths) the supervisor lets
	// the command connect to wherever they are.
	AllowUnixSockets []string `json:"allow_unix_sockets,omitempty"`
	// GuardStickyRoots routes chmod, chown, utimes and xattr calls
	// through the supervisor too, which refuses them on a sticky
	// writable root's own directory (/tmp). Set for callers that own such
	// a root (root): the bind mount of a writable root is read-write, so
	// nothing else stops its owner from clearing /tmp's sticky bit for
	// every user of the machine. Degraded mode mediates metadata anyway.
	GuardStickyRoots bool `json:"guard_sticky_roots,omitempty"`
	// Degraded runs without namespaces (they are unavailable): Landlock
	// and seccomp only, under a reaper stage that kills the command's
	// descendants as their subreaper (reap_linux.go).
	Degraded bool `json:"degraded"`
	// Proxy makes the init stage listen on two TCP ports of the
	// sandbox's loopback (HTTP and SOCKS5 proxy), hand the listening
	// sockets to agentbox over the socket at fd ProxyFD, and point the
	// command's proxy variables at them. Needs the network namespace.
	Proxy   bool `json:"proxy,omitempty"`
	ProxyFD int  `json:"proxy_fd,omitempty"`
	// ProxyOff: the proxy is that of a sandbox whose network is off. It
	// refuses every request, so that the tools that honour proxy
	// variables fail at once with a reason rather than retry (npm waits
	// 10 and 60 s before its two retries of a failed look-up or
	// connect, and gives up at once on the proxy's 403). Only the
	// conventional variables name it (see [netproxy.OffEnv]), with
	// LocalNames left direct.
	ProxyOff bool `json:"proxy_off,omitempty"`
	// Resolver gives the sandbox agentbox's name server (package
	// nameserver): the init stage (a session's zygote, once) binds a UDP
	// and a TCP socket to 127.0.0.1:53 of the sandbox's network
	// namespace and hands them to agentbox on the socket at ProxyFD,
	// after the proxy's listeners if there are any. Etc then names that
	// address in the sandbox's /etc/resolv.conf. Needs the network
	// namespace.
	Resolver bool `json:"resolver,omitempty"`
	// Transparent, with Resolver and an allow-list, carries the TCP
	// connections of commands that ignore the proxy variables (see
	// transparent_linux.go): the init stage (a session's zygote, once)
	// routes and redirects them to one more listener on the sandbox's
	// loopback (two where it has IPv6: 127.0.0.1 and ::1), handed to
	// agentbox after the name server's sockets.
	Transparent bool `json:"transparent,omitempty"`
	// Carried, with Transparent, are the ranges of the allow-list's
	// address patterns, which the connect supervisor lets through to the
	// proxy (as it does the fake addresses).
	Carried []netip.Prefix `json:"carried,omitempty"`
	// Etc are files of the sandbox's own, bound read-only over the
	// host's after the mount plan and the tool caches (see
	// [ResolverFiles]).
	Etc []EtcFile `json:"etc,omitempty"`
	// LocalNames are the names the sandbox's /etc/hosts gives loopback
	// addresses: NO_PROXY lists them next to localhost.
	LocalNames []string `json:"local_names,omitempty"`
	// sessionProxy, in a session's zygote with ProxyOff, are the
	// addresses of the session's refusing proxy (HTTP, then SOCKS5):
	// made once for every command, whose connects to them are recorded
	// in the port owners table like those to the name server.
	sessionProxy []netip.AddrPort
	// PortOwnersFD, in a session with Resolver, is a shared table
	// ([PortOwners]) in which each command's connect supervisor records
	// the local port of every socket the command connects to the name
	// server, so that agentbox can tell whose look-up a query is.
	PortOwnersFD int `json:"port_owners_fd,omitempty"`
	// ProxyAddrs, in degraded mode, are the host-loopback addresses of
	// the allow-list proxy (HTTP, then SOCKS5): the command's proxy
	// variables point at them, and they are the only TCP destinations
	// the connect supervisor lets through.
	ProxyAddrs []string `json:"proxy_addrs,omitempty"`
	// HostPorts are ports of the host's loopback the command may reach:
	// the init stage (a session's zygote, once) listens on the
	// sandbox's 127.0.0.1 and [::1] at each and hands the listeners to
	// agentbox over the socket at PortsFD (ports_linux.go). Needs the
	// network namespace.
	HostPorts []uint16 `json:"host_ports,omitempty"`
	// Publish makes the init stage (a session's zygote) keep the socket
	// at PortsFD as a factory of TCP sockets of the sandbox's network
	// namespace, which agentbox connects to the command's listeners
	// for the published ports (ports_linux.go).
	Publish bool `json:"publish,omitempty"`
	PortsFD int  `json:"ports_fd,omitempty"`
	// Pty, when set, gives the command a terminal of the sandbox's own
	// in place of the caller's (see stdio.go).
	Pty *PtySpec `json:"pty,omitempty"`
	// Reopen lists the caller's regular files to reopen inside the
	// sandbox rather than relay (see stdio.go).
	Reopen []ReopenSpec `json:"reopen,omitempty"`
	// Session makes the init stage a session's zygote: it builds the
	// sandbox once and then forks each command it is asked for over its
	// control socket (see zygote_linux.go). Path and Argv are unused;
	// Env holds variables set for every command (the tool caches').
	Session bool `json:"session,omitempty"`
	// Init, in a session, is the executable (this binary, at its path in
	// the sandbox) that the zygote starts as PID 1 of each command's pid
	// namespace before the command is asked for (package pid1); empty,
	// the command itself is that PID 1.
	Init string `json:"init,omitempty"`
	// BindPerCommand, in a session, starts the mounter that binds each
	// command's placeholders read-only before it runs (see
	// mounter_linux.go): the host makes them for each command and
	// removes them when it ends, so none outlives the command.
	BindPerCommand bool `json:"bind_per_command,omitempty"`
}

// MountKind is what one step of the plan does to a path.
type MountKind string

const (
	// BindWritable shows the host's directory read-write (a writable root).
	BindWritable MountKind = "rw"
	// Pin binds a directory onto itself so it becomes a mount point: the
	// kernel refuses to rename or remove a mount point (EBUSY), which keeps
	// a protected path from being moved aside through its ancestors.
	Pin MountKind = "pin"
	// BindReadOnly makes a protected path (and everything below) read-only.
	BindReadOnly MountKind = "ro"
	// PinLink binds a protected symlink onto itself: the link keeps working
	// (its target has its own read-only step) but cannot be replaced.
	PinLink MountKind = "pin-link"
	// BindPrivate shows the host directory Source (a private temporary
	// directory in agentbox's state directory, policy.PrivateTemp)
	// read-write at Path, in place of the host's /tmp or $TMPDIR.
	BindPrivate MountKind = "private"
	// MakeDir creates Path, and any missing directory above it, inside a
	// private temporary directory shown above it, so that a writable
	// root, a kept host directory or $TMPDIR under the private /tmp has
	// a directory to be bound on (or to be). It follows no symlink.
	MakeDir MountKind = "mkdir"
	// MakeFile creates an empty file at Path inside a private temporary
	// directory, unless something is there, for a BindHost of a file.
	MakeFile MountKind = "mkfile"
	// BindHost shows the host's directory or file at Path read-only again
	// inside a private temporary directory: a home there, a protected
	// path outside every root (a worktree's gitdir, agentbox's binary), a
	// listed unix socket.
	BindHost MountKind = "ro-host"
)

// Mount is one step of the plan.
type Mount struct {
	Kind MountKind `json:"kind"`
	Path string    `json:"path"`
	// Source, for BindPrivate, is the host directory shown at Path.
	Source string `json:"source,omitempty"`
}

// Plan orders the mounts for a policy. Writable roots and the private
// temporary directories go first, parents before children, so a nested
// root keeps its own bind (a workspace under the private /tmp is the
// host's, on a directory made for it there); then the pins; then the
// read-only carve-outs last, so no later bind can cover them whatever the
// nesting of roots. agentbox's state directory, where the private
// temporary directories live, is one of those carve-outs (or outside
// every root): a private directory is writable at its mount point only.
//
// held are the directories the caller holds for the run (see HeldDirs):
// placeholders for missing protected paths, made as empty directories for
// the duration of the run, are pinned read-only like existing ones. A
// missing path with nothing held for it gets no read-only step, only the
// pins of the directories between it and its root, so that it cannot be
// brought in by renaming one of them: the caller must have proved that
// the command cannot create it (AcquirePlaceholders), or, in a session,
// bind a placeholder for each command (MountPlaceholders).
func Plan(p *policy.Policy, held []string) []Mount {
	out, mounted := tempPlan(p)
	have := map[string]bool{}
	for _, h := range held {
		have[h] = true
	}
	var ro, links []string
	pins, seen := map[string]bool{}, map[string]bool{}
	for _, pr := range p.Protected() {
		if pr.Root == "" {
			continue // outside every writable root: read-only already
		}
		bind := true
		if pr.Kind == policy.Missing {
			// Held at its own path, or (when another run's placeholder
			// stood in the way) at the empty ancestor that was held
			// instead: read-only, nothing can be created below it.
			if cover := coverOf(pr, have); cover != "" {
				pr.Path = cover
			} else {
				bind = false
			}
		}
		if seen[pr.Path] {
			continue
		}
		seen[pr.Path] = true
		switch {
		case !bind:
		case pr.Kind == policy.Symlink:
			links = append(links, pr.Path)
		default:
			ro = append(ro, pr.Path)
		}
		for a := filepath.Dir(pr.Path); a != pr.Root && fspath.Within(a, pr.Root); a = filepath.Dir(a) {
			pins[a] = true
		}
	}
	roots := map[string]bool{}
	for _, r := range p.WritableRoots() {
		roots[r] = true
	}
	// A writable root nested in another (a checkout under a shared
	// /tmp) is a mount point and cannot be renamed itself, but the
	// directories between it and the outer root could be, taking the
	// root's protected paths away and letting the command recreate them
	// empty: pin that chain too. Inside a private /tmp the same keeps the
	// command's later commands (a session's) from finding a directory of
	// its making at the root's path.
	for _, r := range mounted {
		outer := fspath.InnermostRoot(filepath.Dir(r), mounted)
		if outer == "" || outer == r {
			continue
		}
		for a := filepath.Dir(r); a != outer && fspath.Within(a, outer); a = filepath.Dir(a) {
			pins[a] = true
		}
	}
	for _, m := range mounted {
		roots[m] = true
	}
	var pinList []string
	for a := range pins {
		if !roots[a] { // a writable root is already a mount point
			pinList = append(pinList, a)
		}
	}
	out = appendByDepth(out, Pin, pinList)
	out = appendByDepth(out, BindReadOnly, ro)
	out = appendByDepth(out, PinLink, links)
	return out
}

// tempPlan is the first part of the plan: the writable roots and the
// private temporary directories, parents first, with a directory made
// in a private one for each root, kept host directory and $TMPDIR inside
// it. It returns the steps and every path they mount on.
func tempPlan(p *policy.Policy) (steps []Mount, mounted []string) {
	type step struct {
		Mount
		made bool // a MakeDir goes first
	}
	var all []step
	var private []string
	type kept struct {
		path string
		file bool
	}
	var keep []kept
	for _, t := range p.PrivateTemps() {
		if fspath.InnermostRoot(t.Path, private) != "" {
			// $TMPDIR inside the private /tmp: a directory there.
			all = append(all, step{Mount{Kind: MakeDir, Path: t.Path}, true})
			continue
		}
		private = append(private, t.Path)
		all = append(all, step{Mount: Mount{Kind: BindPrivate, Path: t.Path, Source: t.Dir}})
		for _, k := range t.Keep {
			keep = append(keep, kept{k, false})
		}
	}
	// What the host shows read-only elsewhere stays visible inside a
	// private /tmp: protected paths outside every root, and listed
	// sockets (the user's deliberate hand-over).
	for _, pr := range p.Protected() {
		if pr.Root == "" && (pr.Kind == policy.Dir || pr.Kind == policy.File) {
			keep = append(keep, kept{pr.Path, pr.Kind == policy.File})
		}
	}
	for _, sock := range p.AllowUnixSockets() {
		keep = append(keep, kept{sock, true})
	}
	slices.SortFunc(keep, func(a, b kept) int { return byDepth(a.path, b.path) })
	var keptDirs []string
	for _, k := range keep {
		if fspath.InnermostRoot(k.path, private) == "" || fspath.InnermostRoot(k.path, p.WritableRoots()) != "" ||
			fspath.InnermostRoot(k.path, keptDirs) != "" || slices.Contains(private, k.path) {
			continue
		}
		if k.file {
			all = append(all, step{Mount{Kind: MakeDir, Path: filepath.Dir(k.path)}, true}, step{Mount{Kind: MakeFile, Path: k.path}, true})
		} else {
			all = append(all, step{Mount{Kind: MakeDir, Path: k.path}, true})
			keptDirs = append(keptDirs, k.path)
		}
		all = append(all, step{Mount: Mount{Kind: BindHost, Path: k.path}})
		mounted = append(mounted, k.path)
	}
	for _, r := range p.WritableRoots() {
		if fspath.InnermostRoot(r, private) != "" {
			all = append(all, step{Mount{Kind: MakeDir, Path: r}, true})
		}
		all = append(all, step{Mount: Mount{Kind: BindWritable, Path: r}})
	}
	slices.SortStableFunc(all, func(a, b step) int {
		if c := byDepth(a.Path, b.Path); c != 0 {
			return c
		}
		switch {
		case a.made && !b.made:
			return -1
		case b.made && !a.made:
			return 1
		}
		return 0
	})
	for _, s := range all {
		steps = append(steps, s.Mount)
	}
	return steps, append(append(private, p.WritableRoots()...), mounted...)
}

// coverOf is the held path that protects the missing pr: pr.Path itself,
// or its nearest held ancestor below the root; "" when none is held.
func coverOf(pr policy.Protected, held map[string]bool) string {
	for a := pr.Path; a != pr.Root && fspath.Within(a, pr.Root); a = filepath.Dir(a) {
		if held[a] {
			return a
		}
	}
	return ""
}

// byDepth orders shallower paths first, then lexically.
func byDepth(a, b string) int {
	da, db := strings.Count(a, "/"), strings.Count(b, "/")
	if da != db {
		return da - db
	}
	return strings.Compare(a, b)
}

// appendByDepth appends a mount of kind for each path, parents before
// children (paths is sorted in place).
func appendByDepth(out []Mount, kind MountKind, paths []string) []Mount {
	slices.SortFunc(paths, byDepth)
	for _, p := range paths {
		out = append(out, Mount{Kind: kind, Path: p})
	}
	return out
}

// HeldDir is a protected directory inside a writable root that a run must
// hold for its duration.
type HeldDir struct {
	Path, Root string
	// Missing: not there when the policy was resolved, so a placeholder
	// is made for it.
	Missing bool
	// File: the placeholder is an empty file rather than a directory
	// (policy.Protected.FileWhenMissing).
	File bool
}

// HeldDirs lists the protected directories (and files git reads) inside
// writable roots that a run must hold for its duration: missing ones get a
// placeholder, and existing ones are held too, because an existing empty
// directory or file may be another run's placeholder that would otherwise
// vanish under us.
func HeldDirs(p *policy.Policy) []HeldDir {
	var out []HeldDir
	for _, pr := range p.Protected() {
		// A file git reads, found existing, may be another run's file
		// placeholder: held like an existing directory.
		if (pr.Kind == policy.Missing || pr.Kind == policy.Dir || pr.Kind == policy.File && pr.FileWhenMissing) && pr.Root != "" {
			out = append(out, HeldDir{Path: pr.Path, Root: pr.Root, Missing: pr.Kind == policy.Missing, File: pr.FileWhenMissing})
		}
	}
	return out
}

// DegradedGaps lists, for a policy, the guarantees that are lost when the
// sandbox must run without namespaces (Landlock and seccomp only).
// landlockABI is the kernel's Landlock ABI: below 6 nothing scopes signals.
func DegradedGaps(p *policy.Policy, landlockABI int) []string {
	var gaps []string
	if landlockABI < 6 {
		gaps = append(gaps, "Landlock ABI below 6: the command can signal the user's other processes, agentbox's reaper included (killing it outright lets what the command started outlive the run)")
	}
	if p.Mode() == policy.WorkspaceWrite && len(p.Protected()) > 0 {
		gaps = append(gaps, fmt.Sprintf("protected paths inside writable roots (%s, and gitdirs) stay writable: Landlock can only add access, not carve read-only holes", strings.Join(p.ProtectedNames(), ", ")))
	}
	switch {
	case p.AllowList() != nil:
		gaps = append(gaps, "no network namespace: the allow-list proxy listens on the host's loopback, where other local processes can use it during the run; the command may only make TCP connections to it (every connect is checked), and UDP and listen(2) are refused, so servers inside the command do not work")
	case !p.Network():
		gaps = append(gaps, "no network namespace: all non-unix sockets are refused by seccomp, so servers on 127.0.0.1 inside the command do not work either")
	}
	if n := len(p.Hidden()); n > 0 {
		gaps = append(gaps, fmt.Sprintf("no mount namespace to mask the %d hidden paths: Landlock keeps their files from being opened for reading (reads are granted beneath every sibling on the way to each), but their names stay listable, and a file created later directly in a directory on the way (your home) cannot be read until the next run", n))
	}
	if len(p.PrivateTemps()) > 0 {
		gaps = append(gaps, "no mount namespace to give the command a private /tmp: the host's /tmp (and $TMPDIR) stay read-only, and TMPDIR points at the workspace's private temporary directory instead; a program that writes to /tmp by name fails (set share_slash_tmp = true to let it write the host's /tmp, where what it leaves can reach your own programs)")
	}
	gaps = append(gaps,
		"no private /dev: the host's terminals and input devices are kept out of reach by Landlock, and so are new pseudo-terminals opened by their /dev/pts path (script, expect, openpty fail; the command's own terminal works)",
		"no pid namespace: the command sees every process of the host in /proc (Landlock scoping keeps it from signalling them where the kernel supports it)",
		"no IPC namespace or private /dev/shm: the host's is used, limited by Landlock (the host's /dev/shm is not writable, so POSIX shared memory and semaphores fail); SysV IPC and POSIX message queues are refused by seccomp, and so are abstract unix sockets, the command's own included (network on or off)")
	return gaps
}

// nonUTF8 returns the first string of s, but for the command's arguments
// and environment, that is not valid UTF-8 ("" when none is): the spec
// reaches the init stage as JSON, which would replace the invalid bytes
// and so name another path (a writable root, a protected one). Argv and
// Env travel byte for byte (package wirestr).
func (s *Spec) nonUTF8() string {
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		if n := v.Type().Field(i).Name; n == "Argv" || n == "Env" {
			continue
		}
		if bad := firstNonUTF8(v.Field(i)); bad != "" {
			return bad
		}
	}
	return ""
}

func firstNonUTF8(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return v.String()
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if bad := firstNonUTF8(v.Index(i)); bad != "" {
				return bad
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if bad := firstNonUTF8(v.Field(i)); bad != "" {
				return bad
			}
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return firstNonUTF8(v.Elem())
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if bad := firstNonUTF8(it.Key()); bad != "" {
				return bad
			}
			if bad := firstNonUTF8(it.Value()); bad != "" {
				return bad
			}
		}
	}
	return ""
}

// errNonUTF8 is the refusal of a path the spec cannot carry.
func errNonUTF8(path string) error {
	return fmt.Errorf("%q is not valid UTF-8: agentbox cannot carry such a name into the sandbox yet (rename it, or run from a directory whose path is UTF-8)", path)
}
