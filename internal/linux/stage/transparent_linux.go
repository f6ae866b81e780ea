package stage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/internal/netproxy"
	"github.com/agentbox/agentbox/policy"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Transparent networking (Spec.Net.Transparent), for a sandbox with an
// allow-list and a network namespace of its own: a command that ignores
// the proxy variables still reaches the names the allow-list admits.
//
//   - The name server (Spec.Net.Resolver) answers an allowed name with a fake
//     address of netproxy.FakePrefix, and of FakePrefix6 where the
//     sandbox has IPv6 (package nameserver).
//   - The init stage (a session's zygote, once) gives the namespace
//     default routes over loopback, and nftables rules of the namespace's
//     own (no capability on the host: the init holds CAP_NET_ADMIN in its
//     user namespace, over its network namespace only) that redirect
//     every TCP connection to a non-loopback address to one more listener
//     on the sandbox's loopback (127.0.0.1, and ::1 for IPv6), and every
//     UDP datagram to port 53 of an IPv4 address to the name server;
//     every other packet to a non-loopback address is dropped (sendto
//     fails with EPERM: UDP other than DNS, ICMP).
//   - Those listeners are handed to agentbox with the others; agentbox
//     reads each connection's original destination (SO_ORIGINAL_DST,
//     from the namespace's own connection tracking), turns a fake
//     address back into its name, and carries the connection through
//     the proxy's one path (decide, resolve on the host, admit, dial).
//   - The connect supervisor refuses (EACCES, recorded for the report) a
//     connect to an address that is neither loopback, nor fake, nor in
//     an address pattern of the allow-list, nor port 53 of an IPv4
//     address: such a connection never starts, instead of being
//     accepted and closed.
//
// The command cannot change the rules: it holds no capability.

// transparentUp installs the rules, redirecting TCP to the listeners at
// port4 of the namespace's 127.0.0.1 and (when not 0) port6 of its ::1,
// then the routes, and reports whether IPv6 is carried. A kernel without
// nftables (or its NAT) cannot carry connections: that is a
// *TransparentUnavailable, after which the sandbox is as it was without
// transparent networking (no route, so nothing leaves loopback), and the
// proxy variables still work. One that refuses only the IPv6 part (its
// table or its route) carries IPv4 alone. Any other failure is the
// run's.
func transparentUp(port4, port6 int) (v6 bool, err error) {
	v6 = port6 != 0
	if err := redirectRules(uint16(port4), uint16(port6)); err != nil {
		if !v6 || redirectRules(uint16(port4), 0) != nil {
			return false, &TransparentUnavailable{Err: fmt.Errorf("the nftables rules of the sandbox's network namespace: %w", err)}
		}
		v6 = false
	}
	if err := defaultRouteOverLoopback(unix.AF_INET); err != nil {
		return false, fmt.Errorf("a default route over loopback: %w", err)
	}
	if v6 && defaultRouteOverLoopback(unix.AF_INET6) != nil {
		// IPv6 connects then fail at once (no route), and the name
		// server gives no IPv6 addresses.
		v6 = false
	}
	return v6, nil
}

// TransparentUnavailable is why a sandbox has no transparent networking.
type TransparentUnavailable struct{ Err error }

func (e *TransparentUnavailable) Error() string {
	return "transparent networking unavailable: " + e.Err.Error()
}

func (e *TransparentUnavailable) Unwrap() error { return e.Err }

// notLoopback are the expressions "the IPv4 destination is not in
// 127.0.0.0/8" (its first byte is not 127).
func notLoopback() []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{127}},
	}
}

// notLoopback6 are the expressions "the IPv6 destination is not ::1".
func notLoopback6() []expr.Any {
	lo := netip.IPv6Loopback().As16()
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 16},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: lo[:]},
	}
}

// isTCP and isUDP are "the transport protocol is TCP" (UDP).
func isProto(p byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
	}
}

// redirectTo is "redirect to port of the namespace's loopback".
func redirectTo(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.Redir{RegisterProtoMin: 1},
	}
}

func concat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// redirectRules are the namespace's tables, one per family. IPv4: TCP
// to a non-loopback address goes to port4, UDP to port 53 of one to the
// name server, and anything else to a non-loopback address is dropped.
// IPv6: TCP goes to port6 (without it, nothing is redirected), and
// anything else to an address but ::1 is dropped (the name server is
// IPv4's).
func redirectRules(port4, port6 uint16) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	accept := nftables.ChainPolicyAccept
	add := func(family nftables.TableFamily, nat [][]expr.Any, drop []expr.Any) {
		t := c.AddTable(&nftables.Table{Family: family, Name: "agentbox"})
		ch := c.AddChain(&nftables.Chain{Name: "redirect", Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest, Policy: &accept})
		for _, r := range nat {
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: r})
		}
		// After the redirection (a later priority): what still goes
		// to a non-loopback address was not redirected.
		f := c.AddChain(&nftables.Chain{Name: "drop", Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
		c.AddRule(&nftables.Rule{Table: t, Chain: f, Exprs: concat(drop, []expr.Any{&expr.Verdict{Kind: expr.VerdictDrop}})})
	}
	add(nftables.TableFamilyIPv4, [][]expr.Any{
		concat(notLoopback(), isProto(unix.IPPROTO_TCP), redirectTo(port4)),
		concat(notLoopback(), isProto(unix.IPPROTO_UDP), []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(53)},
		}, redirectTo(spec.ResolverAddr.Port())),
	}, notLoopback())
	if port6 != 0 {
		add(nftables.TableFamilyIPv6, [][]expr.Any{
			concat(notLoopback6(), isProto(unix.IPPROTO_TCP), redirectTo(port6)),
		}, notLoopback6())
	}
	return c.Flush()
}

// defaultRouteOverLoopback adds "default dev lo src 127.0.0.1" (or
// "src ::1" for AF_INET6) to the namespace's main table, so that a
// connect to any address leaves (to be redirected) instead of failing
// with ENETUNREACH; the source is loopback's, which the redirected
// connection's peer (the listener on loopback) answers.
func defaultRouteOverLoopback(family int) error {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return os.NewSyscallError("socket(AF_NETLINK)", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return os.NewSyscallError("bind(AF_NETLINK)", err)
	}
	attr := func(typ uint16, data []byte) []byte {
		// struct rtattr (4 bytes), then the data, padded to 4.
		b := make([]byte, (4+len(data)+3)&^3)
		binary.NativeEndian.PutUint16(b[0:], uint16(4+len(data)))
		binary.NativeEndian.PutUint16(b[2:], typ)
		copy(b[4:], data)
		return b
	}
	oif := make([]byte, 4)
	binary.NativeEndian.PutUint32(oif, uint32(lo.Index))
	src := []byte{127, 0, 0, 1}
	if family == unix.AF_INET6 {
		a := netip.IPv6Loopback().As16()
		src = a[:]
	}
	rt := []byte{
		byte(family), 0, 0, 0, // family, dst_len, src_len, tos
		unix.RT_TABLE_MAIN, unix.RTPROT_BOOT, unix.RT_SCOPE_LINK, unix.RTN_UNICAST,
		0, 0, 0, 0, // flags
	}
	if family == unix.AF_INET6 {
		rt[6] = unix.RT_SCOPE_UNIVERSE
	}
	body := append(append(rt, attr(unix.RTA_OIF, oif)...), attr(unix.RTA_PREFSRC, src)...)
	msg := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(unix.NLMSG_HDRLEN+len(body)))
	binary.NativeEndian.PutUint16(msg[4:], unix.RTM_NEWROUTE)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL)
	binary.NativeEndian.PutUint32(msg[8:], 1)
	msg = append(msg, body...)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return os.NewSyscallError("sendto(RTM_NEWROUTE)", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return os.NewSyscallError("recvfrom(netlink)", err)
	}
	if n < unix.NLMSG_HDRLEN+4 || binary.NativeEndian.Uint16(buf[4:]) != unix.NLMSG_ERROR {
		return errors.New("netlink: no acknowledgement of RTM_NEWROUTE")
	}
	if e := int32(binary.NativeEndian.Uint32(buf[unix.NLMSG_HDRLEN:])); e != 0 {
		return os.NewSyscallError("RTM_NEWROUTE", unix.Errno(-e))
	}
	return nil
}

// transparentGate is the connect supervisor's inet policy in transparent
// mode (nil without it): loopback and unspecified addresses, port 53 of
// an IPv4 address (DNS, redirected to the name server, or for TCP to the
// proxy, which decides), fake addresses, and the ranges of the
// allow-list's address patterns pass (the proxy then decides each with
// its port); every other connect is refused before a packet leaves, and
// recorded.
func transparentGate(sp *spec.Spec, unreach *unreachables) func(netip.AddrPort) bool {
	if !sp.Net.Transparent {
		return nil
	}
	carried := append([]netip.Prefix{netproxy.FakePrefix, netproxy.FakePrefix6}, sp.Net.Carried...)
	return func(ap netip.AddrPort) bool {
		a := ap.Addr().Unmap()
		if a.IsLoopback() || a.IsUnspecified() || a.Is4() && ap.Port() == 53 {
			return true
		}
		for _, p := range carried {
			if p.Contains(a) {
				return true
			}
		}
		unreach.refuse(ap, policy.ReasonNotAllowed)
		return false
	}
}
