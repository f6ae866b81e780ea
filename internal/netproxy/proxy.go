// Package netproxy is agentbox's egress proxy: an HTTP proxy (absolute-URI
// requests for plain http:// and CONNECT for everything else) and a SOCKS5
// proxy (CONNECT only), both asking [policy.AllowList] about every request,
// resolving an allowed name once, and connecting to exactly the address
// that was checked. It runs in the agentbox process, outside the sandbox,
// on listeners the platform backend hands it, and records every decision
// for the run report.
//
// # Limitations
//
// The proxy does not terminate TLS: for CONNECT it sees only the requested
// name and port, so a client that asks for an allowed name and then sends
// another name in TLS SNI or an HTTP Host header inside the tunnel (domain
// fronting) is not detected. SOCKS5 UDP ASSOCIATE and BIND are refused.
package netproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/policy"
)

// Resolver looks names up; *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a [Server].
type Config struct {
	// Rules decide every request. Required.
	Rules *policy.AllowList
	// Recorder, when set, receives every decision.
	Recorder *Recorder
	// Resolver looks up allowed names; nil means net.DefaultResolver.
	Resolver Resolver
	// DialTimeout bounds each look-up and connection; 0 means 15s.
	DialTimeout time.Duration
	// HandshakeTimeout bounds reading a request head (HTTP) or the
	// greeting and request (SOCKS5); 0 means 30s.
	HandshakeTimeout time.Duration
	// RecorderFor, when set, chooses the recorder of each request by
	// the address of the client connection it came on: a session whose
	// commands share one listener tells them apart by their sockets'
	// ports. It is asked when the request has arrived, not when the
	// connection was accepted (a TCP handshake completes before the
	// client's connect(2) returns, and so before whoever watches that
	// connect knows the port). A nil result (or no RecorderFor) records
	// in the scope's recorder.
	RecorderFor func(client net.Addr) *Recorder
	// MaxConns bounds the client connections served at once, by the
	// server's own listeners and by each Scope apart (so that one
	// command of a session cannot take its siblings' share); 0 means
	// 512.
	MaxConns int
}

// Server serves the proxy on any number of listeners until Close. Its
// decisions go to Config.Recorder, except those made on the listeners of a
// [Scope], which has a recorder of its own.
type Server struct {
	cfg  Config
	http *http.Server
	root *Scope // the listeners served by the Server's own Serve methods

	mu     sync.Mutex
	closed bool
	scopes map[*Scope]struct{}
	// fake is the map of the sandbox's fake addresses, once
	// ServeTransparent has been called.
	fake *FakeNames
}

// Scope is the part of a [Server] that serves one client (a command of a
// session that shares the server): its own listeners, connections and
// recorder, under the server's rules. Closing it ends only what it
// serves.
type Scope struct {
	srv *Server
	rec *Recorder
	sem chan struct{} // its connection limit (Config.MaxConns)
	// ctx ends with Close, cancelling look-ups and dials in progress.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	lns    map[net.Listener]struct{}
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// Refusal is the error for a request the policy refused.
type Refusal struct {
	Host   string
	Port   uint16
	Reason string
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("refused %s (%s)", net.JoinHostPort(r.Host, fmt.Sprint(r.Port)), r.Reason)
}

// New returns a server for cfg.
func New(cfg Config) *Server {
	if cfg.Rules == nil {
		cfg.Rules = &policy.AllowList{}
	}
	if cfg.Recorder == nil {
		cfg.Recorder = NewRecorder()
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 15 * time.Second
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 30 * time.Second
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = 512
	}
	s := &Server{
		cfg:    cfg,
		scopes: map[*Scope]struct{}{},
	}
	s.http = s.newHTTPServer()
	s.root = s.newScope(cfg.Recorder)
	return s
}

// Recorder is where the server records the decisions made on the
// listeners it serves itself (not a Scope's).
func (s *Server) Recorder() *Recorder { return s.cfg.Recorder }

// NewScope returns a scope of s with an empty recorder of its own. After
// Close of s, the scope serves nothing.
func (s *Server) NewScope() *Scope { return s.newScope(NewRecorder()) }

func (s *Server) newScope(rec *Recorder) *Scope {
	sc := &Scope{srv: s, rec: rec, sem: make(chan struct{}, s.cfg.MaxConns), lns: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{}}
	sc.ctx, sc.cancel = context.WithCancel(context.Background())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		sc.closed = true
		sc.cancel()
		return sc
	}
	s.scopes[sc] = struct{}{}
	return sc
}

// Recorder is where the scope records its decisions.
func (sc *Scope) Recorder() *Recorder { return sc.rec }

// track registers c so that Close can end it; false means the scope is
// closed and c was closed.
func (sc *Scope) track(c net.Conn) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.closed {
		c.Close()
		return false
	}
	sc.conns[c] = struct{}{}
	return true
}

func (sc *Scope) untrack(c net.Conn) {
	sc.mu.Lock()
	delete(sc.conns, c)
	sc.mu.Unlock()
}

func (sc *Scope) addListener(ln net.Listener) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.closed {
		ln.Close()
		return false
	}
	sc.lns[ln] = struct{}{}
	return true
}

// Close stops the scope's listeners and ends its connections, tunnels
// included, and waits for its handlers to return: after it, the
// recorder holds every decision the scope will ever make.
func (sc *Scope) Close() error {
	sc.mu.Lock()
	sc.closed = true
	sc.cancel()
	for ln := range sc.lns {
		ln.Close()
	}
	for c := range sc.conns {
		c.Close()
	}
	sc.mu.Unlock()
	sc.wg.Wait()
	s := sc.srv
	s.mu.Lock()
	delete(s.scopes, sc)
	s.mu.Unlock()
	return nil
}

// Close stops every listener and ends every connection, tunnels included,
// its scopes' too, and waits for the handlers to return.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	scopes := make([]*Scope, 0, len(s.scopes))
	for sc := range s.scopes {
		scopes = append(scopes, sc)
	}
	s.mu.Unlock()
	for _, sc := range scopes {
		sc.Close()
	}
	s.http.Close()
	return nil
}

// clientKey is the context key of a request's client address, for
// Config.RecorderFor.
type clientKey struct{}

// withRecorder is ctx carrying the client address of connection c, whose
// recorder Config.RecorderFor chooses.
func (sc *Scope) withRecorder(ctx context.Context, c net.Conn) context.Context {
	if sc.srv.cfg.RecorderFor == nil {
		return ctx
	}
	return context.WithValue(ctx, clientKey{}, c.RemoteAddr())
}

// serve accepts on ln and runs handle for each connection, within the
// scope's connection limit.
func (sc *Scope) serve(ln net.Listener, handle func(net.Conn)) error {
	if !sc.addListener(ln) {
		return net.ErrClosed
	}
	sem := sc.sem
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			sc.mu.Lock()
			closed := sc.closed
			sc.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// EMFILE and the like: back off instead of spinning.
			var ne net.Error
			if errors.As(err, &ne) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		select {
		case sem <- struct{}{}:
		default:
			c.Close() // over the limit: refuse rather than queue forever
			continue
		}
		if !sc.track(c) {
			<-sem
			continue
		}
		sc.wg.Add(1)
		go func() {
			defer sc.wg.Done()
			defer func() { <-sem }()
			defer sc.untrack(c)
			defer c.Close()
			handle(c)
		}()
	}
}

// connect is the one path from a request to an upstream connection:
// decide, resolve an allowed name once, admit every address, and dial
// exactly an admitted address. Every outcome is recorded.
func (sc *Scope) connect(ctx context.Context, host string, port uint16) (net.Conn, error) {
	s := sc.srv
	rules, rec := s.cfg.Rules, sc.rec
	if r, ok := ctx.Value(recorderKey{}).(*Recorder); ok && r != nil {
		rec = r
	} else if a, ok := ctx.Value(clientKey{}).(net.Addr); ok && s.cfg.RecorderFor != nil {
		if r := s.cfg.RecorderFor(a); r != nil {
			rec = r
		}
	}
	if name, ok := s.fakeName(host); ok {
		// A client that resolved the name inside (transparent
		// networking) and asks for the address it got.
		host = name
	}
	d := rules.Decide(host, port)
	if !d.Allow {
		rec.Deny(d.Host, port, d.Reason)
		return nil, &Refusal{d.Host, port, d.Reason}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DialTimeout)
	defer cancel()
	defer context.AfterFunc(sc.ctx, cancel)()
	addrs := []netip.Addr{d.Addr}
	if d.Resolve() {
		// Rooted (trailing dot), so that the resolver's search list
		// cannot turn an allowed name into another one
		// (github.com.corp.example).
		found, err := s.cfg.Resolver.LookupNetIP(ctx, "ip", d.Host+".")
		if err != nil {
			reason := "name lookup failed"
			var de *net.DNSError
			if errors.As(err, &de) && de.IsNotFound {
				reason = "no such host"
			}
			rec.Deny(d.Host, port, reason)
			return nil, &Refusal{d.Host, port, reason}
		}
		ok, reason := rules.Admit(port, found)
		if reason != "" {
			rec.Deny(d.Host, port, reason)
			return nil, &Refusal{d.Host, port, reason}
		}
		addrs = ok
	}
	rec.Allow(d.Host, port)
	var errs []error
	for _, a := range addrs {
		c, err := dialExact(ctx, netip.AddrPortFrom(a, port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("connecting to %s: %w", net.JoinHostPort(d.Host, fmt.Sprint(port)), errors.Join(errs...))
}

// dialExact connects to ap and nothing else: the dialer's Control hook,
// run on the socket right before connect(2), refuses any other address,
// so no later change (a second look-up in a library, a happy-eyeballs
// fallback) can redirect the connection.
func dialExact(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	d := net.Dialer{
		Control: func(network, address string, _ syscall.RawConn) error {
			got, err := netip.ParseAddrPort(address)
			if err != nil || got.Addr().Unmap() != ap.Addr() || got.Port() != ap.Port() {
				return fmt.Errorf("agentbox proxy: refusing to connect to %s, checked %s", address, ap)
			}
			return nil
		},
	}
	return d.DialContext(ctx, "tcp", ap.String())
}

// pipe copies both ways between a and b until both directions end,
// half-closing so that a client's EOF reaches the server. Both ends are
// unwrapped to their *net.TCPConn first, so that io.Copy between them is
// splice(2) on Linux (TCPConn.ReadFrom) both ways, as a transparent
// connection's is, with no copy through agentbox's memory (through the
// CONNECT tunnel's wrapper it was a read and a write of 32 KiB). On
// loopback the two measure the same (BenchmarkTunnel): what a tunnel
// costs there is the kernel's work for the second connection.
func pipe(a, b net.Conn) {
	a, b = unwrapConn(a), unwrapConn(b)
	var wg sync.WaitGroup
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	wg.Add(2)
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
}

// unwrapConn is the connection c wraps, if it is one of the proxy's own
// wrappers (closing either closes the same socket; the wrapper's Close
// still runs when its owner closes it).
func unwrapConn(c net.Conn) net.Conn {
	if n, ok := c.(*notifyConn); ok {
		return n.Conn
	}
	return c
}

var discardLog = log.New(io.Discard, "", 0)
