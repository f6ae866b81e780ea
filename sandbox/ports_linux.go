package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/linux"
	"github.com/agentbox/agentbox/internal/netproxy"
	"github.com/agentbox/agentbox/policy"
)

// portRelay carries a sandbox's published ports and host ports (a lone
// run's, or a session's for its whole life): it accepts on the host's
// 127.0.0.1 for each published port and connects into the sandbox (see
// linux.Ports), and accepts on the sandbox's host-port listeners and
// connects to exactly the same address and port of the host's loopback.
type portRelay struct {
	pub       []policy.PortMap
	host      []net.Listener // on the host's 127.0.0.1, one for each of pub
	hostPorts []uint16
	ports     *linux.Ports
	// count says where a connection is counted: the recorder of host
	// ports' connections, the counter of published ports'; nil is
	// uncounted.
	count func() (*netproxy.Recorder, *publishCounter)

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
	// slots bounds the connections carried at once (maxCarried), each
	// two descriptors of agentbox's: a command (or a local user, on a
	// published port) that floods them is refused the excess, and
	// cannot exhaust the descriptors of agentbox, or of a resident
	// helper serving other runs.
	slots chan struct{}
}

// maxCarried is how many connections a sandbox's published ports and
// host ports carry at once; more are closed as soon as accepted.
const maxCarried = 256

// listenPublished opens the host's listeners of pol's published ports,
// before the sandbox is built, so that a port in use fails the run at
// once; nil when pol has neither published ports nor host ports.
func listenPublished(pol *policy.Policy) (*portRelay, error) {
	if len(pol.Publish()) == 0 && len(pol.HostPorts()) == 0 {
		return nil, nil
	}
	r := &portRelay{pub: pol.Publish(), hostPorts: pol.HostPorts(), conns: map[net.Conn]struct{}{}, slots: make(chan struct{}, maxCarried)}
	for _, m := range r.pub {
		// 127.0.0.1 only: the published port is the user's, on this
		// machine, and nobody else's on the network.
		ln, err := net.Listen("tcp4", netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), m.Host).String())
		if err != nil {
			r.Close()
			why := err
			if errors.Is(err, syscall.EADDRINUSE) {
				why = errors.New("the port is in use on the host")
			}
			return nil, &StartError{Code: CodeSandboxFailure, Err: fmt.Errorf("published port %d (Options.Publish, [network] publish): cannot listen on the host's 127.0.0.1:%d: %w; choose another with PORT:INNER", m.Host, m.Host, why)}
		}
		r.host = append(r.host, ln)
	}
	return r, nil
}

// serve starts carrying connections over ports, what the sandbox handed
// over, until Close.
func (r *portRelay) serve(ports *linux.Ports, count func() (*netproxy.Recorder, *publishCounter)) error {
	if r == nil {
		return nil
	}
	if ports == nil {
		return errors.New("the sandbox handed over nothing for its host ports and published ports")
	}
	r.ports, r.count = ports, count
	for i, ln := range r.host {
		r.wg.Add(1)
		go r.acceptPublished(ln, r.pub[i])
	}
	for _, ln := range ports.Listeners {
		r.wg.Add(1)
		go r.acceptHostPort(ln)
	}
	return nil
}

// Close closes the host's listeners (the published ports are closed on
// the host when it returns), the sandbox's, and every connection carried.
func (r *portRelay) Close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	for _, ln := range r.host {
		ln.Close()
	}
	r.ports.Close()
	r.wg.Wait()
}

// accept is ln.Accept, retried over passing failures (out of
// descriptors); false once ln is closed.
func accept(ln net.Listener) (net.Conn, bool) {
	for {
		c, err := ln.Accept()
		if err == nil {
			return c, true
		}
		if errors.Is(err, net.ErrClosed) {
			return nil, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serveEach accepts on ln until it is closed, and handles each
// connection in a goroutine of its own.
func (r *portRelay) serveEach(ln net.Listener, handle func(net.Conn)) {
	defer r.wg.Done()
	for {
		c, ok := accept(ln)
		if !ok {
			return
		}
		select {
		case r.slots <- struct{}{}:
		default:
			c.Close()
			continue
		}
		r.wg.Add(1)
		go func() {
			defer func() {
				<-r.slots
				r.wg.Done()
			}()
			handle(c)
		}()
	}
}

func (r *portRelay) acceptPublished(ln net.Listener, m policy.PortMap) {
	r.serveEach(ln, func(c net.Conn) {
		in, err := r.ports.DialInner(m.Inner)
		if err != nil {
			// Nothing listens inside (yet): the host's client sees
			// its connection closed, as with no server.
			c.Close()
			return
		}
		if _, pc := r.counters(); pc != nil {
			pc.add(m)
		}
		r.pipe(c, in)
	})
}

func (r *portRelay) acceptHostPort(ln net.Listener) {
	a, _ := ln.Addr().(*net.TCPAddr)
	if a == nil {
		r.wg.Done()
		return
	}
	// The host's address is the listener's own: 127.0.0.1 or ::1, at a
	// port of the policy's (linux.Ports checked both when it took the
	// listener).
	dst := netip.AddrPortFrom(a.AddrPort().Addr().Unmap(), a.AddrPort().Port())
	if !dst.Addr().IsLoopback() || !slices.Contains(r.hostPorts, dst.Port()) {
		r.wg.Done()
		return
	}
	d := net.Dialer{Timeout: 10 * time.Second, Control: func(network, address string, _ syscall.RawConn) error {
		// Defence in depth: the dial reaches this one address.
		if ap, err := netip.ParseAddrPort(address); err != nil || ap != dst {
			return fmt.Errorf("host port relay: refusing %s (only %v)", address, dst)
		}
		return nil
	}}
	r.serveEach(ln, func(c net.Conn) {
		out, err := d.DialContext(context.Background(), "tcp", dst.String())
		if err != nil {
			c.Close()
			return
		}
		if rec, _ := r.counters(); rec != nil {
			rec.Allow(dst.Addr().String(), dst.Port())
		}
		r.pipe(c, out)
	})
}

func (r *portRelay) counters() (*netproxy.Recorder, *publishCounter) {
	if r.count == nil {
		return nil, nil
	}
	return r.count()
}

// pipe copies between a and b until both directions end (or Close), and
// closes them.
func (r *portRelay) pipe(a, b net.Conn) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		a.Close()
		b.Close()
		return
	}
	r.conns[a], r.conns[b] = struct{}{}, struct{}{}
	r.mu.Unlock()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		// Half-close, so that a client that ends its request with
		// EOF still reads the answer.
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
	a.Close()
	b.Close()
	r.mu.Lock()
	delete(r.conns, a)
	delete(r.conns, b)
	r.mu.Unlock()
}

// refuseDegradedPorts is the refusal of published ports and host ports
// without a network namespace of the sandbox's own: only loopback of
// its own keeps the command's listeners and the host's ports apart.
func refuseDegradedPorts(pol *policy.Policy) error {
	what := ""
	switch {
	case len(pol.Publish()) > 0:
		what = publishNames
	case len(pol.HostPorts()) > 0:
		what = hostPortsNames
	default:
		return nil
	}
	return fmt.Errorf("%s need the sandbox's own network namespace, which needs user namespaces; this machine runs sandboxes degraded, without them: remove them, or enable user namespaces", what)
}

// recorderOf is p's recorder; nil without a proxy.
func recorderOf(p *netproxy.Server) *netproxy.Recorder {
	if p == nil {
		return nil
	}
	return p.Recorder()
}
