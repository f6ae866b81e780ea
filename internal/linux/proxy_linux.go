package linux

import (
	"errors"
	"fmt"
	"github.com/agentbox/agentbox/internal/linux/scm"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"time"

	"github.com/agentbox/agentbox/internal/netproxy"
	"golang.org/x/sys/unix"
)

// The allow-list proxy runs in agentbox, outside the sandbox, but must be
// reachable from inside a network namespace that has only loopback. The
// init stage creates the listening sockets on the sandbox's 127.0.0.1
// and passes them to agentbox with SCM_RIGHTS over an inherited
// socketpair; agentbox accepts on them from the host side. No filesystem
// socket is bound anywhere, and nothing listens on the host's loopback.

// The name server's sockets (Spec.Resolver) travel the same way, after
// the proxy's listeners, and then the transparent listeners
// (Spec.Transparent, transparent_linux.go).

// proxySocket is agentbox's end of the socketpair the listeners arrive on
// (nil when the spec has neither proxy nor name server).
type proxySocket struct {
	parent, child *os.File
}

// prepareProxy adds the child end of a fresh socketpair to cmd's inherited
// files and names its fd in the spec.
func prepareProxy(spec *Spec, cmd *exec.Cmd) (*proxySocket, error) {
	if !spec.Proxy && !spec.Resolver {
		return nil, nil
	}
	return prepareHandover(spec, cmd)
}

// prepareHandover is prepareProxy's socketpair, made whatever the spec.
func prepareHandover(spec *Spec, cmd *exec.Cmd) (*proxySocket, error) {
	if spec.Degraded || spec.Network {
		return nil, errors.New("the sandbox's proxy and name server need the sandbox's own network namespace")
	}
	s, fd, err := inheritSocketpair(cmd, unix.SOCK_STREAM, "proxy")
	if err != nil {
		return nil, err
	}
	spec.ProxyFD = fd
	return s, nil
}

// inheritSocketpair makes a socketpair of typ and adds its child end to
// cmd's inherited files; fd is the child end's number in the stage.
func inheritSocketpair(cmd *exec.Cmd, typ int, name string) (s *proxySocket, fd int, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, 0, &os.SyscallError{Syscall: "socketpair", Err: err}
	}
	s = &proxySocket{parent: os.NewFile(uintptr(fds[0]), name+"-parent"), child: os.NewFile(uintptr(fds[1]), name+"-child")}
	cmd.ExtraFiles = append(cmd.ExtraFiles, s.child)
	return s, 3 + len(cmd.ExtraFiles) - 1, nil
}

func (s *proxySocket) closeChildEnd() {
	if s != nil && s.child != nil {
		s.child.Close()
		s.child = nil
	}
}

// Close closes agentbox's end (the listeners received stay open).
func (s *proxySocket) Close() {
	if s == nil {
		return
	}
	s.closeChildEnd()
	if s.parent != nil {
		s.parent.Close()
		s.parent = nil
	}
}

// receive reads the sockets the init stage (or a session's zygote) sent:
// with proxy, the HTTP proxy's and the SOCKS5 proxy's listeners; with
// resolver, then the name server's UDP socket and TCP listener; with
// transparent (and resolver), then the transparent listener, which
// becomes the Resolver's Transparent.
func (s *proxySocket) receive(proxy, resolver, transparent bool) ([]net.Listener, *Resolver, error) {
	c, err := net.FileConn(s.parent)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, nil, fmt.Errorf("proxy socket is a %T", c)
	}
	uc.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1+maxHandoverText)
	oob := make([]byte, unix.CmsgSpace(6*4))
	n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, nil, err
	}
	fds := scm.Rights(oob[:oobn])
	var noTransparent string
	if n > 0 && buf[0] == handoverNoTransparent && transparent {
		noTransparent, transparent = string(buf[1:n]), false
	}
	want := 0
	if proxy {
		want += 2
	}
	if resolver {
		want += 2
	}
	// The transparent listeners: IPv4's, and IPv6's where the sandbox
	// has IPv6.
	transparent = transparent && resolver
	nt := 0
	if transparent {
		nt = len(fds) - want
		if nt < 1 || nt > 2 {
			nt = 1
		}
		want += nt
	}
	if len(fds) != want {
		scm.CloseAll(fds)
		return nil, nil, fmt.Errorf("got %d descriptors, want %d", len(fds), want)
	}
	var tls []net.Listener
	for i, fd := range fds[len(fds)-nt:] {
		f := os.NewFile(uintptr(fd), "transparent-listener")
		tl, err := net.FileListener(f)
		f.Close()
		if err != nil {
			for _, l := range tls {
				l.Close()
			}
			scm.CloseAll(fds[len(fds)-nt+i+1:])
			scm.CloseAll(fds[:len(fds)-nt])
			return nil, nil, err
		}
		tls = append(tls, tl)
	}
	fds = fds[:len(fds)-nt]
	var r *Resolver
	if resolver {
		if r, err = resolverOf(fds[len(fds)-2:]); err != nil {
			scm.CloseAll(fds[:len(fds)-2])
			for _, l := range tls {
				l.Close()
			}
			return nil, nil, err
		}
		r.Transparent, r.NoTransparent = tls, noTransparent
		fds = fds[:len(fds)-2]
	}
	if !proxy {
		return nil, r, nil
	}
	lns, err := listenersOf(fds)
	if err != nil {
		r.Close()
		return nil, nil, err
	}
	return lns, r, nil
}

// ProxyListeners returns the HTTP and SOCKS5 proxy listeners on the
// sandbox's loopback (nil without Spec.Proxy). The caller serves them and
// closes them when the process is gone.
func (p *Process) ProxyListeners() []net.Listener { return p.proxy }

// Resolver returns the name server's sockets on the sandbox's loopback
// (nil without Spec.Resolver). The caller serves them and closes them
// when the process is gone.
func (p *Process) Resolver() *Resolver { return p.resolver }

// setupProxy runs in the init stage: with a network namespace it makes
// the listeners and the name server's sockets and hands them over
// ([proxyListeners]); in degraded mode the host-loopback proxy is already
// listening. It returns the addresses (HTTP, then SOCKS5) the command's
// proxy variables must point at, nil without a proxy.
func setupProxy(spec *Spec) ([]string, error) {
	switch {
	case spec.Resolver || spec.Proxy && !spec.Session:
		// A session's zygote makes an allow-list's proxy listeners
		// for each command instead (commandListeners), so that each
		// command's decisions are its own. The refusing proxy of a
		// session without network, like its name server, is the
		// session's: agentbox tells the commands apart by their
		// sockets' ports (PortOwners), which costs a command nothing.
		addrs, err := proxyListeners(spec, spec.Proxy && (!spec.Session || spec.ProxyOff))
		if err != nil {
			return nil, fmt.Errorf("listeners on the sandbox's loopback: %w", err)
		}
		return addrs, nil
	case len(spec.ProxyAddrs) > 0:
		if len(spec.ProxyAddrs) != 2 || !spec.MediateUnixConnect {
			return nil, errors.New("degraded allow-list needs two proxy addresses and connect mediation")
		}
		return spec.ProxyAddrs, nil
	}
	return nil, nil
}

// withProxyEnv points env's proxy variables at addrs (from setupProxy):
// all of them for an allow-list's proxy, the conventional ones for the
// refusing proxy of a sandbox without network.
func withProxyEnv(env, addrs []string, spec *Spec) []string {
	if len(addrs) != 2 {
		return env
	}
	if spec.ProxyOff {
		return netproxy.MergeEnv(env, netproxy.OffEnv(addrs[0], addrs[1], spec.LocalNames))
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
// Spec.Resolver it binds the name server's sockets; it sends them all to
// agentbox and closes its own copies (the command must not accept on
// them), and returns the proxy's addresses (HTTP, then SOCKS5).
func proxyListeners(spec *Spec, proxy bool) ([]string, error) {
	sock := os.NewFile(uintptr(spec.ProxyFD), "proxy")
	if sock == nil {
		return nil, fmt.Errorf("no proxy socket at fd %d", spec.ProxyFD)
	}
	defer sock.Close()
	var fds, ports []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	msg := []byte{handoverOK}
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
	if spec.Resolver {
		udp, tcp, err := listenResolver()
		if err != nil {
			return nil, fmt.Errorf("the name server's sockets on 127.0.0.1:53: %w", err)
		}
		fds = append(fds, udp, tcp)
		if spec.Transparent {
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
				msg = append([]byte{handoverNoTransparent}, truncate(un.Error(), maxHandoverText)...)
				spec.Transparent = false
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

// The first byte of the handover message: the sockets are all there, or
// (then followed by why, at most maxHandoverText bytes) the transparent
// listener is not, because transparent networking is unavailable.
const (
	handoverOK            = 1
	handoverNoTransparent = 2
	maxHandoverText       = 400
)

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// listenersOf turns the two descriptors the sandbox sent (a lone run's
// init, or a session's zygote with a command's start) into the proxy's
// listeners; it closes them all on failure.
func listenersOf(fds []int) ([]net.Listener, error) {
	if len(fds) != 2 {
		scm.CloseAll(fds)
		return nil, fmt.Errorf("got %d descriptors, want 2", len(fds))
	}
	var lns []net.Listener
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "proxy-listener")
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			scm.CloseAll(fds[i+1:])
			return nil, err
		}
		lns = append(lns, ln)
	}
	return lns, nil
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
