package linux

import (
	"errors"
	"fmt"
	"github.com/agentbox/agentbox/internal/linux/scm"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"net"
	"os"
	"os/exec"
	"time"

	"golang.org/x/sys/unix"
)

// The allow-list proxy runs in agentbox, outside the sandbox, but must be
// reachable from inside a network namespace that has only loopback. The
// init stage creates the listening sockets on the sandbox's 127.0.0.1
// and passes them to agentbox with SCM_RIGHTS over an inherited
// socketpair; agentbox accepts on them from the host side. No filesystem
// socket is bound anywhere, and nothing listens on the host's loopback.

// The name server's sockets (Spec.Net.Resolver) travel the same way, after
// the proxy's listeners, and then the transparent listeners
// (Spec.Net.Transparent, transparent_linux.go).

// proxySocket is agentbox's end of the socketpair the listeners arrive on
// (nil when the spec has neither proxy nor name server).
type proxySocket struct {
	parent, child *os.File
}

// prepareHandover adds the child end of a fresh socketpair for the
// proxy's and name server's handover to cmd's inherited files and names its
// fd in the spec.
func prepareHandover(sp *spec.Spec, cmd *exec.Cmd) (*proxySocket, error) {
	if sp.Degraded.On || sp.Net.Network {
		return nil, errors.New("the sandbox's proxy and name server need the sandbox's own network namespace")
	}
	s, fd, err := inheritSocketpair(cmd, unix.SOCK_STREAM, "proxy")
	if err != nil {
		return nil, err
	}
	sp.Net.ProxyFD = fd
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

// readMsg reads the one message the stage sends on s: its bytes into
// buf, and up to maxFDs descriptors. The stage answers at once; ten
// seconds is one that will not. The caller closes uc, or keeps it.
func (s *proxySocket) readMsg(buf []byte, maxFDs int) (uc *net.UnixConn, n int, fds []int, err error) {
	c, err := net.FileConn(s.parent)
	if err != nil {
		return nil, 0, nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, 0, nil, fmt.Errorf("%s is a %T", s.parent.Name(), c)
	}
	uc.SetReadDeadline(time.Now().Add(10 * time.Second))
	oob := make([]byte, unix.CmsgSpace(maxFDs*4))
	n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil {
		uc.Close()
		return nil, 0, nil, err
	}
	return uc, n, scm.Rights(oob[:oobn]), nil
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
	buf := make([]byte, 1+spec.MaxHandoverText)
	uc, n, fds, err := s.readMsg(buf, 6)
	if err != nil {
		return nil, nil, err
	}
	uc.Close()
	var noTransparent string
	if n > 0 && buf[0] == spec.HandoverNoTransparent && transparent {
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
// sandbox's loopback (nil without Spec.Net.Proxy). The caller serves them and
// closes them when the process is gone.
func (p *Process) ProxyListeners() []net.Listener { return p.proxy }

// Resolver returns the name server's sockets on the sandbox's loopback
// (nil without Spec.Net.Resolver). The caller serves them and closes them
// when the process is gone.
func (p *Process) Resolver() *Resolver { return p.resolver }

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
