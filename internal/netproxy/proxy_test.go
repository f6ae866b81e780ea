package netproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/policy"
	"golang.org/x/net/proxy"
)

// origin is an HTTP server on one loopback address that counts requests
// and answers with its name and the Host header it saw.
type origin struct {
	name string
	addr string // host:port
	port uint16
	hits atomic.Int64
}

func newOrigin(t *testing.T, ip, name string) *origin {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	o := &origin{name: name, addr: ln.Addr().String(), port: uint16(ln.Addr().(*net.TCPAddr).Port)}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.hits.Add(1)
		fmt.Fprintf(w, "%s host=%s", o.name, r.Host)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return o
}

type fixture struct {
	srv              *Server
	httpAddr, socks  string
	good, local, bad *origin
}

// newFixture: good.test resolves to a listed loopback address, local.test
// to an unlisted one, look.alike to the same address as good.test.
func newFixture(t *testing.T, allowLocal bool) *fixture {
	t.Helper()
	good := newOrigin(t, "127.0.0.2", "good")
	local := newOrigin(t, "127.0.0.3", "local")
	bad := newOrigin(t, "127.0.0.4", "bad")
	rules, err := policy.ParseAllowList([]string{"good.test", "*.wild.test", "local.test", "127.0.0.2", "other.test"}, []string{"no.wild.test"}, allowLocal)
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr
	res := HostsResolver{
		"good.test":      {a("127.0.0.2")},
		"x.wild.test":    {a("127.0.0.2")},
		"no.wild.test":   {a("127.0.0.2")},
		"local.test":     {a("127.0.0.3")},
		"good.test.evil": {a("127.0.0.4")},
		"evilgood.test":  {a("127.0.0.4")},
		"other.test":     {a("127.0.0.2"), a("127.0.0.4")},
	}
	s := New(Config{Rules: rules, Resolver: res, HandshakeTimeout: 2 * time.Second})
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.ServeHTTPProxy(hl)
	go s.ServeSOCKS(sl)
	t.Cleanup(func() { s.Close() })
	return &fixture{srv: s, httpAddr: hl.Addr().String(), socks: sl.Addr().String(), good: good, local: local, bad: bad}
}

func (f *fixture) viaHTTP(t *testing.T, target string, tunnel bool) (string, int) {
	t.Helper()
	pu, _ := url.Parse("http://" + f.httpAddr)
	tr := &http.Transport{Proxy: http.ProxyURL(pu), DisableKeepAlives: true}
	if tunnel {
		// Force CONNECT for plain http by dialing through the proxy.
		tr = &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			c, err := net.Dial("tcp", f.httpAddr)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				c.Close()
				return nil, err
			}
			if resp.StatusCode != 200 {
				c.Close()
				return nil, fmt.Errorf("CONNECT: %s", resp.Status)
			}
			return c, nil
		}}
	}
	cl := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + target + "/")
	if err != nil {
		return err.Error(), 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}

func (f *fixture) viaSOCKS(t *testing.T, target string) (string, error) {
	t.Helper()
	d, err := proxy.SOCKS5("tcp", f.socks, nil, proxy.Direct)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{DisableKeepAlives: true, DialContext: d.(proxy.ContextDialer).DialContext}
	cl := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + target + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), nil
}

func TestProxyAllowsAndRefuses(t *testing.T) {
	f := newFixture(t, false)
	port := func(o *origin) string { return fmt.Sprint(o.port) }
	allowed := []string{
		"good.test:" + port(f.good),
		"GOOD.test.:" + port(f.good),
		"x.wild.test:" + port(f.good),
		"127.0.0.2:" + port(f.good),
	}
	refused := []struct{ target, reason string }{
		{"good.test.evil:" + port(f.bad), policy.ReasonNotAllowed},
		{"evilgood.test:" + port(f.bad), policy.ReasonNotAllowed},
		{"no.wild.test:" + port(f.good), policy.ReasonDenied},
		{"127.0.0.4:" + port(f.bad), policy.ReasonNotAllowed},
		{"2130706436:" + port(f.bad), policy.ReasonNotAllowed}, // 127.0.0.4
		{"local.test:" + port(f.local), "local address 127.0.0.3"},
		{"other.test:" + port(f.bad), "local address 127.0.0.4"},
	}
	for _, mode := range []string{"http", "connect", "socks"} {
		get := func(target string) (string, bool) {
			switch mode {
			case "socks":
				b, err := f.viaSOCKS(t, target)
				return b, err == nil
			default:
				b, code := f.viaHTTP(t, target, mode == "connect")
				return b, code == 200
			}
		}
		for _, tg := range allowed {
			if body, ok := get(tg); !ok || !strings.HasPrefix(body, "good ") {
				t.Errorf("%s %s: want it served by good: %q", mode, tg, body)
			}
		}
		for _, r := range refused {
			if body, ok := get(r.target); ok {
				t.Errorf("%s %s: want refused, got %q", mode, r.target, body)
			}
		}
	}
	if n := f.bad.hits.Load() + f.local.hits.Load(); n != 0 {
		t.Errorf("refused origins saw %d requests", n)
	}
	rep := f.srv.Recorder().Report()
	for _, r := range refused {
		host, _, _ := net.SplitHostPort(r.target)
		found := false
		for _, d := range rep.Denied {
			if strings.Contains(d.Reason, r.reason) && (d.Host == strings.ToLower(host) || host == "2130706436" && d.Host == "127.0.0.4") {
				found = d.Count >= 3 // once per mode (twice for the two spellings of 127.0.0.4)
			}
		}
		if !found {
			t.Errorf("report lacks %s (%s) three times: %+v", r.target, r.reason, rep.Denied)
		}
	}
	if len(rep.Allowed) == 0 {
		t.Errorf("report lists nothing allowed")
	}
}

func TestProxyAllowLocalBinding(t *testing.T) {
	f := newFixture(t, true)
	body, code := f.viaHTTP(t, fmt.Sprintf("local.test:%d", f.local.port), false)
	if code != 200 || !strings.HasPrefix(body, "local ") {
		t.Errorf("allow_local_binding: local.test refused: %d %q", code, body)
	}
	// A bare unlisted address stays refused: the address of an allowed
	// name is not enough.
	if _, code := f.viaHTTP(t, fmt.Sprintf("127.0.0.3:%d", f.local.port), false); code == 200 {
		t.Errorf("bare 127.0.0.3 allowed")
	}
}

// TestHostHeaderIgnored: the destination is the request URI's host; a
// Host header naming another host changes nothing, and the upstream sees
// the URI's host.
func TestHostHeaderIgnored(t *testing.T) {
	f := newFixture(t, false)
	raw := func(req string) string {
		c, err := net.Dial("tcp", f.httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, req)
		b, _ := io.ReadAll(c)
		return string(b)
	}
	out := raw(fmt.Sprintf("GET http://good.test:%d/ HTTP/1.1\r\nHost: 127.0.0.4:%d\r\nConnection: close\r\n\r\n", f.good.port, f.bad.port))
	if !strings.Contains(out, "good host=good.test:") {
		t.Errorf("absolute URI with a foreign Host header: %q", out)
	}
	out = raw(fmt.Sprintf("GET / HTTP/1.1\r\nHost: good.test:%d\r\nConnection: close\r\n\r\n", f.good.port))
	if !strings.Contains(out, " 400 ") {
		t.Errorf("origin-form request must be refused: %q", out)
	}
	out = raw(fmt.Sprintf("GET http://127.0.0.4:%d/ HTTP/1.1\r\nHost: good.test\r\nConnection: close\r\n\r\n", f.bad.port))
	if !strings.Contains(out, " 403 ") {
		t.Errorf("refused URI host with an allowed Host header: %q", out)
	}
	out = raw("GET https://good.test/ HTTP/1.1\r\nHost: good.test\r\nConnection: close\r\n\r\n")
	if !strings.Contains(out, " 400 ") {
		t.Errorf("https:// URI without CONNECT: %q", out)
	}
	out = raw(strings.Repeat("X", 100) + " http://good.test/ HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("A: b\r\n", 20000) + "\r\n")
	if !strings.Contains(out, " 431 ") && !strings.Contains(out, " 400 ") {
		t.Errorf("oversized head: %q", out[:min(len(out), 200)])
	}
	if n := f.bad.hits.Load(); n != 0 {
		t.Errorf("bad origin saw %d requests", n)
	}
}

// TestSOCKSNULName: a domain with a NUL byte is refused, not cut short.
func TestSOCKSRaw(t *testing.T) {
	f := newFixture(t, false)
	try := func(req []byte) []byte {
		c, err := net.Dial("tcp", f.socks)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte{5, 1, 0})
		var g [2]byte
		if _, err := io.ReadFull(c, g[:]); err != nil || g != [2]byte{5, 0} {
			t.Fatalf("greeting: %v %v", g, err)
		}
		c.Write(req)
		rep := make([]byte, 10)
		n, _ := io.ReadFull(c, rep)
		return rep[:n]
	}
	domain := func(cmd byte, name string, port uint16) []byte {
		b := []byte{5, cmd, 0, 3, byte(len(name))}
		b = append(b, name...)
		return binary.BigEndian.AppendUint16(b, port)
	}
	if r := try(domain(1, "good.test\x00.evil", f.good.port)); len(r) < 2 || r[1] != repNotAllowed {
		t.Errorf("NUL name: reply %v", r)
	}
	if r := try(domain(3, "good.test", f.good.port)); len(r) < 2 || r[1] != repCmdNotSupp {
		t.Errorf("UDP ASSOCIATE: reply %v", r)
	}
	if r := try(domain(2, "good.test", f.good.port)); len(r) < 2 || r[1] != repCmdNotSupp {
		t.Errorf("BIND: reply %v", r)
	}
	v6 := append([]byte{5, 1, 0, 4}, netip.MustParseAddr("::ffff:127.0.0.4").AsSlice()...)
	if r := try(binary.BigEndian.AppendUint16(v6, f.bad.port)); len(r) < 2 || r[1] != repNotAllowed {
		t.Errorf("IPv4-mapped IPv6 of an unlisted address: reply %v", r)
	}
	v4 := binary.BigEndian.AppendUint16([]byte{5, 1, 0, 1, 127, 0, 0, 2}, f.good.port)
	if r := try(v4); len(r) < 2 || r[1] != repSucceeded {
		t.Errorf("listed IPv4: reply %v", r)
	}
	if n := f.bad.hits.Load(); n != 0 {
		t.Errorf("bad origin saw %d", n)
	}
}

// TestCloseEndsTunnels: Close ends an open tunnel at once.
func TestCloseEndsTunnels(t *testing.T) {
	f := newFixture(t, false)
	c, err := net.Dial("tcp", f.httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT good.test:%d HTTP/1.1\r\nHost: x\r\n\r\n", f.good.port)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	done := make(chan struct{})
	go func() { f.srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return with a tunnel open")
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := br.ReadByte(); err == nil {
		t.Errorf("tunnel still open after Close")
	}
}

func TestEnv(t *testing.T) {
	env := MergeEnv([]string{"PATH=/bin", "http_proxy=http://127.0.0.1:9", "JAVA_TOOL_OPTIONS=-Xmx1g"},
		Env("127.0.0.1:3128", "127.0.0.1:1080", "-Xmx1g"))
	want := map[string]string{
		"PATH":               "/bin",
		"http_proxy":         "http://127.0.0.1:3128",
		"HTTPS_PROXY":        "http://127.0.0.1:3128",
		"ALL_PROXY":          "socks5h://127.0.0.1:1080",
		"no_proxy":           NoProxy,
		"npm_config_proxy":   "http://127.0.0.1:3128",
		"NODE_USE_ENV_PROXY": "1",
		"JAVA_TOOL_OPTIONS":  "-Xmx1g -Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=3128 -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=3128 -Dhttp.nonProxyHosts=localhost|127.0.0.1|[::1]",
	}
	for k, v := range want {
		if got := Lookup(env, k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	n := 0
	for _, kv := range env {
		if strings.HasPrefix(kv, "http_proxy=") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("http_proxy appears %d times", n)
	}
}

func TestParseHosts(t *testing.T) {
	h, err := ParseHosts([]byte("# c\n127.0.0.2 a.test B.test. # x\n\n::1 a.test\n"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := h.LookupNetIP(context.Background(), "ip", "A.test")
	if len(got) != 2 || got[1] != netip.MustParseAddr("::1") {
		t.Errorf("a.test: %v", got)
	}
	if _, err := h.LookupNetIP(context.Background(), "ip", "c.test"); err == nil {
		t.Errorf("unknown name resolved")
	}
	if _, err := ParseHosts([]byte("nonsense\n")); err == nil {
		t.Errorf("bad line accepted")
	}
}

// FuzzHTTPHead: whatever bytes a client sends as a request head, parsing
// does not panic, and a target is derived only from the request URI.
func FuzzHTTPHead(f *testing.F) {
	f.Add([]byte("GET http://a.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n"))
	f.Add([]byte("CONNECT a.test:443 HTTP/1.1\r\nHost: b.test:443\r\n\r\n"))
	f.Add([]byte("CONNECT [::1]:443 HTTP/1.1\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"))
	f.Add([]byte("GET http://a.test\x00.b/ HTTP/1.0\r\n\r\n"))
	f.Add([]byte("CONNECT a.test:0x1bb HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := http.ReadRequest(bufio.NewReader(io.LimitReader(bytes.NewReader(b), maxHeaderBytes)))
		if err != nil {
			return
		}
		host, port, err := TargetOf(req)
		if err != nil {
			return
		}
		if port == 0 {
			t.Errorf("port 0 accepted for %q", b)
		}
		if h := req.Header.Get("Host"); h != "" && req.URL.Host == "" && host != "" {
			t.Errorf("target %q taken from the Host header of %q", host, b)
		}
		// The decision must not panic on any host.
		(&policy.AllowList{}).Decide(host, port)
	})
}

// FuzzSOCKS: the SOCKS5 greeting and request parsers never panic, never
// read past the request, and a parsed domain is what was sent.
func FuzzSOCKS(f *testing.F) {
	f.Add([]byte{5, 1, 0, 5, 1, 0, 3, 6, 'a', '.', 't', 'e', 's', 't', 0, 80})
	f.Add([]byte{5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, 0, 80})
	f.Add([]byte{5, 1, 0, 5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 187})
	f.Add([]byte{5, 2, 1, 0, 5, 3, 0, 3, 0, 0, 0})
	f.Add([]byte{4, 1, 0, 80, 127, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		ok, err := readGreeting(r)
		if err != nil || !ok {
			return
		}
		before := r.Len()
		req, err := readRequest(r)
		if err != nil {
			return
		}
		used := before - r.Len()
		switch req.Atyp {
		case atypDomain:
			if len(req.Host) == 0 || len(req.Host) > 255 || used != 4+1+len(req.Host)+2 {
				t.Errorf("domain %q, %d bytes used", req.Host, used)
			}
		case atypIPv4:
			if used != 10 {
				t.Errorf("ipv4 used %d bytes", used)
			}
		case atypIPv6:
			if used != 22 {
				t.Errorf("ipv6 used %d bytes", used)
			}
		default:
			t.Errorf("atyp %d accepted", req.Atyp)
		}
		if req.Cmd != cmdConnect {
			t.Errorf("cmd %d accepted", req.Cmd)
		}
		(&policy.AllowList{}).Decide(req.Host, req.Port)
	})
}

type recordingResolver struct {
	Resolver
	asked []string
}

func (r *recordingResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.asked = append(r.asked, host)
	return r.Resolver.LookupNetIP(ctx, network, host)
}

// TestLookupIsRootedAndOnlyForAllowed: only allowed names are looked up
// (a refused name leaks nothing through DNS), and as rooted names, so the
// resolver's search list cannot add a suffix.
func TestLookupIsRootedAndOnlyForAllowed(t *testing.T) {
	rules, _ := policy.ParseAllowList([]string{"good.test"}, nil, true)
	res := &recordingResolver{Resolver: HostsResolver{"good.test": {netip.MustParseAddr("127.0.0.1")}}}
	s := New(Config{Rules: rules, Resolver: res})
	defer s.Close()
	s.root.connect(context.Background(), "evil.test", 80)
	c, err := s.root.connect(context.Background(), "Good.Test", 1) // port 1: nothing listens
	if c != nil {
		c.Close()
	}
	if len(res.asked) != 1 || res.asked[0] != "good.test." {
		t.Errorf("resolver asked %q, want only \"good.test.\" (err %v)", res.asked, err)
	}
}

// TestScopes: each scope of one server records only the decisions made on
// its own listeners, over HTTP, CONNECT and SOCKS5 alike; closing a scope
// ends its listeners and tunnels and nothing of another scope's; closing
// the server ends every scope.
func TestScopes(t *testing.T) {
	f := newFixture(t, false)
	type scoped struct {
		sc    *Scope
		fx    *fixture
		good  string
		refus string
	}
	var all []scoped
	for i := range 2 {
		sc := f.srv.NewScope()
		hl, sl := newListener(t), newListener(t)
		go sc.ServeHTTPProxy(hl)
		go sc.ServeSOCKS(sl)
		fx := *f
		fx.httpAddr, fx.socks = hl.Addr().String(), sl.Addr().String()
		// Each scope asks for names of its own.
		all = append(all, scoped{sc, &fx, fmt.Sprintf("127.0.0.2:%d", f.good.port), fmt.Sprintf("refused%d.test:%d", i, f.bad.port)})
	}
	for _, s := range all {
		for _, tunnel := range []bool{false, true} {
			if body, code := s.fx.viaHTTP(t, s.good, tunnel); code != 200 || !strings.HasPrefix(body, "good ") {
				t.Fatalf("%s through a scope: %d %q", s.good, code, body)
			}
			s.fx.viaHTTP(t, s.refus, tunnel)
		}
		if _, err := s.fx.viaSOCKS(t, s.good); err != nil {
			t.Fatalf("SOCKS5 through a scope: %v", err)
		}
		s.fx.viaSOCKS(t, s.refus)
	}
	for i, s := range all {
		rep := s.sc.Recorder().Report()
		if len(rep.Allowed) != 1 || rep.Allowed[0].Count != 3 || len(rep.Denied) != 1 || rep.Denied[0].Count != 3 ||
			rep.Denied[0].Host != fmt.Sprintf("refused%d.test", i) {
			t.Errorf("scope %d recorded %+v, want its own 3 allowed and 3 refused", i, rep)
		}
	}
	if rep := f.srv.Recorder().Report(); len(rep.Allowed)+len(rep.Denied) != 0 {
		t.Errorf("the server's own recorder got the scopes' decisions: %+v", rep)
	}

	// A tunnel in each scope; closing the first ends only its own.
	tunnel := func(s scoped) *bufio.Reader {
		c, err := net.Dial("tcp", s.fx.httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\n", s.good)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET through the tunnel: %v %v", resp, err)
		} else {
			io.Copy(io.Discard, resp.Body)
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		return br
	}
	t0, t1 := tunnel(all[0]), tunnel(all[1])
	all[0].sc.Close()
	if _, err := t0.ReadByte(); err == nil || isTimeout(err) {
		t.Errorf("the closed scope's tunnel is still open: %v", err)
	}
	if _, err := net.Dial("tcp", all[0].fx.httpAddr); err == nil {
		t.Errorf("the closed scope's listener still accepts")
	}
	if _, err := t1.ReadByte(); !isTimeout(err) {
		t.Errorf("the other scope's tunnel ended with the first scope: %v", err)
	}
	if body, code := all[1].fx.viaHTTP(t, all[1].good, false); code != 200 {
		t.Errorf("the other scope stopped serving: %d %q", code, body)
	}
	f.srv.Close()
	if _, err := net.Dial("tcp", all[1].fx.httpAddr); err == nil {
		t.Errorf("a scope's listener still accepts after the server's Close")
	}
	if sc := f.srv.NewScope(); sc.ServeSOCKS(newListener(t)) == nil {
		t.Errorf("a scope made after Close serves")
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func newListener(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// TestScopeConnLimit: each scope has its own connection limit, so a
// client that holds all of its scope's connections leaves another scope
// served.
func TestScopeConnLimit(t *testing.T) {
	good := newOrigin(t, "127.0.0.2", "good")
	rules, err := policy.ParseAllowList([]string{"127.0.0.2"}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Rules: rules, MaxConns: 1, HandshakeTimeout: 5 * time.Second})
	defer s.Close()
	a, b := s.NewScope(), s.NewScope()
	al, bl := newListener(t), newListener(t)
	go a.ServeHTTPProxy(al)
	go b.ServeHTTPProxy(bl)
	// A's one connection, held open in the middle of its request head.
	hold, err := net.Dial("tcp", al.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	fmt.Fprintf(hold, "GET http://%s/ HTTP/1.1\r\n", good.addr)
	get := func(ln net.Listener) (int, error) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return 0, err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", good.addr)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// Until A's held connection is counted, a second one may get in.
	deadline := time.Now().Add(3 * time.Second)
	for {
		if _, err := get(al); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("scope A serves beyond its limit of one connection")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, err := get(bl); err != nil || code != 200 {
		t.Errorf("scope B starved by scope A's connection: %d, %v", code, err)
	}
}

// TestRecorderFor: with Config.RecorderFor, each client connection's
// decisions go to the recorder its address picks (HTTP, CONNECT and
// SOCKS5 alike), and to the server's own when it picks none; with
// policy.NetworkOffList everything is refused as "network off".
func TestRecorderFor(t *testing.T) {
	mine := NewRecorder()
	var mu sync.Mutex
	var ports []int
	s := New(Config{Rules: policy.NetworkOffList(), HandshakeTimeout: 2 * time.Second,
		RecorderFor: func(a net.Addr) *Recorder {
			mu.Lock()
			defer mu.Unlock()
			ports = append(ports, a.(*net.TCPAddr).Port)
			if len(ports)%2 == 1 {
				return mine
			}
			return nil
		}})
	hl, sl := newListener(t), newListener(t)
	go s.ServeHTTPProxy(hl)
	go s.ServeSOCKS(sl)
	t.Cleanup(func() { s.Close() })
	f := &fixture{srv: s, httpAddr: hl.Addr().String(), socks: sl.Addr().String()}
	if _, code := f.viaHTTP(t, "a.example:80", false); code != http.StatusForbidden {
		t.Errorf("plain request with the network off: %d", code)
	}
	if _, code := f.viaHTTP(t, "b.example:80", true); code != http.StatusForbidden && code != 0 {
		t.Errorf("CONNECT with the network off: %d", code)
	}
	if _, err := f.viaSOCKS(t, "c.example:443"); err == nil {
		t.Errorf("SOCKS with the network off: connected")
	}
	hosts := func(r *Recorder) map[string]string {
		m := map[string]string{}
		for _, d := range r.Report().Denied {
			m[d.Host] = d.Reason
		}
		return m
	}
	got, other := hosts(mine), hosts(s.Recorder())
	if len(got) != 2 || got["a.example"] != policy.ReasonNetworkOff || got["c.example"] != policy.ReasonNetworkOff {
		t.Errorf("the picked recorder holds %v, want a.example and c.example refused as network off", got)
	}
	if len(other) != 1 || other["b.example"] != policy.ReasonNetworkOff {
		t.Errorf("the server's recorder holds %v, want b.example alone", other)
	}
}

// TestOffEnv: the refusing proxy of a sandbox without network is named by
// the conventional variables only, with loopback and the local names
// direct; no tool's own configuration is set.
func TestOffEnv(t *testing.T) {
	env := OffEnv("127.0.0.1:1", "127.0.0.1:2", []string{"localhost", "vm"})
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	for _, k := range []string{"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"} {
		if got[k] != "http://127.0.0.1:1" {
			t.Errorf("%s = %q", k, got[k])
		}
	}
	if got["ALL_PROXY"] != "socks5h://127.0.0.1:2" || got["NO_PROXY"] != "localhost,127.0.0.1,::1,127.0.0.0/8,vm" || got["no_proxy"] != got["NO_PROXY"] {
		t.Errorf("env %q", env)
	}
	for k := range got {
		if strings.HasPrefix(k, "npm_") || strings.HasPrefix(k, "YARN") || k == "JAVA_TOOL_OPTIONS" || k == "NODE_USE_ENV_PROXY" {
			t.Errorf("OffEnv sets %s", k)
		}
	}
}
