package linux

import (
	"cmp"
	"errors"
	"fmt"
	"github.com/agentbox/agentbox/internal/linux/scm"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The sandbox's name server (Spec.Resolver) is agentbox's, served from
// outside like the proxy: its sockets are bound in the sandbox's network
// namespace, on the address its /etc/resolv.conf names, and handed over.
// Port 53 needs CAP_NET_BIND_SERVICE, which the init stage (or the
// session's zygote) holds in its user namespace until it drops them all.

// resolverAddr is the name server's address inside the sandbox.
var resolverAddr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 53)

// Resolver is the name server's sockets on the sandbox's loopback, as
// agentbox serves them.
type Resolver struct {
	UDP net.PacketConn
	TCP net.Listener
	// Transparent, with Spec.Transparent, are the listeners the
	// sandbox's TCP connections to other addresses are redirected to
	// (see transparent_linux.go): IPv4's, then IPv6's where the sandbox
	// has IPv6. The caller serves them with the proxy.
	Transparent []net.Listener
	// NoTransparent, when Spec.Transparent was asked for and the
	// sandbox could not have it, says why (TransparentUnavailable).
	NoTransparent string
}

// Close closes the sockets.
func (r *Resolver) Close() {
	if r != nil {
		r.UDP.Close()
		r.TCP.Close()
		for _, l := range r.Transparent {
			l.Close()
		}
	}
}

// listenResolver binds a UDP socket and a listening TCP socket to
// 127.0.0.1:53 (not SO_REUSEADDR: nobody else may bind the port).
func listenResolver() (udp, tcp int, err error) {
	sa := &unix.SockaddrInet4{Addr: resolverAddr.Addr().As4(), Port: int(resolverAddr.Port())}
	udp, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, -1, &os.SyscallError{Syscall: "socket", Err: err}
	}
	if err := unix.Bind(udp, sa); err != nil {
		unix.Close(udp)
		return -1, -1, &os.SyscallError{Syscall: "bind(udp 127.0.0.1:53)", Err: err}
	}
	tcp, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		unix.Close(udp)
		return -1, -1, &os.SyscallError{Syscall: "socket", Err: err}
	}
	if err = unix.Bind(tcp, sa); err == nil {
		err = unix.Listen(tcp, 64)
	}
	if err != nil {
		unix.Close(udp)
		unix.Close(tcp)
		return -1, -1, &os.SyscallError{Syscall: "bind(tcp 127.0.0.1:53)", Err: err}
	}
	return udp, tcp, nil
}

// resolverOf turns the name server's two descriptors (UDP, then TCP) into
// their Go forms; it closes them all.
func resolverOf(fds []int) (*Resolver, error) {
	if len(fds) != 2 {
		scm.CloseAll(fds)
		return nil, fmt.Errorf("got %d name server sockets, want 2", len(fds))
	}
	uf, tf := os.NewFile(uintptr(fds[0]), "resolver-udp"), os.NewFile(uintptr(fds[1]), "resolver-tcp")
	defer uf.Close()
	defer tf.Close()
	pc, err := net.FilePacketConn(uf)
	if err != nil {
		return nil, err
	}
	ln, err := net.FileListener(tf)
	if err != nil {
		pc.Close()
		return nil, err
	}
	return &Resolver{UDP: pc, TCP: ln}, nil
}

// bindEtc binds the spec's own files over the host's, read-only, at the
// end of building the root: each is written to the scratch tmpfs (the
// root while the new one is assembled; the binds keep its files after it
// is detached) and bound over the host's file, or over the host's link
// itself when that is a symbolic link. A path the host lacks is skipped.
func bindEtc(files []EtcFile) error {
	for i, f := range files {
		var st unix.Stat_t
		if err := unix.Lstat(newRoot+f.Path, &st); errors.Is(err, unix.ENOENT) {
			continue
		}
		src := fmt.Sprintf("/etc-%d", i)
		if err := os.WriteFile(src, []byte(f.Content), 0o644); err != nil {
			return err
		}
		fd, err := cloneOnto("/", src, f.Path, false, true)
		if err == nil {
			err = setAttr(fd, f.Path, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, false)
			unix.Close(fd)
		}
		if err != nil {
			return fmt.Errorf("binding the sandbox's own %s: %w", f.Path, err)
		}
	}
	return nil
}

// PortOwners is a table that agentbox and a session's zygote share, in
// a sealed memfd both map: for each local port of the session's loopback,
// UDP and TCP apart, the id of the command whose socket on that port was
// last connected to the name server (or to the session's refusing
// proxy). Each command's connect supervisor
// writes it before the command's connect returns, so before the command
// can send a query from that socket; agentbox reads it for each query, by
// the query's source port. Commands cannot reach it (the zygote's
// descriptors are close-on-exec, its memory not readable). A port reused
// by a socket that sends without connecting (musl's resolver does) keeps
// its last owner, who may have ended: agentbox checks that the owner is a
// command still running.
type PortOwners struct {
	mem  []byte
	file *os.File // agentbox's: passed to the zygote
	// watched, on the zygote's side, are the destinations whose
	// clients are recorded: the name server and the session's
	// refusing proxy.
	watched []netip.AddrPort
	// transparent: every connect to a non-loopback address is recorded
	// too (Spec.Transparent: agentbox's transparent listener receives
	// it, redirected, from the same port).
	transparent bool
}

const portOwnersSize = 2 * 65536 * 4

// NewPortOwners makes an empty table, and the file to hand the zygote.
func NewPortOwners() (*PortOwners, error) {
	fd, err := unix.MemfdCreate("agentbox-port-owners", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, os.NewSyscallError("memfd_create", err)
	}
	f := os.NewFile(uintptr(fd), "port-owners")
	if err := unix.Ftruncate(fd, portOwnersSize); err != nil {
		f.Close()
		return nil, os.NewSyscallError("ftruncate", err)
	}
	// Neither side can shrink it under the other's mapping (SIGBUS).
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, os.NewSyscallError("fcntl(F_ADD_SEALS)", err)
	}
	p, err := mapPortOwners(fd)
	if err != nil {
		f.Close()
		return nil, err
	}
	p.file = f
	return p, nil
}

// mapPortOwners maps the table at fd (the zygote's end); fd may be closed
// afterwards.
func mapPortOwners(fd int) (*PortOwners, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Size != portOwnersSize {
		return nil, fmt.Errorf("port owners table at fd %d: size %d, %v", fd, st.Size, err)
	}
	mem, err := unix.Mmap(fd, 0, portOwnersSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	return &PortOwners{mem: mem}, nil
}

func (p *PortOwners) slot(udp bool, port uint16) *uint32 {
	i := int(port)
	if !udp {
		i += 65536
	}
	return (*uint32)(unsafe.Pointer(&p.mem[4*i]))
}

// Owner is the id (the low 32 bits of a session command's) of the
// command whose socket at port, over network ("udp" or "tcp"), last
// connected to the name server; 0 when none did.
func (p *PortOwners) Owner(network string, port uint16) uint32 {
	if p == nil {
		return 0
	}
	return atomic.LoadUint32(p.slot(network == "udp", port))
}

// own records sock as command id's if dst is a watched address: its
// connect supervisor calls it after every inet connect it made for the
// command.
func (p *PortOwners) own(id uint32, sock int, dst netip.AddrPort, errno unix.Errno) {
	carried := p != nil && p.transparent && !dst.Addr().IsLoopback()
	if p == nil || !slices.Contains(p.watched, dst) && !carried || errno != 0 && errno != unix.EINPROGRESS {
		return
	}
	sa, err := unix.Getsockname(sock)
	if err != nil {
		return
	}
	var port int
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		port = a.Port
	case *unix.SockaddrInet6:
		port = a.Port
	default:
		return
	}
	typ, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil || typ != unix.SOCK_DGRAM && typ != unix.SOCK_STREAM {
		return
	}
	atomic.StoreUint32(p.slot(typ == unix.SOCK_DGRAM, uint16(port)), id)
}

// Close unmaps the table (agentbox's side, when the session has ended).
func (p *PortOwners) Close() {
	if p == nil {
		return
	}
	if p.file != nil {
		p.file.Close()
	}
	if p.mem != nil {
		unix.Munmap(p.mem)
		p.mem = nil
	}
}

// Unreachable is a destination a command's connect could not reach
// because the sandbox has no network (ENETUNREACH: its namespace has only
// loopback), and how often it tried. The connect supervisor sees every
// connect; a datagram sent without one is not seen.
type Unreachable struct {
	Addr  string `json:"addr"`
	Port  uint16 `json:"port"`
	Count int    `json:"count"`
	// Reason is why, when the connect supervisor refused the connect
	// itself (transparent mode); empty for ENETUNREACH.
	Reason string `json:"reason,omitempty"`
}

// maxUnreachable bounds the destinations a command's end reports, so
// that the report fits the status message; later ones are counted in the
// last.
const maxUnreachable = 32

// unreachables collects a command's Unreachable destinations from its
// connect supervisor, which calls record after each inet connect (and
// refuse for each it refused in transparent mode).
type unreachables struct {
	mu sync.Mutex
	m  map[unreachKey]int
	// enetReason is the reason of an ENETUNREACH: "" (the network is
	// off) but in a sandbox with an allow-list whose kernel refused
	// transparent networking.
	enetReason string
}

// newUnreachables is the collector for a command of spec (read after
// setupProxy, which may have turned Transparent off).
func newUnreachables(spec *Spec) *unreachables {
	u := &unreachables{}
	if spec.Proxy && !spec.ProxyOff {
		u.enetReason = "not carried: only the proxy variables reach the allow-list here (transparent networking unavailable)"
	}
	return u
}

type unreachKey struct {
	dst    netip.AddrPort
	reason string
}

func (u *unreachables) record(_ int, dst netip.AddrPort, errno unix.Errno) {
	if errno != unix.ENETUNREACH {
		return
	}
	u.add(dst, u.enetReason)
}

func (u *unreachables) refuse(dst netip.AddrPort, reason string) { u.add(dst, reason) }

func (u *unreachables) add(dst netip.AddrPort, reason string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[unreachKey]int{}
	}
	k := unreachKey{dst, reason}
	if _, ok := u.m[k]; !ok && len(u.m) >= maxUnreachable {
		k = unreachKey{reason: reason} // counted with the others
	}
	u.m[k]++
}

// list is what was recorded, by address.
func (u *unreachables) list() []Unreachable {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []Unreachable
	for k, n := range u.m {
		a := "(other addresses)"
		if k.dst.IsValid() {
			a = k.dst.Addr().String()
		}
		out = append(out, Unreachable{Addr: a, Port: k.dst.Port(), Count: n, Reason: k.reason})
	}
	slices.SortFunc(out, func(a, b Unreachable) int {
		return cmp.Or(cmp.Compare(a.Addr, b.Addr), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Reason, b.Reason))
	})
	return out
}

// recordsUnreachable reports whether the command's connect supervisor
// records the destinations it cannot reach: with the network off, in a
// namespace of the sandbox's own.
func recordsUnreachable(spec *Spec) bool {
	return spec.Resolver && spec.MediateUnixConnect && !spec.Degraded && !spec.Transparent
}

// Unreachable is what the command's connects could not reach (with
// Spec.Resolver); set by Wait.
func (p *Process) Unreachable() []Unreachable { return p.unreachable }
