package netproxy

import (
	"encoding/binary"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// originalDst reads SO_ORIGINAL_DST: the destination of a connection
// before the sandbox's nftables rule redirected it, from the connection
// tracking of the network namespace the socket belongs to (the
// sandbox's, whichever namespace agentbox itself is in).
func originalDst(c net.Conn) (netip.AddrPort, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, errNotRedirected
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var ap netip.AddrPort
	var serr error
	v6 := false
	if l, ok := tc.LocalAddr().(*net.TCPAddr); ok && l.IP.To4() == nil {
		v6 = true
	}
	err = rc.Control(func(fd uintptr) {
		if v6 {
			// IP6T_SO_ORIGINAL_DST (the same number) gives a
			// sockaddr_in6, read through the struct ip6_mtuinfo
			// that begins with one.
			m, err := unix.GetsockoptIPv6MTUInfo(int(fd), unix.IPPROTO_IPV6, unix.SO_ORIGINAL_DST)
			if err != nil {
				serr = err
				return
			}
			if m.Addr.Family != unix.AF_INET6 {
				serr = errNotRedirected
				return
			}
			p := (*[2]byte)(unsafe.Pointer(&m.Addr.Port))
			ap = netip.AddrPortFrom(netip.AddrFrom16(m.Addr.Addr), binary.BigEndian.Uint16(p[:]))
			return
		}
		// A sockaddr_in, read through the 16-byte ipv6_mreq the
		// package offers for such options.
		m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			serr = err
			return
		}
		b := m.Multiaddr
		if binary.NativeEndian.Uint16(b[0:2]) != unix.AF_INET {
			serr = errNotRedirected
			return
		}
		ap = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:4]))
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return netip.AddrPort{}, err
	}
	// A connection made to the listener's own address was not
	// redirected: the kernel answers with that address.
	if l, ok := tc.LocalAddr().(*net.TCPAddr); ok && l.AddrPort().Addr().Unmap() == ap.Addr().Unmap() && l.AddrPort().Port() == ap.Port() {
		return netip.AddrPort{}, errNotRedirected
	}
	return ap, nil
}
