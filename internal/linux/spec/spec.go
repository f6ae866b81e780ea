// Package spec is the contract between agentbox and the stage it
// re-executes itself as (a lone run's init, its reaper, a session's
// zygote): the Spec sent to the stage, the messages it answers with, a
// session's requests, and the descriptor numbers and marks both sides
// agree on.
package spec

import (
	"net/netip"
	"reflect"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/fsreport"
	"github.com/agentbox/agentbox/internal/toolcache"
)

// Spec is everything the init stage needs, sent to it over a pipe (see
// Encode): Command's Argv and Env byte for byte, the rest as JSON.
// Its groups are what they set up: the command, the filesystem the
// sandbox shows, the walls around the command, the network, and what only
// a session's zygote or only degraded mode uses. The switches that depend
// on each other are mostly in one group; [Spec.Validate] refuses the
// combinations that make no sense.
type Spec struct {
	Command  Command  `json:"command"`
	FS       FS       `json:"fs"`
	Walls    Walls    `json:"walls"`
	Net      Net      `json:"net"`
	Session  Session  `json:"session"`
	Degraded Degraded `json:"degraded"`
}

// Command is the command a lone run's init stage starts (a session's
// commands bring theirs in each request: see Session.On).
type Command struct {
	// Path is the command to run, looked up in PATH from Env when it has no slash.
	Path string   `json:"path"`
	Argv []string `json:"-"`
	Env  []string `json:"-"`
	Cwd  string   `json:"cwd"`
	// Pty, when set, gives the command a terminal of the sandbox's own
	// in place of the caller's (see stdio.go).
	Pty *PtySpec `json:"pty,omitempty"`
	// Reopen lists the caller's regular files to reopen inside the
	// sandbox rather than relay (see stdio.go).
	Reopen []ReopenSpec `json:"reopen,omitempty"`
}

// FS is the filesystem the sandbox shows, in the order the stage
// applies it.
type FS struct {
	// Mounts are applied in order on top of a read-only view of the host.
	Mounts []Mount `json:"mounts"`
	// Caches are the tool cache mounts, applied after Mounts (see
	// CachePlan).
	Caches []CacheMount `json:"caches,omitempty"`
	// Etc are files of the sandbox's own, bound read-only over the
	// host's after the mount plan and the tool caches (see
	// [ResolverFiles]).
	Etc []EtcFile `json:"etc,omitempty"`
	// Hides are the masks over hidden paths, applied after everything
	// else is mounted (see HidePlan).
	Hides []Hide `json:"hides,omitempty"`
	// HidePins are directories pinned (made mount points of themselves)
	// before the masks: see HidePlan.
	HidePins []string `json:"hide_pins,omitempty"`
}

// Walls are the restrictions on the command beyond the namespaces and
// the mounts: Landlock, seccomp and the connect supervisor.
type Walls struct {
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
}

// Net is the sandbox's network: the host's, or a namespace of its own
// with only loopback and what agentbox serves on it. Everything but
// Network needs that namespace.
type Net struct {
	// Network keeps the host network; otherwise only loopback exists.
	Network bool `json:"network"`
	// Proxy makes the init stage listen on two TCP ports of the
	// sandbox's loopback (HTTP and SOCKS5 proxy), hand the listening
	// sockets to agentbox over the socket at fd ProxyFD, and point the
	// command's proxy variables at them.
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
	// after the proxy's listeners if there are any. FS.Etc then names
	// that address in the sandbox's /etc/resolv.conf.
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
	// LocalNames are the names the sandbox's /etc/hosts gives loopback
	// addresses: NO_PROXY lists them next to localhost.
	LocalNames []string `json:"local_names,omitempty"`
	// HostPorts are ports of the host's loopback the command may reach:
	// the init stage (a session's zygote, once) listens on the
	// sandbox's 127.0.0.1 and [::1] at each and hands the listeners to
	// agentbox over the socket at PortsFD (ports_linux.go).
	HostPorts []uint16 `json:"host_ports,omitempty"`
	// Publish makes the init stage (a session's zygote) keep the socket
	// at PortsFD as a factory of TCP sockets of the sandbox's network
	// namespace, which agentbox connects to the command's listeners
	// for the published ports (ports_linux.go).
	Publish bool `json:"publish,omitempty"`
	PortsFD int  `json:"ports_fd,omitempty"`
}

// Session is what only a session's zygote uses.
type Session struct {
	// On makes the init stage a session's zygote: it builds the
	// sandbox once and then forks each command it is asked for over its
	// control socket (see zygote_linux.go). Command.Path and Argv are
	// unused; Command.Env holds variables set for every command (the
	// tool caches').
	On bool `json:"on,omitempty"`
	// Init is the executable (this binary, at its path in the sandbox)
	// that the zygote starts as PID 1 of each command's pid namespace
	// before the command is asked for (package pid1); empty, the
	// command itself is that PID 1.
	Init string `json:"init,omitempty"`
	// BindPerCommand starts the mounter that binds each command's
	// placeholders read-only before it runs (see mounter_linux.go): the
	// host makes them for each command and removes them when it ends,
	// so none outlives the command.
	BindPerCommand bool `json:"bind_per_command,omitempty"`
	// ProxyAddrs, with Net.ProxyOff, are the addresses of the session's
	// refusing proxy (HTTP, then SOCKS5), set by the zygote itself: made
	// once for every command, whose connects to them are recorded in the
	// port owners table like those to the name server.
	ProxyAddrs []netip.AddrPort `json:"-"`
	// PortOwnersFD, with Net.Resolver, is a shared table ([PortOwners])
	// in which each command's connect supervisor records the local port
	// of every socket the command connects to the name server, so that
	// agentbox can tell whose look-up a query is.
	PortOwnersFD int `json:"port_owners_fd,omitempty"`
}

// Degraded is what only degraded mode uses.
type Degraded struct {
	// On runs without namespaces (they are unavailable): Landlock and
	// seccomp only, under a reaper stage that kills the command's
	// descendants as their subreaper (reap_linux.go).
	On bool `json:"on"`
	// ProxyAddrs are the host-loopback addresses of the allow-list proxy
	// (HTTP, then SOCKS5): the command's proxy variables point at them,
	// and they are the only TCP destinations the connect supervisor lets
	// through.
	ProxyAddrs []string `json:"proxy_addrs,omitempty"`
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

// NonUTF8 returns the first string of s, but for the command's arguments
// and environment, that is not valid UTF-8 ("" when none is): the spec
// reaches the init stage as JSON, which would replace the invalid bytes
// and so name another path (a writable root, a protected one). Argv and
// Env travel byte for byte (see Encode).
func (s *Spec) NonUTF8() string {
	rest := *s
	rest.Command.Argv, rest.Command.Env = nil, nil
	return firstNonUTF8(reflect.ValueOf(rest))
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

// Hide is one mask of the sandbox: an empty read-only file over a
// hidden file, an empty read-only directory over a hidden directory
// (policy.Hidden), applied last, over the plan, the tool caches and the
// sandbox's own files, so that nothing mounted later shows the hidden
// bytes again.
type Hide struct {
	Path string `json:"path"`
	Dir  bool   `json:"dir,omitempty"`
	// Reopen are paths beneath a hidden directory shown again inside
	// its mask: bound from what the sandbox showed there before the
	// mask, or recreated as the same symbolic link.
	Reopen []string `json:"reopen,omitempty"`
	// Pins are the directories between a writable root and Path, which
	// a session's mounter pins when it masks Path late (see HidePlan).
	Pins []string `json:"pins,omitempty"`
}

// EtcFile is a file of the sandbox's own that replaces the host's at
// Path, bound read-only over it (over the link itself where the host's is
// a symbolic link). Where the host has nothing at Path nothing is bound:
// the host's root is read-only, and what a resolver does without the file
// is what it would do on the host.
type EtcFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// PtySpec asks the init stage for a pseudo-terminal from the sandbox's own
// devpts: the command gets its slave on the streams in Streams (and as its
// controlling terminal), and agentbox gets the master over the unix socket
// at descriptor FD.
type PtySpec struct {
	FD      int   `json:"fd"`
	Streams []int `json:"streams"`
	// The caller's terminal settings and size, to start from.
	Iflag, Oflag, Cflag, Lflag uint32
	Cc                         []byte
	Ispeed, Ospeed             uint32
	Rows, Cols, Xpixel, Ypixel uint16
}

// ReopenSpec asks the init stage to reopen a regular file the caller gave
// as a standard stream by its path, inside the sandbox, instead of
// relaying it: the command then holds a descriptor on the sandbox's own
// mount of the file (read-only outside the writable roots, so its
// metadata cannot be changed through /proc/self/fd), which is seekable
// and costs nothing to read or write. Stdin is reopened read-only at the
// caller's offset; stdout and stderr only when opened O_APPEND (an
// appended file needs no shared offset), and only where the sandbox may
// write. When the open fails or reaches another inode, the relay stays.
type ReopenSpec struct {
	Stream int    `json:"stream"`
	Path   string `json:"path"`
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	Offset int64  `json:"offset"`
}

// CacheMount is one tool cache step of the init stage, applied after the
// plan's read-only carve-outs (see [toolcache.Mount]).
type CacheMount = toolcache.Mount
