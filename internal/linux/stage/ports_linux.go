package stage

import (
	"errors"
	"fmt"
	"net/netip"
	"os"

	"github.com/agentbox/agentbox/internal/linux/scm"
	"github.com/agentbox/agentbox/internal/linux/spec"

	"golang.org/x/sys/unix"
)

// The stage's side of the host ports and published ports: the listeners
// made inside the sandbox and its socket factory (agentbox's side, and
// the design, are in ports_linux.go).

// setupPorts runs in the init stage (a session's zygote), inside the
// network namespace with loopback up: it makes the host ports' listeners
// and sends them to agentbox; with published ports it then serves the
// socket factory for the sandbox's life, else it closes the socketpair.
func setupPorts(sp *spec.Spec) error {
	if sp.Net.PortsFD == 0 {
		return nil
	}
	var fds []int
	defer func() { scm.CloseAll(fds) }()
	for _, port := range sp.Net.HostPorts {
		fd, err := listenAt(unix.AF_INET, netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port))
		if err != nil {
			return fmt.Errorf("the host port's listener on the sandbox's 127.0.0.1:%d: %w", port, err)
		}
		fds = append(fds, fd)
		fd, err = listenAt(unix.AF_INET6, netip.AddrPortFrom(netip.IPv6Loopback(), port))
		switch {
		case errors.Is(err, unix.EAFNOSUPPORT) || errors.Is(err, unix.EADDRNOTAVAIL):
			// No IPv6 here: nothing in the sandbox can connect to
			// [::1] either.
		case err != nil:
			return fmt.Errorf("the host port's listener on the sandbox's [::1]:%d: %w", port, err)
		default:
			fds = append(fds, fd)
		}
	}
	var rights []byte
	if len(fds) > 0 {
		rights = unix.UnixRights(fds...)
	}
	if err := unix.Sendmsg(sp.Net.PortsFD, []byte{1}, rights, nil, 0); err != nil {
		return &os.SyscallError{Syscall: "sendmsg(SCM_RIGHTS)", Err: err}
	}
	if !sp.Net.Publish {
		unix.Close(sp.Net.PortsFD)
		return nil
	}
	go serveSocketFactory(sp.Net.PortsFD)
	return nil
}

// serveSocketFactory answers each request on fd with a new TCP socket of
// this network namespace (or, when none can be made, the errno), until
// agentbox closes its end.
func serveSocketFactory(fd int) {
	defer unix.Close(fd)
	buf := make([]byte, 1)
	for {
		n, _, _, _, err := unix.Recvmsg(fd, buf, nil, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			return
		}
		s, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
		if err != nil {
			errno, _ := err.(unix.Errno)
			if errno == 0 || errno > 255 {
				errno = unix.EIO
			}
			unix.Sendmsg(fd, []byte{byte(errno)}, nil, nil, 0)
			continue
		}
		err = unix.Sendmsg(fd, []byte{0}, unix.UnixRights(s), nil, 0)
		unix.Close(s)
		if err != nil {
			return
		}
	}
}

// listenAt opens a TCP listener at ap (IPv6 only, for an IPv6 address).
// Not SO_REUSEADDR: the command must not bind the same port beside it.
func listenAt(family int, ap netip.AddrPort) (int, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, &os.SyscallError{Syscall: "socket", Err: err}
	}
	var sa unix.Sockaddr
	if family == unix.AF_INET6 {
		unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1)
		sa = &unix.SockaddrInet6{Addr: ap.Addr().As16(), Port: int(ap.Port())}
	} else {
		sa = &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, &os.SyscallError{Syscall: "bind", Err: err}
	}
	if err := unix.Listen(fd, 256); err != nil {
		unix.Close(fd)
		return -1, &os.SyscallError{Syscall: "listen", Err: err}
	}
	return fd, nil
}
