// Package unixsock keeps a sandboxed command from reaching host daemons
// through pathname unix sockets (/run/docker.sock, $SSH_AUTH_SOCK, the
// D-Bus and systemd sockets under /run and $XDG_RUNTIME_DIR) while the
// sockets it creates in its writable roots keep working.
//
// Read-only mounts do not stop connect(2) on a socket inode, and Landlock
// only mediates pathname unix connects from ABI 9, so the mechanism is
// seccomp user notification:
//
//   - A second seccomp filter ([BuildProgram]), installed on the init
//     stage's locked main thread only, turns every connect(2) into a
//     notification for a supervisor in the init stage, and refuses
//     AF_UNIX sockets of any type but SOCK_STREAM and SOCK_SEQPACKET.
//   - The supervisor reads the target's address from /proc/<tid>/mem,
//     resolves a pathname address in the target's context (its cwd, its
//     /proc/self) to the socket inode with O_PATH, and asks the policy
//     about the inode's real path. It then performs the connect itself,
//     on the target's own socket obtained with pidfd_getfd(2) and with
//     its own copy of the address, and returns the result as the
//     syscall's. Nothing is ever answered with "continue", so the target
//     cannot swap the address after the check (TOCTOU).
//
// # What is covered
//
// connect(2) of every socket family goes through the supervisor. For
// AF_UNIX pathname addresses the decision is made on the socket inode
// the path resolves to, after symlinks, so a link inside a writable root
// pointing at /run/docker.sock is refused. A refused connect fails with
// EACCES ("permission denied": the sandbox said no; ECONNREFUSED would
// read as "the daemon is not running"). Unnamed AF_UNIX addresses and
// other families are connected on the target's behalf without a policy
// check: the network namespace already confines them. So are abstract
// AF_UNIX addresses, unless [Options].RefuseAbstract is set: without a
// network namespace the abstract namespace is the host's, and Landlock's
// abstract-socket scoping cannot help, because the connect is made on a
// supervisor thread outside the command's Landlock domain.
//
// SOCK_DGRAM (and SOCK_RAW, which AF_UNIX turns into SOCK_DGRAM) unix
// sockets and socketpairs are refused with EPERM: sendto(2) and
// sendmsg(2) on them name a destination path per datagram, which would
// bypass connect mediation (a datagram socketpair accepts an explicit
// destination too). Stream and seqpacket sockets ignore or refuse a
// destination on send.
//
// # Limitations
//
//   - The supervisor must be able to read the target's memory: a
//     command that makes itself non-dumpable (prctl(PR_SET_DUMPABLE, 0),
//     as ssh-agent does) cannot connect anywhere; its connects fail with
//     EACCES.
//   - The listening side sees the init stage, not the command, in
//     SO_PEERCRED's pid (uid and gid are the same).
//   - Once the supervisor has received a connect, the target waits for
//     the answer and only a fatal signal interrupts it
//     (SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, Linux 5.19+; older kernels
//     may see a restarted connect fail with EISCONN/EALREADY).
//   - A command cannot install a seccomp listener of its own (the kernel
//     allows one per filter chain).
//   - With RefuseAbstract, the command's own abstract sockets are
//     refused too: the supervisor cannot tell who bound a name.
//   - The policy is about paths: a host daemon whose socket lives inside
//     a writable root (say /tmp/.X11-unix or a tmux socket in /tmp) is
//     reachable.
package unixsock

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/net/bpf"

	"github.com/agentbox/agentbox/internal/linux/seccomp"
)

// Seccomp return values (include/uapi/linux/seccomp.h).
const (
	RetAllow      = uint32(seccomp.ActAllow)
	RetUserNotif  = uint32(seccomp.ActNotify)
	RetErrnoEPERM = uint32(seccomp.ActEPERM)
)

// Values from the Linux UAPI, identical on amd64 and arm64.
const (
	afUnix        = 1
	afInet        = 2
	afInet6       = 10
	sockStream    = 1
	sockSeqpacket = 5
	sockTypeMask  = 0xf
)

// ErrUnsupportedArch is returned for an architecture without numbers.
var ErrUnsupportedArch = seccomp.ErrUnsupportedArch

// unixNonStream matches socket(2) and socketpair(2) creating an AF_UNIX
// socket of a type other than SOCK_STREAM or SOCK_SEQPACKET (the type's
// low bits; SOCK_NONBLOCK and SOCK_CLOEXEC sit above the mask).
var unixNonStream = seccomp.All{
	seccomp.OneOf{Arg: 0, Values: []uint32{afUnix}},
	seccomp.NoneOf{Arg: 1, Mask: sockTypeMask, Values: []uint32{sockStream, sockSeqpacket}},
}

// rules is the notification filter as data.
var rules = []seccomp.Rule{
	{Syscall: "connect", Action: seccomp.ActNotify, Why: "decided by the supervisor"},
	{Syscall: "socket", Match: unixNonStream, Action: seccomp.ActEPERM, Why: "datagram unix sockets name a destination per send"},
	{Syscall: "socketpair", Match: unixNonStream, Action: seccomp.ActEPERM, Why: "datagram unix sockets name a destination per send"},
}

// BuildProgram returns the notification filter for arch ("amd64" or
// "arm64"): a foreign audit arch or an x32 number gets EPERM, connect gets
// SECCOMP_RET_USER_NOTIF, socket and socketpair with family AF_UNIX and a
// type other than SOCK_STREAM or SOCK_SEQPACKET get EPERM, and everything
// else is allowed. It is built by the seccomp package's builder from
// [rules], so the architecture check and syscall table are the ones the
// main filter uses. Only the low 32 bits of arguments are compared, which
// is exact: the kernel takes family and type as int.
func BuildProgram(archName string) ([]bpf.RawInstruction, error) {
	return buildProgram(archName, false, false)
}

// buildProgram is [BuildProgram], with the metadata calls added when
// metadata is set (see metadata.go) and the observed file calls when
// files is (files.go).
func buildProgram(archName string, metadata, files bool) ([]bpf.RawInstruction, error) {
	rs := append([]seccomp.Rule{}, rules...)
	if metadata {
		rs = append(rs, metadataRules(archName)...)
	}
	if files {
		rs = append(rs, fileRules(archName, metadata)...)
	}
	prog, err := seccomp.Build(archName, rs)
	if err != nil {
		return nil, fmt.Errorf("unixsock: %w", err)
	}
	return prog, nil
}

// unixPath returns the path of an AF_UNIX pathname address as connect(2)
// sees it (sun_path up to the first NUL within addr), and false for any
// other address: too short, another family, abstract or unnamed.
func unixPath(addr []byte, family uint16) (string, bool) {
	if len(addr) <= 2 || family != afUnix || addr[2] == 0 {
		return "", false
	}
	p := addr[2:]
	for i, c := range p {
		if c == 0 {
			return string(p[:i]), true
		}
	}
	return string(p), true
}

// abstract reports whether addr is an AF_UNIX abstract address: a
// sun_path that starts with a NUL byte. The name is every byte after the
// family, so "\x00" alone (addrlen 3) is a name too; addrlen 2 is the
// unnamed address.
func abstract(addr []byte, family uint16) bool {
	return len(addr) > 2 && family == afUnix && addr[2] == 0
}

// inTarget rewrites the spellings of the caller's own /proc entries
// (/proc/self, /proc/thread-self, /dev/fd) to the target thread's, since
// the supervisor resolves the path in its own process.
func inTarget(path string, tid int) string {
	for _, pre := range []string{"/proc/self/", "/proc/thread-self/"} {
		if len(path) >= len(pre) && path[:len(pre)] == pre {
			return fmt.Sprintf("/proc/%d/%s", tid, path[len(pre):])
		}
	}
	if pre := "/dev/fd/"; len(path) >= len(pre) && path[:len(pre)] == pre {
		return fmt.Sprintf("/proc/%d/fd/%s", tid, path[len(pre):])
	}
	return path
}

// inetAddr parses a sockaddr_in or sockaddr_in6 as connect(2) reads it
// (the kernel refuses shorter ones), IPv4-mapped addresses unmapped.
func inetAddr(addr []byte, family uint16) (netip.AddrPort, bool) {
	switch {
	case family == afInet && len(addr) >= 16:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(addr[4:8])), binary.BigEndian.Uint16(addr[2:4])), true
	case family == afInet6 && len(addr) >= 24:
		a := netip.AddrFrom16([16]byte(addr[8:24])).Unmap()
		return netip.AddrPortFrom(a, binary.BigEndian.Uint16(addr[2:4])), true
	}
	return netip.AddrPort{}, false
}
