package linux

import (
	"fmt"
	"github.com/agentbox/agentbox/internal/linux/scm"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"net"
	"os"
)

// The sandbox's name server (Spec.Net.Resolver) is agentbox's, served from
// outside like the proxy: its sockets are bound in the sandbox's network
// namespace, on the address its /etc/resolv.conf names, and handed over.
// Port 53 needs CAP_NET_BIND_SERVICE, which the init stage (or the
// session's zygote) holds in its user namespace until it drops them all.

// Resolver is the name server's sockets on the sandbox's loopback, as
// agentbox serves them.
type Resolver struct {
	UDP net.PacketConn
	TCP net.Listener
	// Transparent, with Spec.Net.Transparent, are the listeners the
	// sandbox's TCP connections to other addresses are redirected to
	// (see transparent_linux.go): IPv4's, then IPv6's where the sandbox
	// has IPv6. The caller serves them with the proxy.
	Transparent []net.Listener
	// NoTransparent, when Spec.Net.Transparent was asked for and the
	// sandbox could not have it, says why (TransparentUnavailable).
	NoTransparent string
}

// Close closes the sockets.
func (r *Resolver) Close() {
	if r != nil {
		r.UDP.Close()
		r.TCP.Close()
		for _, l := range r.Transparent {
			l.Close()
		}
	}
}

// resolverOf turns the name server's two descriptors (UDP, then TCP) into
// their Go forms; it closes them all.
func resolverOf(fds []int) (*Resolver, error) {
	if len(fds) != 2 {
		scm.CloseAll(fds)
		return nil, fmt.Errorf("got %d name server sockets, want 2", len(fds))
	}
	uf, tf := os.NewFile(uintptr(fds[0]), "resolver-udp"), os.NewFile(uintptr(fds[1]), "resolver-tcp")
	defer uf.Close()
	defer tf.Close()
	pc, err := net.FilePacketConn(uf)
	if err != nil {
		return nil, err
	}
	ln, err := net.FileListener(tf)
	if err != nil {
		pc.Close()
		return nil, err
	}
	return &Resolver{UDP: pc, TCP: ln}, nil
}

// Unreachable is what the command's connects could not reach (with
// Spec.Net.Resolver); set by Wait.
func (p *Process) Unreachable() []spec.Unreachable { return p.unreachable }
