package spec

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ResolverAddr is the name server's address inside the sandbox.
var ResolverAddr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 53)

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
	File *os.File // agentbox's: passed to the zygote
	// Watched, on the zygote's side, are the destinations whose
	// clients are recorded: the name server and the session's
	// refusing proxy.
	Watched []netip.AddrPort
	// Transparent: every connect to a non-loopback address is recorded
	// too (Spec.Net.Transparent: agentbox's transparent listener receives
	// it, redirected, from the same port).
	Transparent bool
}

// PortOwnersSize is the table's size: a uint32 for each port, UDP and TCP.
const PortOwnersSize = 2 * 65536 * 4

// NewPortOwners makes an empty table, and the file to hand the zygote.
func NewPortOwners() (*PortOwners, error) {
	fd, err := unix.MemfdCreate("agentbox-port-owners", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, os.NewSyscallError("memfd_create", err)
	}
	f := os.NewFile(uintptr(fd), "port-owners")
	if err := unix.Ftruncate(fd, PortOwnersSize); err != nil {
		f.Close()
		return nil, os.NewSyscallError("ftruncate", err)
	}
	// Neither side can shrink it under the other's mapping (SIGBUS).
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, os.NewSyscallError("fcntl(F_ADD_SEALS)", err)
	}
	p, err := MapPortOwners(fd)
	if err != nil {
		f.Close()
		return nil, err
	}
	p.File = f
	return p, nil
}

func (p *PortOwners) Slot(udp bool, port uint16) *uint32 {
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
	return atomic.LoadUint32(p.Slot(network == "udp", port))
}

// Close unmaps the table (agentbox's side, when the session has ended).
func (p *PortOwners) Close() {
	if p == nil {
		return
	}
	if p.File != nil {
		p.File.Close()
	}
	if p.mem != nil {
		unix.Munmap(p.mem)
		p.mem = nil
	}
}

// MapPortOwners maps the table at fd (the zygote's end); fd may be closed
// afterwards.
func MapPortOwners(fd int) (*PortOwners, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Size != PortOwnersSize {
		return nil, fmt.Errorf("port owners table at fd %d: size %d, %v", fd, st.Size, err)
	}
	mem, err := unix.Mmap(fd, 0, PortOwnersSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	return &PortOwners{mem: mem}, nil
}

// Own records sock as command id's if dst is a watched address: its
// connect supervisor calls it after every inet connect it made for the
// command.
func (p *PortOwners) Own(id uint32, sock int, dst netip.AddrPort, errno unix.Errno) {
	carried := p != nil && p.Transparent && !dst.Addr().IsLoopback()
	if p == nil || !slices.Contains(p.Watched, dst) && !carried || errno != 0 && errno != unix.EINPROGRESS {
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
	atomic.StoreUint32(p.Slot(typ == unix.SOCK_DGRAM, uint16(port)), id)
}
