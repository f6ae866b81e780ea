package nameserver

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/agentbox/agentbox/internal/netproxy"
	"github.com/agentbox/agentbox/policy"
)

func allowListServer(t testing.TB) *Server {
	t.Helper()
	rules, err := policy.ParseAllowList([]string{"allowed.test", "*.wild.test", "port.test:22"}, []string{"bad.wild.test"}, false)
	if err != nil {
		t.Fatal(err)
	}
	return New(Config{Rules: rules, Fake: netproxy.NewFakeNames(), Local: []string{"box"}})
}

func answer(t *testing.T, s *Server, name string, typ dnsmessage.Type) (dnsmessage.Message, string, bool) {
	t.Helper()
	reply, shown, refused := s.Respond(query(t, 7, name, typ), nil)
	var m dnsmessage.Message
	if reply == nil {
		t.Fatalf("%s: no reply", name)
	}
	if err := m.Unpack(reply); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m, shown, refused
}

// TestAllowListAnswers: allowed names get one A record from the fake
// range, the same each time; AAAA and other types get no answer (no
// error); refused names are NXDOMAIN and recorded.
func TestAllowListAnswers(t *testing.T) {
	s := allowListServer(t)
	byName := map[string]netip.Addr{}
	for _, n := range []string{"allowed.test.", "x.wild.test.", "port.test.", "Allowed.TEST."} {
		m, _, refused := answer(t, s, n, dnsmessage.TypeA)
		if refused || m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 1 {
			t.Fatalf("%s: %+v refused=%v", n, m, refused)
		}
		a := netip.AddrFrom4(m.Answers[0].Body.(*dnsmessage.AResource).A)
		if !netproxy.FakePrefix.Contains(a) {
			t.Errorf("%s: %v outside %v", n, a, netproxy.FakePrefix)
		}
		byName[strings.ToLower(n)] = a
		if back, ok := s.cfg.Fake.Name(a); !ok || back+"." != strings.ToLower(n) {
			t.Errorf("%v maps back to %q", a, back)
		}
		m, _, refused = answer(t, s, n, dnsmessage.TypeAAAA)
		if refused || m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 0 {
			t.Errorf("%s AAAA: %+v", n, m)
		}
	}
	if len(byName) != 3 || byName["allowed.test."] == byName["x.wild.test."] || byName["x.wild.test."] == byName["port.test."] {
		t.Errorf("addresses: %v", byName)
	}
	for _, n := range []string{"other.test.", "bad.wild.test.", "wild.test.", "allowed.test.evil.", "1.2.3.4."} {
		m, _, refused := answer(t, s, n, dnsmessage.TypeA)
		if !refused || m.RCode != dnsmessage.RCodeNameError || len(m.Answers) != 0 {
			t.Errorf("%s: %+v refused=%v", n, m, refused)
		}
	}
	if m, _, refused := answer(t, s, "box.", dnsmessage.TypeA); refused || m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 0 {
		t.Errorf("local name: %+v", m)
	}
}

// TestAllowListIPv6: with Fake6, an AAAA question about an allowed name
// gets the fake IPv6 address that embeds its fake IPv4 one, and both map
// back to the name.
func TestAllowListIPv6(t *testing.T) {
	s := allowListServer(t)
	s.cfg.Fake6 = true
	m6, _, refused := answer(t, s, "allowed.test.", dnsmessage.TypeAAAA)
	if refused || len(m6.Answers) != 1 {
		t.Fatalf("AAAA: %+v", m6)
	}
	a6 := netip.AddrFrom16(m6.Answers[0].Body.(*dnsmessage.AAAAResource).AAAA)
	m4, _, _ := answer(t, s, "allowed.test.", dnsmessage.TypeA)
	a4 := netip.AddrFrom4(m4.Answers[0].Body.(*dnsmessage.AResource).A)
	if !netproxy.FakePrefix6.Contains(a6) || netproxy.Fake6(a4) != a6 {
		t.Errorf("AAAA %v for A %v", a6, a4)
	}
	for _, a := range []netip.Addr{a4, a6} {
		if n, ok := s.cfg.Fake.Name(a); !ok || n != "allowed.test" {
			t.Errorf("%v maps to %q", a, n)
		}
	}
	if m, _, refused := answer(t, s, "other.test.", dnsmessage.TypeAAAA); !refused || m.RCode != dnsmessage.RCodeNameError {
		t.Errorf("refused name's AAAA: %+v", m)
	}
	if n, ok := s.cfg.Fake.Name(netproxy.Fake6(netip.MustParseAddr("198.18.77.77"))); ok {
		t.Errorf("an address never given maps to %q", n)
	}
}

// TestAllowListSpoofedAnswer: a response sent to the name server (a
// command trying to plant an address) is dropped, and maps nothing.
func TestAllowListSpoofedAnswer(t *testing.T) {
	s := allowListServer(t)
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 1, Response: true})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("allowed.test."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	b.StartAnswers()
	b.AResource(dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName("allowed.test."), Class: dnsmessage.ClassINET}, dnsmessage.AResource{A: [4]byte{198, 18, 0, 9}})
	msg, _ := b.Finish()
	if reply, _, _ := s.Respond(msg, nil); reply != nil {
		t.Errorf("answered a response")
	}
	if n, ok := s.cfg.Fake.Name(netip.MustParseAddr("198.18.0.9")); ok {
		t.Errorf("a spoofed answer mapped %s", n)
	}
}

// TestAllowListFlood: endless distinct allowed names (under a wildcard)
// fill the map up to its bound, then are refused; no address is ever
// given twice.
func TestAllowListFlood(t *testing.T) {
	s := allowListServer(t)
	given := map[[4]byte]bool{}
	refusedAt := -1
	for i := range netproxy.MaxFakeNames + 10 {
		m, _, refused := answer(t, s, fmt.Sprintf("n%d.wild.test.", i), dnsmessage.TypeA)
		if refused {
			if refusedAt < 0 {
				refusedAt = i
			}
			continue
		}
		a := m.Answers[0].Body.(*dnsmessage.AResource).A
		if given[a] || a[3] == 0 || a[3] == 255 {
			t.Fatalf("name %d got %v", i, a)
		}
		given[a] = true
	}
	if refusedAt != netproxy.MaxFakeNames {
		t.Errorf("first refusal at name %d, want %d", refusedAt, netproxy.MaxFakeNames)
	}
	// Names already given keep their addresses.
	if m, _, refused := answer(t, s, "n1.wild.test.", dnsmessage.TypeA); refused || len(m.Answers) != 1 {
		t.Errorf("a known name after the bound: %+v", m)
	}
}

// FuzzRespondAllowList: whatever a command sends, the allow-list's name
// server does not panic, answers only with a reply that parses, and any
// address it answers is a fake one that names an allowed name.
func FuzzRespondAllowList(f *testing.F) {
	f.Add(query(f, 1, "allowed.test.", dnsmessage.TypeA))
	f.Add(query(f, 2, "x.wild.test.", dnsmessage.TypeAAAA))
	f.Add(query(f, 3, "other.test.", dnsmessage.TypeA))
	f.Add(make([]byte, 4096))
	f.Fuzz(func(t *testing.T, msg []byte) {
		s := allowListServer(t)
		s.cfg.Fake6 = true
		reply, _, _ := s.Respond(msg, nil)
		if reply == nil {
			return
		}
		var m dnsmessage.Message
		if err := m.Unpack(reply); err != nil {
			t.Fatalf("reply does not parse: %v", err)
		}
		for _, a := range m.Answers {
			var addr netip.Addr
			switch b := a.Body.(type) {
			case *dnsmessage.AResource:
				addr = netip.AddrFrom4(b.A)
			case *dnsmessage.AAAAResource:
				addr = netip.AddrFrom16(b.AAAA)
			default:
				t.Fatalf("answer %T", a.Body)
			}
			name, ok := s.cfg.Fake.Name(addr)
			if !ok || !s.cfg.Rules.DecideName(name).Allow {
				t.Fatalf("answered %v for %q (mapped %v)", addr, name, ok)
			}
		}
	})
}

// TestAllowListServeHuge: over UDP, a datagram far larger than a query
// is read truncated to the buffer (what fits is judged like any query,
// and the answer is small), and the server goes on: the Go resolver, as a
// command's would, then gets the name's fake address.
func TestAllowListServeHuge(t *testing.T) {
	s := allowListServer(t)
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.ServeUDP(pc)
	t.Cleanup(func() { s.Close() })
	c, err := net.Dial("udp4", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	huge := append(query(t, 9, "allowed.test.", dnsmessage.TypeA), make([]byte, 60000)...)
	if _, err := c.Write(huge); err != nil {
		t.Fatal(err)
	}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp4", pc.LocalAddr().String())
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip4", "allowed.test.")
	if err != nil || len(addrs) != 1 || !netproxy.FakePrefix.Contains(addrs[0]) {
		t.Fatalf("look-up after a huge datagram: %v %v", addrs, err)
	}
}
