package nameserver

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/agentbox/agentbox/internal/netproxy"
	"github.com/agentbox/agentbox/policy"
)

func query(t testing.TB, id uint16, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	b.StartQuestions()
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	m, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRespondNXDOMAIN(t *testing.T) {
	for _, c := range []struct {
		name    string
		shown   string
		refused bool
	}{
		{"Registry.NPMJS.org.", "registry.npmjs.org", true},
		{"example.com.", "example.com", true},
		{"localhost.", "localhost", false},
		{"x.localhost.", "x.localhost", false},
		{"1.0.0.127.in-addr.arpa.", "1.0.0.127.in-addr.arpa", false},
		{"_http._tcp.example.com.", "_http._tcp.example.com", true},
	} {
		q := query(t, 0x1234, c.name, dnsmessage.TypeAAAA)
		reply, name, refused := New(Config{}).Respond(q, nil)
		if reply == nil {
			t.Fatalf("%s: no reply", c.name)
		}
		var m dnsmessage.Message
		if err := m.Unpack(reply); err != nil {
			t.Fatalf("%s: reply does not parse: %v", c.name, err)
		}
		if m.ID != 0x1234 || !m.Response || m.RCode != dnsmessage.RCodeNameError || !m.RecursionDesired || !m.RecursionAvailable ||
			len(m.Questions) != 1 || !strings.EqualFold(m.Questions[0].Name.String(), c.name) || m.Questions[0].Type != dnsmessage.TypeAAAA || len(m.Answers) != 0 {
			t.Errorf("%s: reply %+v", c.name, m)
		}
		if name != c.shown || refused != c.refused {
			t.Errorf("%s: recorded as %q (refused %v), want %q (%v)", c.name, name, refused, c.shown, c.refused)
		}
	}
}

// TestRespondMalformed: nothing a command can send crashes the server or
// makes it answer a response; what parses as a query head but not as one
// question is answered FORMERR or NOTIMP, and records nothing.
const noReply = dnsmessage.RCode(0xffff)

func TestRespondMalformed(t *testing.T) {
	good := query(t, 7, "example.com.", dnsmessage.TypeA)
	resp, _, _ := New(Config{}).Respond(good, nil)
	two := func() []byte {
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 9})
		b.StartQuestions()
		b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("a.example."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
		b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("b.example."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
		m, _ := b.Finish()
		return m
	}()
	notify := append([]byte{}, good...)
	notify[2] |= 4 << 3 // opcode NOTIFY
	for _, c := range []struct {
		name  string
		msg   []byte
		rcode dnsmessage.RCode // noReply: none
	}{
		{"empty", nil, noReply},
		{"short", []byte{1, 2, 3}, noReply},
		{"header only", good[:12], dnsmessage.RCodeFormatError},
		{"truncated question", good[:len(good)-3], dnsmessage.RCodeFormatError},
		{"a response", resp, noReply},
		{"two questions", two, dnsmessage.RCodeFormatError},
		{"notify", notify, dnsmessage.RCodeNotImplemented},
		{"pointer loop", append(append([]byte{}, good[:12]...), 0xc0, 12, 0, 1, 0, 1), dnsmessage.RCodeFormatError},
	} {
		reply, name, refused := New(Config{}).Respond(c.msg, nil)
		if c.rcode == noReply {
			if reply != nil {
				t.Errorf("%s: answered %x", c.name, reply)
			}
			continue
		}
		var h dnsmessage.Header
		var p dnsmessage.Parser
		h, err := p.Start(reply)
		if err != nil || h.RCode != c.rcode || !h.Response {
			t.Errorf("%s: reply %+v (%v), want rcode %v", c.name, h, err, c.rcode)
		}
		if refused || name != "" {
			t.Errorf("%s: recorded %q", c.name, name)
		}
	}
	// Random bytes, and random damage to a good query.
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var m []byte
		if r.IntN(2) == 0 {
			m = make([]byte, r.IntN(600))
			for i := range m {
				m[i] = byte(r.Uint32())
			}
		} else {
			m = append([]byte{}, good...)
			for range 1 + r.IntN(4) {
				m[r.IntN(len(m))] = byte(r.Uint32())
			}
		}
		if reply, name, _ := New(Config{}).Respond(m, nil); reply != nil {
			var p dnsmessage.Parser
			if h, err := p.Start(reply); err != nil || !h.Response {
				t.Fatalf("reply to %x does not parse as a response: %v", m, err)
			}
			for _, c := range name {
				if c < '!' || c > '~' {
					t.Fatalf("name %q of %x holds a byte a terminal would obey", name, m)
				}
			}
		}
	}
}

// TestRespondLocal: a name of the sandbox's /etc/hosts exists (no record
// of the type asked, NOERROR) and is not a refusal.
func TestRespondLocal(t *testing.T) {
	s := New(Config{Local: []string{"vm", "Box.Example"}})
	for _, n := range []string{"vm.", "VM.", "box.example."} {
		reply, _, refused := s.Respond(query(t, 3, n, dnsmessage.TypeAAAA), nil)
		var m dnsmessage.Message
		if err := m.Unpack(reply); err != nil || m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 0 || refused {
			t.Errorf("%s: %+v %v (refused %v)", n, m.Header, err, refused)
		}
	}
	if _, _, refused := s.Respond(query(t, 3, "other.", dnsmessage.TypeA), nil); !refused {
		t.Errorf("a name not in the hosts file is not refused")
	}
}

func TestPresentation(t *testing.T) {
	n := dnsmessage.Name{Length: 8}
	copy(n.Data[:], "a\x1b[2J\\b.")
	if got := presentation(n); got != `a\027\0912j\092b` {
		t.Errorf("presentation = %q", got)
	}
}

// servers starts a Server on a UDP socket and a TCP listener of the
// loopback, recording everything into rec.
func servers(t *testing.T, rec func(string, uint16) *netproxy.Recorder) (*Server, string, string) {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Recorder: rec})
	go s.ServeUDP(pc)
	go s.ServeTCP(ln)
	t.Cleanup(func() { s.Close() })
	return s, pc.LocalAddr().String(), ln.Addr().String()
}

// TestServeResolvers: Go's resolver, over UDP and TCP, gets "no such
// host" at once, and the names are recorded for the port they came from.
func TestServeResolvers(t *testing.T) {
	rec := netproxy.NewRecorder()
	var mu sync.Mutex
	ports := map[string]bool{}
	_, udp, tcp := servers(t, func(network string, port uint16) *netproxy.Recorder {
		mu.Lock()
		ports[network] = port != 0
		mu.Unlock()
		return rec
	})
	for _, c := range []struct{ network, addr string }{{"udp", udp}, {"tcp", tcp}} {
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, c.network, c.addr)
		}}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		start := time.Now()
		_, err := r.LookupNetIP(ctx, "ip", "nosuch-"+c.network+".example.com.")
		cancel()
		var de *net.DNSError
		if err == nil || !strings.Contains(err.Error(), "no such host") || !(errors.As(err, &de) && de.IsNotFound) {
			t.Errorf("%s: look-up: %v, want no such host", c.network, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s: look-up took %v", c.network, d)
		}
	}
	rep := rec.Report()
	want := map[string]bool{"nosuch-udp.example.com": false, "nosuch-tcp.example.com": false}
	for _, d := range rep.Denied {
		if _, ok := want[d.Host]; ok && d.Reason == policy.ReasonNetworkOff && d.Port == 0 && d.Count >= 1 {
			want[d.Host] = true
		}
	}
	for h, ok := range want {
		if !ok {
			t.Errorf("%s not recorded: %+v", h, rep.Denied)
		}
	}
	if !ports["udp"] || !ports["tcp"] {
		t.Errorf("source ports not passed: %v", ports)
	}
}

// TestServeFlood: a flood of junk and of distinct names does not stop the
// server answering, over either transport, and what it records stays
// bounded.
func TestServeFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("floods the loopback")
	}
	rec := netproxy.NewRecorder()
	_, udp, tcp := servers(t, func(string, uint16) *netproxy.Recorder { return rec })
	c, err := net.Dial("udp", udp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	junk := make([]byte, 3000)
	for i := range 6000 {
		if i%2 == 0 {
			c.Write(junk)
		} else {
			c.Write(query(t, uint16(i), randLabel(i)+".flood.example.", dnsmessage.TypeA))
		}
	}
	// Connections beyond the limit are closed; those within are served
	// for ConnTimeout at most, however slowly they send.
	var held []net.Conn
	for range MaxConns + 4 {
		if tc, err := net.Dial("tcp", tcp); err == nil {
			held = append(held, tc)
		}
	}
	for _, tc := range held {
		tc.Write([]byte{0xff, 0xff}) // a length beyond maxMessage: closed
	}
	for _, tc := range held {
		tc.Close()
	}
	// Still answering.
	time.Sleep(300 * time.Millisecond)
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", udp)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.LookupNetIP(ctx, "ip4", "after-the-flood.example."); err == nil || !strings.Contains(err.Error(), "no such host") {
		t.Errorf("after the flood: %v", err)
	}
	if n := len(rec.Report().Denied); n > 4097 {
		t.Errorf("%d names recorded, want the recorder's bound", n)
	}
}

func randLabel(i int) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(i)*0x9e3779b97f4a7c15)
	const hex = "0123456789abcdef"
	s := make([]byte, 16)
	for j, c := range b {
		s[2*j], s[2*j+1] = hex[c>>4], hex[c&15]
	}
	return string(s)
}
