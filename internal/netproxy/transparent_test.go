package netproxy

import (
	"bufio"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/policy"
)

// TestTransparent: a redirected connection to a fake address is carried
// to its name's real address; one to a fake address never given, to an
// unlisted bare address or to a name on a port it is not allowed on is
// reset before anything reaches a server, and recorded.
func TestTransparent(t *testing.T) {
	up, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	var mu sync.Mutex
	hits := 0
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			hits++
			mu.Unlock()
			c.Write([]byte("hello\n"))
			c.Close()
		}
	}()
	port := uint16(up.Addr().(*net.TCPAddr).Port)
	rules, err := policy.ParseAllowList([]string{"good.test:" + itoa(port), "other.test:1"}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Rules: rules, Resolver: HostsResolver{"good.test": {netip.MustParseAddr("127.0.0.1")}, "other.test": {netip.MustParseAddr("127.0.0.1")}}})
	defer s.Close()
	names := NewFakeNames()
	good, _ := names.Addr("good.test")
	other, _ := names.Addr("other.test")
	// Each client connection's "original destination", by its port.
	var dmu sync.Mutex
	dst := map[int]netip.AddrPort{}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.ServeTransparent(ln, Transparent{Names: names, OriginalDst: func(c net.Conn) (netip.AddrPort, error) {
		// The client writes its entry once its dial returns, which may
		// be after the accept.
		for range 500 {
			dmu.Lock()
			ap, ok := dst[c.RemoteAddr().(*net.TCPAddr).Port]
			dmu.Unlock()
			if ok && !ap.IsValid() {
				return ap, errors.New("not redirected")
			}
			if ok {
				return ap, nil
			}
			time.Sleep(2 * time.Millisecond)
		}
		return netip.AddrPort{}, errors.New("no entry")
	}})
	try := func(to netip.AddrPort) string {
		c, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		dmu.Lock()
		dst[c.LocalAddr().(*net.TCPAddr).Port] = to
		dmu.Unlock()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return "closed"
		}
		return line
	}
	if got := try(netip.AddrPortFrom(good, port)); got != "hello\n" {
		t.Fatalf("carried: %q", got)
	}
	// Through the proxy variables, by the fake address a client
	// resolved inside: its name's rules apply.
	pl, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.ServeHTTPProxy(pl)
	pc, err := net.Dial("tcp4", pl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	pc.SetDeadline(time.Now().Add(5 * time.Second))
	pc.Write([]byte("CONNECT " + netip.AddrPortFrom(good, port).String() + " HTTP/1.1\r\nHost: x\r\n\r\n"))
	br := bufio.NewReader(pc)
	status, _ := br.ReadString('\n')
	for {
		if l, _ := br.ReadString('\n'); l == "\r\n" || l == "" {
			break
		}
	}
	greeting, _ := br.ReadString('\n')
	pc.Close()
	if !strings.Contains(status, " 200 ") || greeting != "hello\n" {
		t.Errorf("CONNECT to the fake address: %q %q", status, greeting)
	}
	mu.Lock()
	before := hits
	mu.Unlock()
	for _, to := range []netip.AddrPort{
		netip.MustParseAddrPort("198.18.9.9:80"),                   // never given
		netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port), // a bare address not listed
		netip.AddrPortFrom(other, port),                            // a name on a port not its own
		{},                                                         // not redirected
	} {
		if got := try(to); got != "closed" {
			t.Errorf("%v: got %q", to, got)
		}
	}
	s.Close()
	mu.Lock()
	if hits != before {
		t.Errorf("refused connections reached the server: %d", hits-before)
	}
	mu.Unlock()
	rep := s.Recorder().Report()
	want := map[string]bool{"198.18.9.9": false, "127.0.0.1": false, "other.test": false}
	for _, d := range rep.Denied {
		if _, ok := want[d.Host]; ok {
			want[d.Host] = true
		}
	}
	for h, ok := range want {
		if !ok {
			t.Errorf("%s not recorded: %+v", h, rep.Denied)
		}
	}
}

func itoa(p uint16) string {
	return netip.AddrPortFrom(netip.IPv4Unspecified(), p).String()[len("0.0.0.0:"):]
}
