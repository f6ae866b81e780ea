package linux

import (
	"fmt"
	"github.com/agentbox/agentbox/internal/linux/scm"
	"net"
	"net/netip"
	"os"
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

// Unreachable is what the command's connects could not reach (with
// Spec.Resolver); set by Wait.
func (p *Process) Unreachable() []Unreachable { return p.unreachable }
