package linux

import (
	"errors"
	"fmt"
	"github.com/agentbox/agentbox/internal/linux/scm"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"net"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Published ports and host ports cross the network namespace's boundary
// the way the proxy's listeners do (proxy_linux.go): only sockets made
// inside the namespace travel, over a socketpair of their own, and
// nothing inside the sandbox ever holds a socket of the host's network.
//
//   - A host port (Spec.Net.HostPorts): the init stage (a session's zygote,
//     once) listens on the sandbox's 127.0.0.1:PORT and [::1]:PORT and
//     hands the listeners to agentbox, which accepts on them and connects
//     each connection to the host's same address and port, and nowhere
//     else.
//   - A published port (Spec.Net.Publish): a socket's network namespace is
//     the one it was made in, and agentbox cannot enter the sandbox's
//     (setns needs CAP_SYS_ADMIN in agentbox's own user namespace). So
//     the init stage keeps the socketpair open as a socket factory: for
//     each request agentbox sends, it answers with a new unconnected TCP
//     socket of the sandbox's namespace, which agentbox itself connects
//     to the sandbox's 127.0.0.1:INNER for a connection it accepted on
//     the host's 127.0.0.1:PORT. The factory makes sockets and nothing
//     else: it connects nowhere, and what a socket reaches is decided
//     outside the sandbox.

// preparePorts adds the child end of a fresh socketpair to cmd's
// inherited files and names its fd in sp, when sp has host ports or
// published ports; nil otherwise. A socketpair of its own, apart from
// the proxy's: it outlives the handover as the socket factory's.
func preparePorts(sp *spec.Spec, cmd *exec.Cmd) (*proxySocket, error) {
	if len(sp.Net.HostPorts) == 0 && !sp.Net.Publish {
		return nil, nil
	}
	if sp.Degraded.On || sp.Net.Network {
		return nil, errors.New("published ports and host ports need the sandbox's own network namespace")
	}
	s, fd, err := inheritSocketpair(cmd, unix.SOCK_SEQPACKET, "ports")
	if err != nil {
		return nil, err
	}
	sp.Net.PortsFD = fd
	return s, nil
}

// receivePorts reads the host ports' listeners the sandbox sent on s
// (from preparePorts), and with publish keeps agentbox's end as the way
// to the socket factory.
func receivePorts(s *proxySocket, sp *spec.Spec) (*Ports, error) {
	if s == nil {
		return nil, nil
	}
	uc, _, fds, err := s.readMsg(make([]byte, 1), 2*len(sp.Net.HostPorts))
	if err != nil {
		return nil, err
	}
	p := &Ports{}
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "host-port-listener")
		ln, err := net.FileListener(f)
		f.Close()
		if err == nil {
			err = checkHostPortListener(ln, sp.Net.HostPorts)
		}
		if err != nil {
			if ln != nil {
				ln.Close()
			}
			scm.CloseAll(fds[i+1:])
			p.Close()
			uc.Close()
			return nil, fmt.Errorf("host port listener: %w", err)
		}
		p.Listeners = append(p.Listeners, ln)
	}
	if len(p.Listeners) < len(sp.Net.HostPorts) {
		p.Close()
		uc.Close()
		return nil, fmt.Errorf("got %d host port listeners for %d ports", len(p.Listeners), len(sp.Net.HostPorts))
	}
	if sp.Net.Publish {
		uc.SetReadDeadline(time.Time{})
		p.factory = uc
	} else {
		uc.Close()
	}
	return p, nil
}

// checkHostPortListener makes sure a listener the sandbox sent is one of
// those asked for: on loopback, at one of ports.
func checkHostPortListener(ln net.Listener, ports []uint16) error {
	a, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return fmt.Errorf("not a TCP listener: %v", ln.Addr())
	}
	ap := a.AddrPort()
	if !ap.Addr().Unmap().IsLoopback() || !slices.Contains(ports, ap.Port()) {
		return fmt.Errorf("unexpected address %v", ap)
	}
	return nil
}

// Ports is what a sandbox with host ports or published ports handed
// agentbox: the listeners of its host ports, and the socket factory of
// its published ports.
type Ports struct {
	// Listeners are on the sandbox's 127.0.0.1 and [::1], at the host
	// ports; the caller accepts on them and connects each connection
	// to the host's loopback at the listener's own address.
	Listeners []net.Listener

	mu      sync.Mutex    // one socket request at a time
	factory *net.UnixConn // nil without published ports; set once
}

// Close closes the listeners and the way to the factory.
func (p *Ports) Close() {
	if p == nil {
		return
	}
	for _, ln := range p.Listeners {
		ln.Close()
	}
	// Not under mu: a socket request may hold it, waiting for the
	// factory, and closing is what ends that wait.
	if p.factory != nil {
		p.factory.Close()
	}
}

// dialTimeout bounds a connect into the sandbox: the command's listener
// may have a full backlog, or none.
const dialTimeout = 10 * time.Second

// DialInner connects to the sandbox's 127.0.0.1:port with a socket made
// inside the sandbox's network namespace.
func (p *Ports) DialInner(port uint16) (net.Conn, error) {
	fd, err := p.socket()
	if err != nil {
		return nil, fmt.Errorf("a socket of the sandbox's network: %w", err)
	}
	return connectInner(fd, port)
}

// socket asks the factory for one TCP socket of the sandbox's network
// namespace, and checks that it is one.
func (p *Ports) socket() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.factory == nil {
		return -1, errors.New("the sandbox has no published ports, or has ended")
	}
	p.factory.SetDeadline(time.Now().Add(dialTimeout))
	if _, err := p.factory.Write([]byte{1}); err != nil {
		return -1, err
	}
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := p.factory.ReadMsgUnix(buf, oob)
	if err != nil {
		return -1, err
	}
	fds := scm.Rights(oob[:oobn])
	if n != 1 || len(fds) != 1 {
		scm.CloseAll(fds)
		if n == 1 && buf[0] != 0 {
			return -1, unix.Errno(buf[0])
		}
		return -1, errors.New("the sandbox sent no socket")
	}
	fd := fds[0]
	// It must be an unconnected TCP socket: whatever else it were (a
	// unix socket, a file), agentbox would not be connecting it where
	// it means to.
	for _, c := range []struct{ opt, want int }{{unix.SO_DOMAIN, unix.AF_INET}, {unix.SO_TYPE, unix.SOCK_STREAM}, {unix.SO_PROTOCOL, unix.IPPROTO_TCP}} {
		if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, c.opt); err != nil || v != c.want {
			unix.Close(fd)
			return -1, fmt.Errorf("the sandbox sent a socket that is not an IPv4 TCP socket (option %d = %d, %v)", c.opt, v, err)
		}
	}
	if _, err := unix.Getpeername(fd); err == nil {
		unix.Close(fd)
		return -1, errors.New("the sandbox sent a connected socket")
	}
	return fd, nil
}

// connectInner connects fd, a socket of the sandbox's network
// namespace, to its 127.0.0.1:port, within dialTimeout.
func connectInner(fd int, port uint16) (net.Conn, error) {
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "inner")
	defer f.Close()
	err := unix.Connect(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: int(port)})
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		return nil, &os.SyscallError{Syscall: "connect", Err: err}
	}
	if err != nil {
		rc, err := f.SyscallConn()
		if err != nil {
			return nil, err
		}
		f.SetWriteDeadline(time.Now().Add(dialTimeout))
		var soerr int
		werr := rc.Write(func(fd uintptr) bool {
			soerr, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
			if err != nil {
				return true
			}
			// Still connecting: wait for writability.
			_, perr := unix.Getpeername(int(fd))
			return soerr != 0 || perr == nil
		})
		switch {
		case werr != nil:
			return nil, fmt.Errorf("connect: %w", werr)
		case err != nil:
			return nil, err
		case soerr != 0:
			return nil, &os.SyscallError{Syscall: "connect", Err: unix.Errno(soerr)}
		}
	}
	return net.FileConn(f)
}

// Ports returns what the sandbox handed over for Spec.Net.HostPorts and
// Spec.Net.Publish (nil without them). The caller serves it and closes it
// when the process is gone.
func (p *Process) Ports() *Ports { return p.ports }

// closeHandover closes what the proxy's socketpair brought, for a start
// that fails after it.
func closeHandover(lns []net.Listener, r *Resolver) ([]net.Listener, *Resolver) {
	for _, ln := range lns {
		ln.Close()
	}
	r.Close()
	return nil, nil
}
