// Package nameserver is the name server of a sandbox whose network is off
// or limited to an allow-list. agentbox serves it from outside the
// sandbox, on the UDP and TCP sockets the sandbox made on its own
// 127.0.0.1:53 and handed over (the sandbox's /etc/resolv.conf names that
// address and nothing else). With the network off it answers every
// question at once with "no such name" (NXDOMAIN), recording the name for
// the run report; with an allow-list (Config.Rules) it answers the names
// the list admits with fake addresses that agentbox's proxy carries to
// them (transparent networking), and the others likewise at once.
//
// # Why NXDOMAIN
//
// glibc, musl, Go's resolver and Node (through getaddrinfo) all take
// NXDOMAIN as final: the look-up fails at once with EAI_NONAME, ENOTFOUND
// or "no such host", and nothing retries the name server. REFUSED and
// SERVFAIL make glibc try every server again and report EAI_AGAIN ("try
// again"), which tools such as npm treat as a transient failure; a name
// server that does not answer costs each look-up its full timeout.
//
// # Limits
//
// A command may send anything to its name server. A query is read into a
// fixed buffer, parsed with [dnsmessage.Parser], and dropped when it is
// not a well-formed single-question query (nothing is ever answered to a
// response, so two name servers cannot be made to talk to each other).
// A response sent to the name server (a command trying to plant an
// address) is dropped like any other message that is not a query: the
// fake addresses are given by the server alone, at most
// [netproxy.MaxFakeNames] of them.
// Each socket is served by one goroutine at no more than [MaxRate]
// queries a second (a flood waits in the kernel's socket buffer, where
// the excess is dropped); TCP takes at most [MaxConns] connections at
// once, each for [ConnTimeout] and [MaxQueriesPerConn] queries. The
// names recorded are bounded by the recorder ([netproxy.Recorder]).
package nameserver

import (
	"cmp"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/agentbox/agentbox/internal/netproxy"
	"github.com/agentbox/agentbox/policy"
)

// Limits of a [Server].
const (
	// MaxRate is the most queries a second one socket is answered.
	MaxRate = 5000
	// MaxConns is the most TCP connections served at once.
	MaxConns = 16
	// ConnTimeout is how long a TCP connection is served.
	ConnTimeout = 5 * time.Second
	// MaxQueriesPerConn is the most queries one TCP connection is
	// answered before it is closed.
	MaxQueriesPerConn = 64
	// maxMessage is the largest query read (EDNS(0) clients offer up to
	// 4096 bytes for answers; questions are far smaller).
	maxMessage = 4096
)

// Config configures a [Server].
type Config struct {
	// Recorder returns where a refused look-up that came from the
	// sandbox's port over network ("udp" or "tcp") is recorded: the run's
	// recorder, or in a session the recorder of the command whose socket
	// that port is. nil, or a nil result, records nothing.
	Recorder func(network string, port uint16) *netproxy.Recorder
	// Rules and Fake, both set, make the name server that of a sandbox
	// with an allow-list and transparent networking: a name the rules
	// admit ([policy.AllowList.DecideName]) is answered with its fake
	// address from Fake (an A record; it has no other records), any
	// other is "no such name" and recorded with the rules' reason.
	// Without them every name is refused as ReasonNetworkOff.
	Rules *policy.AllowList
	Fake  *netproxy.FakeNames
	// Fake6 answers AAAA questions too, with the names' fake IPv6
	// addresses (netproxy.Fake6): when the sandbox carries IPv6.
	Fake6 bool
	// Reason, without Rules, is the reason every refused look-up is
	// recorded with; "" means ReasonNetworkOff.
	Reason string
	// Local are the names the sandbox's /etc/hosts holds: they exist,
	// with no record of another type (a resolver that found a name's
	// IPv4 address there may still ask for its IPv6 one), and are not
	// refusals.
	Local []string
}

// Server answers the sandbox's questions on any number of sockets until
// Close.
type Server struct {
	cfg   Config
	local map[string]bool

	mu     sync.Mutex
	closed bool
	socks  []interface{ Close() error }
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	slots  chan struct{} // MaxConns
}

// New returns a server for cfg.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, local: map[string]bool{}, conns: map[net.Conn]struct{}{}, slots: make(chan struct{}, MaxConns)}
	for _, n := range cfg.Local {
		s.local[strings.ToLower(strings.TrimSuffix(n, "."))] = true
	}
	return s
}

// ErrClosed is returned by the Serve methods once Close was called.
var ErrClosed = errors.New("nameserver: closed")

func (s *Server) track(c interface{ Close() error }) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.socks = append(s.socks, c)
	s.wg.Add(1)
	return true
}

// ServeUDP answers the queries that arrive on pc until Close (or pc
// fails), and closes pc.
func (s *Server) ServeUDP(pc net.PacketConn) error {
	if !s.track(pc) {
		return ErrClosed
	}
	defer s.wg.Done()
	defer pc.Close()
	buf := make([]byte, maxMessage)
	out := make([]byte, 0, 512)
	var lim limiter
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return s.closedOr(err)
		}
		lim.wait()
		reply, name, reason := s.respond(buf[:n], out[:0])
		if reply == nil {
			continue
		}
		if reason != "" {
			s.record("udp", from, name, reason)
		}
		pc.WriteTo(reply, from)
	}
}

// ServeTCP answers queries on the connections ln accepts until Close (or
// ln fails), and closes ln.
func (s *Server) ServeTCP(ln net.Listener) error {
	if !s.track(ln) {
		return ErrClosed
	}
	defer s.wg.Done()
	defer ln.Close()
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return s.closedOr(err)
		}
		select {
		case s.slots <- struct{}{}:
		default:
			c.Close() // too many at once: the client falls back or fails
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			<-s.slots
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// serveConn answers the length-prefixed queries of one TCP connection.
func (s *Server) serveConn(c net.Conn) {
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		<-s.slots
		s.wg.Done()
	}()
	c.SetDeadline(time.Now().Add(ConnTimeout))
	buf := make([]byte, 2+maxMessage)
	out := make([]byte, 2, 2+512)
	var lim limiter
	for range MaxQueriesPerConn {
		if _, err := io.ReadFull(c, buf[:2]); err != nil {
			return
		}
		n := int(buf[0])<<8 | int(buf[1])
		if n == 0 || n > maxMessage {
			return
		}
		if _, err := io.ReadFull(c, buf[2:2+n]); err != nil {
			return
		}
		lim.wait()
		reply, name, reason := s.respond(buf[2:2+n], out[2:2])
		if reply == nil {
			return
		}
		if reason != "" {
			s.record("tcp", c.RemoteAddr(), name, reason)
		}
		out = out[:2+len(reply)]
		out[0], out[1] = byte(len(reply)>>8), byte(len(reply))
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func (s *Server) record(network string, from net.Addr, name, reason string) {
	if s.cfg.Recorder == nil || name == "" {
		return
	}
	var port uint16
	switch a := from.(type) {
	case *net.UDPAddr:
		port = uint16(a.Port)
	case *net.TCPAddr:
		port = uint16(a.Port)
	}
	if r := s.cfg.Recorder(network, port); r != nil {
		r.Deny(name, 0, reason)
	}
}

func (s *Server) closedOr(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return err
}

// Close closes every socket and connection and waits for the handlers:
// after it, every look-up is recorded.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, c := range s.socks {
		c.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// limiter spaces the queries one goroutine answers to MaxRate a second,
// in windows of a tenth of a second.
type limiter struct {
	start time.Time
	n     int
}

func (l *limiter) wait() {
	const window = 100 * time.Millisecond
	const perWindow = MaxRate / 10
	now := time.Now()
	if now.Sub(l.start) >= window {
		l.start, l.n = now, 0
	}
	l.n++
	if l.n > perWindow {
		time.Sleep(window - now.Sub(l.start))
		l.start, l.n = time.Now(), 1
	}
}

// Respond builds the answer to one query into out and returns it, with the
// name asked for (in presentation form, lower case, without the final dot)
// and whether it counts as a refused look-up. A message that must not be
// answered (not a query, or not one agentbox can parse) gets a nil reply.
func (s *Server) Respond(query, out []byte) (reply []byte, name string, refused bool) {
	reply, name, reason := s.respond(query, out)
	return reply, name, reason != ""
}

// respond is Respond with the reason of a refused look-up ("" when the
// look-up is not a refusal).
func (s *Server) respond(query, out []byte) (reply []byte, name, reason string) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil, "", ""
	}
	rh := dnsmessage.Header{
		ID: h.ID, Response: true, OpCode: h.OpCode, Authoritative: true,
		RecursionDesired: h.RecursionDesired, RecursionAvailable: true,
	}
	var answer netip.Addr
	qs, err := p.AllQuestions()
	switch {
	case err != nil:
		rh.RCode = dnsmessage.RCodeFormatError
		qs = nil
	case h.OpCode != 0: // only QUERY
		rh.RCode = dnsmessage.RCodeNotImplemented
	case len(qs) != 1:
		rh.RCode = dnsmessage.RCodeFormatError
	default:
		rh.RCode, answer, reason = s.decide(qs[0])
		name = presentation(qs[0].Name)
		if reason != "" && s.cfg.Rules != nil {
			// The policy's own spelling of the name, as the proxy
			// records it.
			if d := s.cfg.Rules.DecideName(qs[0].Name.String()); !d.Allow && !strings.HasPrefix(d.Host, "\"") {
				name = d.Host
			}
		}
	}
	b := dnsmessage.NewBuilder(out, rh)
	b.EnableCompression()
	if len(qs) == 1 {
		if err := b.StartQuestions(); err != nil {
			return nil, "", ""
		}
		if err := b.Question(qs[0]); err != nil {
			return nil, "", ""
		}
		if answer.IsValid() {
			if err := b.StartAnswers(); err != nil {
				return nil, "", ""
			}
			// The address is the name's for the sandbox's life; a
			// short TTL only spares caches nothing.
			rh := dnsmessage.ResourceHeader{Name: qs[0].Name, Class: dnsmessage.ClassINET, TTL: fakeTTL}
			if answer.Is4() {
				err = b.AResource(rh, dnsmessage.AResource{A: answer.As4()})
			} else {
				err = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: answer.As16()})
			}
			if err != nil {
				return nil, "", ""
			}
		}
	}
	reply, err = b.Finish()
	if err != nil {
		return nil, "", ""
	}
	return reply, name, reason
}

// fakeTTL is the time to live of a fake address's record.
const fakeTTL = 300

// decide is the answer to one question (and, for an A question about an
// allowed name, the address to answer), and the reason the look-up is
// recorded as refused in the run report ("" when it is not). It is the
// one place that knows which names exist inside the sandbox: those of
// the sandbox's /etc/hosts (Config.Local), which have no record a
// resolver would ask a name server for (NOERROR, no answer); with an
// allow-list (Config.Rules), the names it admits, whose records are
// their fake addresses, IPv4 and (with Config.Fake6) IPv6; every other
// name is unknown.
//
// Reverse look-ups (in-addr.arpa, ip6.arpa) and the localhost names
// (RFC 6761) are answered the same, but are not hosts the command tried
// to reach: they are not recorded.
func (s *Server) decide(q dnsmessage.Question) (dnsmessage.RCode, netip.Addr, string) {
	n := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	if s.local[n] {
		return dnsmessage.RCodeSuccess, netip.Addr{}, ""
	}
	local := n == "" || n == "localhost" || strings.HasSuffix(n, ".localhost") ||
		strings.HasSuffix(n, ".in-addr.arpa") || strings.HasSuffix(n, ".ip6.arpa") ||
		n == "in-addr.arpa" || n == "ip6.arpa"
	if local {
		return dnsmessage.RCodeNameError, netip.Addr{}, ""
	}
	if s.cfg.Rules == nil || s.cfg.Fake == nil {
		return dnsmessage.RCodeNameError, netip.Addr{}, cmp.Or(s.cfg.Reason, policy.ReasonNetworkOff)
	}
	d := s.cfg.Rules.DecideName(q.Name.String())
	if !d.Allow {
		return dnsmessage.RCodeNameError, netip.Addr{}, d.Reason
	}
	if q.Class != dnsmessage.ClassINET || q.Type != dnsmessage.TypeA && q.Type != dnsmessage.TypeAAAA {
		return dnsmessage.RCodeSuccess, netip.Addr{}, ""
	}
	a, ok := s.cfg.Fake.Addr(d.Host)
	if !ok {
		return dnsmessage.RCodeNameError, netip.Addr{}, netproxy.ReasonTooManyNames
	}
	if q.Type == dnsmessage.TypeAAAA {
		if !s.cfg.Fake6 {
			return dnsmessage.RCodeSuccess, netip.Addr{}, ""
		}
		a = netproxy.Fake6(a)
	}
	return dnsmessage.RCodeSuccess, a, ""
}

// presentation is a name as it may be shown on a terminal and in the
// report: lower case, without the final dot, every byte but letters,
// digits, '-', '_', '*' and the dots between labels as \DDD (the master
// file escape of RFC 1035), so that a name cannot carry control bytes to
// the user's terminal.
func presentation(n dnsmessage.Name) string {
	var b strings.Builder
	data := n.Data[:n.Length]
	// The wire form is gone: Name holds the dotted text, in which a dot
	// inside a label cannot be told from one between labels; both show
	// as dots.
	for i, c := range data {
		switch {
		case c == '.' && i == len(data)-1:
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c == '*', c == '.':
			b.WriteByte(c)
		default:
			b.WriteByte('\\')
			s := strconv.Itoa(int(c))
			b.WriteString(strings.Repeat("0", 3-len(s)) + s)
		}
	}
	return b.String()
}
