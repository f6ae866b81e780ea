package netproxy

import (
	"encoding/binary"
	"net"
	"net/netip"

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
	err = rc.Control(func(fd uintptr) {
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
	if l, ok := tc.LocalAddr().(*net.TCPAddr); ok && l.AddrPort() == ap {
		return netip.AddrPort{}, errNotRedirected
	}
	return ap, nil
}
