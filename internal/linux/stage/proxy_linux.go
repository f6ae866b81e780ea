package stage

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"

	"github.com/agentbox/agentbox/internal/linux/scm"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/internal/netproxy"

	"golang.org/x/sys/unix"
)

// The stage's side of the proxy's handover: the listeners and the name
// server's sockets made inside the sandbox and sent to agentbox, and the
// command's proxy variables (agentbox's side is in proxy_linux.go).

// setupProxy runs in the init stage: with a network namespace it makes
// the listeners and the name server's sockets and hands them over
// ([proxyListeners]); in degraded mode the host-loopback proxy is already
// listening. It returns the addresses (HTTP, then SOCKS5) the command's
// proxy variables must point at, nil without a proxy.
func setupProxy(sp *spec.Spec) ([]string, error) {
	switch {
	case sp.Net.Resolver || sp.Net.Proxy && !sp.Session.On:
		// A session's zygote makes an allow-list's proxy listeners
		// for each command instead (commandListeners), so that each
		// command's decisions are its own. The refusing proxy of a
		// session without network, like its name server, is the
		// session's: agentbox tells the commands apart by their
		// sockets' ports (PortOwners), which costs a command nothing.
		addrs, err := proxyListeners(sp, sp.Net.Proxy && (!sp.Session.On || sp.Net.ProxyOff))
		if err != nil {
			return nil, fmt.Errorf("listeners on the sandbox's loopback: %w", err)
		}
		return addrs, nil
	case len(sp.Degraded.ProxyAddrs) > 0:
		if len(sp.Degraded.ProxyAddrs) != 2 || !sp.Walls.MediateUnixConnect {
			return nil, errors.New("degraded allow-list needs two proxy addresses and connect mediation")
		}
		return sp.Degraded.ProxyAddrs, nil
	}
	return nil, nil
}

// withProxyEnv points env's proxy variables at addrs (from setupProxy):
// all of them for an allow-list's proxy, the conventional ones for the
// refusing proxy of a sandbox without network.
func withProxyEnv(env, addrs []string, sp *spec.Spec) []string {
	if len(addrs) != 2 {
		return env
	}
	if sp.Net.ProxyOff {
		return netproxy.MergeEnv(env, netproxy.OffEnv(addrs[0], addrs[1], sp.Net.LocalNames))
	}
	return netproxy.MergeEnv(env, netproxy.Env(addrs[0], addrs[1], netproxy.Lookup(env, "JAVA_TOOL_OPTIONS")))
}

// proxyOnly is the connect supervisor's inet policy in degraded
// allow-list mode: the proxy's addresses and nothing else. nil (no inet
// policy) without proxy addresses.
func proxyOnly(addrs []string) func(netip.AddrPort) bool {
	if len(addrs) == 0 {
		return nil
	}
	var ok []netip.AddrPort
	for _, a := range addrs {
		if ap, err := netip.ParseAddrPort(a); err == nil {
			ok = append(ok, ap)
		}
	}
	return func(ap netip.AddrPort) bool {
		return slices.Contains(ok, ap)
	}
}

// proxyListeners runs in the init stage, inside the network namespace
// with loopback up: with proxy it listens on 127.0.0.1 twice, with
// Spec.Net.Resolver it binds the name server's sockets; it sends them all to
// agentbox and closes its own copies (the command must not accept on
// them), and returns the proxy's addresses (HTTP, then SOCKS5).
func proxyListeners(sp *spec.Spec, proxy bool) ([]string, error) {
	sock := os.NewFile(uintptr(sp.Net.ProxyFD), "proxy")
	if sock == nil {
		return nil, fmt.Errorf("no proxy socket at fd %d", sp.Net.ProxyFD)
	}
	defer sock.Close()
	var fds, ports []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	msg := []byte{spec.HandoverOK}
	for range 2 {
		if !proxy {
			break
		}
		fd, port, err := listenLoopback()
		if err != nil {
			return nil, err
		}
		fds = append(fds, fd)
		ports = append(ports, port)
	}
	if sp.Net.Resolver {
		udp, tcp, err := listenResolver()
		if err != nil {
			return nil, fmt.Errorf("the name server's sockets on 127.0.0.1:53: %w", err)
		}
		fds = append(fds, udp, tcp)
		if sp.Net.Transparent {
			fd, port, err := listenLoopback()
			if err != nil {
				return nil, err
			}
			// IPv6 is carried where the namespace has ::1 (not
			// with IPv6 disabled).
			fd6, port6, err := listenLoopback6()
			if err != nil {
				fd6, port6 = -1, 0
			}
			closeBoth := func() {
				unix.Close(fd)
				if fd6 >= 0 {
					unix.Close(fd6)
				}
			}
			var un *TransparentUnavailable
			v6, err := transparentUp(port, port6)
			if !v6 && fd6 >= 0 {
				unix.Close(fd6)
				fd6 = -1
			}
			switch {
			case errors.As(err, &un):
				// Said to agentbox in the message; the sandbox
				// goes on without (spec is what the connect
				// supervisor reads next).
				closeBoth()
				msg = append([]byte{spec.HandoverNoTransparent}, truncate(un.Error(), spec.MaxHandoverText)...)
				sp.Net.Transparent = false
			case err != nil:
				closeBoth()
				return nil, err
			default:
				fds = append(fds, fd)
				if fd6 >= 0 {
					fds = append(fds, fd6)
				}
			}
		}
	}
	if err := unix.Sendmsg(int(sock.Fd()), msg, unix.UnixRights(fds...), nil, 0); err != nil {
		return nil, &os.SyscallError{Syscall: "sendmsg(SCM_RIGHTS)", Err: err}
	}
	if !proxy {
		return nil, nil
	}
	return loopbackAddrs(ports), nil
}

// loopbackAddrs are the addresses of listeners on the sandbox's 127.0.0.1
// at ports (HTTP, then SOCKS5), for withProxyEnv.
func loopbackAddrs(ports []int) []string {
	return []string{"127.0.0.1:" + strconv.Itoa(ports[0]), "127.0.0.1:" + strconv.Itoa(ports[1])}
}

// commandListeners runs in a session's zygote, in the session's network
// namespace, for each command of a session with an allow-list: two
// listeners on 127.0.0.1 (HTTP, then SOCKS5) that agentbox serves for
// that command alone, recording its decisions apart from those of the
// session's other commands. The command's proxy variables name their
// ports. Commands of one session share the namespace, so a command can
// reach another's listeners; its requests are then counted in the other's
// report, under the same policy.
func commandListeners() (fds, ports []int, err error) {
	for range 2 {
		fd, port, err := listenLoopback()
		if err != nil {
			scm.CloseAll(fds)
			return nil, nil, err
		}
		fds = append(fds, fd)
		ports = append(ports, port)
	}
	return fds, ports, nil
}

// listenLoopback6 is listenLoopback on ::1 (IPv6 only).
func listenLoopback6() (int, int, error) {
	return listenTCP(unix.AF_INET6, &unix.SockaddrInet6{Addr: netip.IPv6Loopback().As16()}, "::1")
}

// listenLoopback opens a TCP listener on 127.0.0.1 with a port of the
// kernel's choosing. Not SO_REUSEPORT: nobody else may bind the port.
func listenLoopback() (int, int, error) {
	return listenTCP(unix.AF_INET, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}, "127.0.0.1")
}

// listenTCP opens a TCP listener of family at addr (port 0: the
// kernel's choice; an AF_INET6 one IPv6 only) and returns it with its
// port.
func listenTCP(family int, addr unix.Sockaddr, name string) (int, int, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, 0, &os.SyscallError{Syscall: "socket", Err: err}
	}
	fail := func(call string, err error) (int, int, error) {
		unix.Close(fd)
		return -1, 0, &os.SyscallError{Syscall: call, Err: err}
	}
	if family == unix.AF_INET6 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			return fail("setsockopt(IPV6_V6ONLY)", err)
		}
	}
	if err := unix.Bind(fd, addr); err != nil {
		return fail("bind("+name+")", err)
	}
	if err := unix.Listen(fd, 256); err != nil {
		return fail("listen", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fail("getsockname", err)
	}
	switch in := sa.(type) {
	case *unix.SockaddrInet4:
		return fd, in.Port, nil
	case *unix.SockaddrInet6:
		return fd, in.Port, nil
	}
	unix.Close(fd)
	return -1, 0, errors.New("getsockname: not an IP address")
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
