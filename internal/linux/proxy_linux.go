package linux

import (
	"errors"
	"fmt"
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

// proxySocket is agentbox's end of the socketpair the listeners arrive on
// (nil when the spec has no proxy).
type proxySocket struct {
	parent, child *os.File
}

// prepareProxy adds the child end of a fresh socketpair to cmd's inherited
// files and names its fd in the spec.
func prepareProxy(spec *Spec, cmd *exec.Cmd) (*proxySocket, error) {
	if !spec.Proxy {
		return nil, nil
	}
	if spec.Degraded || spec.Network {
		return nil, errors.New("the allow-list proxy needs the sandbox's own network namespace")
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, &os.SyscallError{Syscall: "socketpair", Err: err}
	}
	s := &proxySocket{parent: os.NewFile(uintptr(fds[0]), "proxy-parent"), child: os.NewFile(uintptr(fds[1]), "proxy-child")}
	cmd.ExtraFiles = append(cmd.ExtraFiles, s.child)
	spec.ProxyFD = 3 + len(cmd.ExtraFiles) - 1
	return s, nil
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

// receive reads the two listening sockets the init stage sent: the HTTP
// proxy's, then the SOCKS5 proxy's.
func (s *proxySocket) receive() ([]net.Listener, error) {
	c, err := net.FileConn(s.parent)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("proxy socket is a %T", c)
	}
	uc.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(2*4))
	_, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, err
	}
	return listenersOf(parseRights(oob[:oobn]))
}

// ProxyListeners returns the HTTP and SOCKS5 proxy listeners on the
// sandbox's loopback (nil without Spec.Proxy). The caller serves them and
// closes them when the process is gone.
func (p *Process) ProxyListeners() []net.Listener { return p.proxy }

// setupProxy runs in the init stage: with a network namespace it makes
// the listeners ([proxyListeners]); in degraded mode the host-loopback
// proxy is already listening. It returns the addresses (HTTP, then SOCKS5)
// the command's proxy variables must point at, nil without a proxy.
func setupProxy(spec *Spec) ([]string, error) {
	switch {
	case spec.Proxy && spec.Session:
		// A session's zygote makes listeners for each command instead
		// (commandListeners), so that each command's decisions are its
		// own.
		return nil, nil
	case spec.Proxy:
		addrs, err := proxyListeners(spec)
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

// withProxyEnv points env's proxy variables at addrs (from setupProxy).
func withProxyEnv(env, addrs []string) []string {
	if len(addrs) != 2 {
		return env
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
// with loopback up: it listens on 127.0.0.1 twice, sends both sockets to
// agentbox and closes its own copies (the command must not accept on
// them), and returns their addresses (HTTP, then SOCKS5).
func proxyListeners(spec *Spec) ([]string, error) {
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
	for range 2 {
		fd, port, err := listenLoopback()
		if err != nil {
			return nil, err
		}
		fds = append(fds, fd)
		ports = append(ports, port)
	}
	if err := unix.Sendmsg(int(sock.Fd()), []byte{1}, unix.UnixRights(fds...), nil, 0); err != nil {
		return nil, &os.SyscallError{Syscall: "sendmsg(SCM_RIGHTS)", Err: err}
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
			closeAll(fds)
			return nil, nil, err
		}
		fds = append(fds, fd)
		ports = append(ports, port)
	}
	return fds, ports, nil
}

// listenersOf turns the two descriptors the sandbox sent (a lone run's
// init, or a session's zygote with a command's start) into the proxy's
// listeners; it closes them all on failure.
func listenersOf(fds []int) ([]net.Listener, error) {
	if len(fds) != 2 {
		closeAll(fds)
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
			closeAll(fds[i+1:])
			return nil, err
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// listenLoopback opens a TCP listener on 127.0.0.1 with a port of the
// kernel's choosing. Not SO_REUSEPORT: nobody else may bind the port.
func listenLoopback() (int, int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, 0, &os.SyscallError{Syscall: "socket", Err: err}
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return -1, 0, &os.SyscallError{Syscall: "bind(127.0.0.1)", Err: err}
	}
	if err := unix.Listen(fd, 256); err != nil {
		unix.Close(fd)
		return -1, 0, &os.SyscallError{Syscall: "listen", Err: err}
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return -1, 0, &os.SyscallError{Syscall: "getsockname", Err: err}
	}
	in, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		unix.Close(fd)
		return -1, 0, errors.New("getsockname: not an IPv4 address")
	}
	return fd, in.Port, nil
}
