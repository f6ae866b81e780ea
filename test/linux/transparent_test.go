//go:build linux

package linux

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Transparent networking: with an allow-list, a command that ignores the
// proxy variables resolves the list's names inside the sandbox and its
// plain TCP connections to them are carried through agentbox's proxy;
// every other name, bare address and UDP datagram is refused, and the
// report says so. The servers on the host count the connections that
// reached them (the ground truth).

// tcpCounter is a TCP server on the host that counts the connections it
// accepts and greets each with its name (a server-speaks-first protocol,
// as SSH and SMTP are).
type tcpCounter struct {
	name string
	port int
	hits atomic.Int64
}

func listenTCPCounter(t *testing.T, addr, name string) *tcpCounter {
	t.Helper()
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatalf("host: listen on %s: %v", addr, err)
	}
	s := &tcpCounter{name: name, port: ln.Addr().(*net.TCPAddr).Port}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.hits.Add(1)
			fmt.Fprintf(c, "%s-hello\n", s.name)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return s
}

// transparentProbe is the scenario: allowed.test and refused.test on two
// loopback addresses of the host (names the proxy resolves through a
// test hosts file, allowed with allow_local_binding), and a script whose
// every line prints NAME:result.
type transparentProbe struct {
	allowed, refused, outside *tcpCounter
	outsideIP                 string // a non-loopback address of the host, "" if it has none
	// ipv6: the kernel has IPv6, so the sandbox's namespace has ::1 and
	// IPv6 is carried too.
	ipv6          bool
	hosts, config string
}

func newTransparentProbe(t *testing.T) *transparentProbe {
	t.Helper()
	needBin(t)
	needPython(t)
	p := &transparentProbe{
		allowed: listenTCPCounter(t, "127.0.0.2:0", "allowed"),
		refused: listenTCPCounter(t, "127.0.0.4:0", "refused"),
	}
	// A bare address outside the list that the host could reach: one
	// of its own, not loopback (inside, loopback is the sandbox's).
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
				p.outsideIP = n.IP.String()
				break
			}
		}
	}
	if p.outsideIP != "" {
		p.outside = listenTCPCounter(t, p.outsideIP+":0", "outside")
	}
	_, err := os.Stat("/proc/net/if_inet6")
	p.ipv6 = err == nil
	p.hosts = filepath.Join(baseDir, "transparent-hosts")
	if err := os.WriteFile(p.hosts, []byte("127.0.0.2 allowed.test\n127.0.0.4 refused.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.config = filepath.Join(baseDir, "transparent.toml")
	if err := os.WriteFile(p.config, []byte("[network]\nallowed_domains = [\"allowed.test\"]\nallow_local_binding = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *transparentProbe) reset() {
	p.allowed.hits.Store(0)
	p.refused.hits.Store(0)
	if p.outside != nil {
		p.outside.hits.Store(0)
	}
}

// script: getent, then Python with no proxy variable at all.
func (p *transparentProbe) script() string {
	outside := ""
	if p.outside != nil {
		outside = fmt.Sprintf("tcp(\"outside\", %q, %d)", p.outsideIP, p.outside.port)
	}
	return fmt.Sprintf(`if a=$(getent hosts allowed.test); then echo "getent:${a%%%% *}"; else echo getent:fail; fi
getent hosts refused.test >/dev/null && echo getent-refused:resolved || echo getent-refused:fail
if command -v ip >/dev/null; then ip route del default 2>/dev/null && echo route:deleted || echo route:kept; fi
exec env -u HTTPS_PROXY -u HTTP_PROXY -u ALL_PROXY -u https_proxy -u http_proxy -u all_proxy %s -c '
import socket
def tcp(n, host, port):
    try:
        s = socket.create_connection((host, port), timeout=10)
        print("%%s:%%s" %% (n, s.makefile().readline().strip() or "empty"))
    except OSError as e:
        print("%%s:fail %%s" %% (n, type(e).__name__))
tcp("allowed", "allowed.test", %d)
tcp("refused", "refused.test", %d)
tcp("bareip", "192.0.2.7", %d)
tcp("fake", "198.18.250.1", %d)
%s
if %s:
    try:
        a = socket.getaddrinfo("allowed.test", %d, socket.AF_INET6, socket.SOCK_STREAM)[0][4]
        s = socket.socket(socket.AF_INET6); s.settimeout(10); s.connect(a)
        print("allowed6:%%s %%s" %% (a[0], s.makefile().readline().strip()))
    except OSError as e:
        print("allowed6:fail %%s" %% type(e).__name__)
    tcp("bareip6", "2001:db8::7", %d)
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"x", ("192.0.2.7", 9999))
    print("udp:sent")
except OSError as e:
    print("udp:fail %%s" %% type(e).__name__)
'
`, python, p.allowed.port, p.refused.port, p.refused.port, p.allowed.port, outside, pyBool(p.ipv6), p.allowed.port, p.refused.port)
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func (p *transparentProbe) check(t *testing.T, stdout, stderr string, rep runReport) {
	t.Helper()
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			got[k] = v
		}
	}
	want := map[string]func(string) bool{
		// getent hosts asks for IPv6 first.
		"getent": func(v string) bool {
			return strings.HasPrefix(v, "198.18.") || p.ipv6 && strings.HasPrefix(v, "fd61:6765:6e74:6278::")
		},
		"getent-refused": func(v string) bool { return v == "fail" },
		"allowed":        func(v string) bool { return v == "allowed-hello" },
		"refused":        func(v string) bool { return strings.HasPrefix(v, "fail") },
		"bareip":         func(v string) bool { return strings.HasPrefix(v, "fail") },
		// Accepted inside, then reset: never a greeting.
		"fake": func(v string) bool { return strings.HasPrefix(v, "fail") || v == "empty" },
		"udp":  func(v string) bool { return strings.HasPrefix(v, "fail") },
	}
	if p.ipv6 {
		want["allowed6"] = func(v string) bool {
			return strings.HasPrefix(v, "fd61:6765:6e74:6278::") && strings.HasSuffix(v, " allowed-hello")
		}
		want["bareip6"] = func(v string) bool { return strings.HasPrefix(v, "fail") }
	}
	if got["route"] == "deleted" {
		t.Errorf("the command changed the sandbox's routes")
	}
	if p.outside != nil {
		want["outside"] = func(v string) bool { return strings.HasPrefix(v, "fail") }
	}
	for k, ok := range want {
		if !ok(got[k]) {
			t.Errorf("%s: got %q\nstdout: %s\nstderr: %s", k, got[k], stdout, stderr)
		}
	}
	wantHits := int64(1)
	if p.ipv6 {
		wantHits = 2
	}
	if n := p.allowed.hits.Load(); n != wantHits {
		t.Errorf("host: the allowed server got %d connections, want %d", n, wantHits)
	}
	if n := p.refused.hits.Load(); n != 0 {
		t.Errorf("host: the refused name's server got %d connections", n)
	}
	if p.outside != nil && p.outside.hits.Load() != 0 {
		t.Errorf("host: the server on %s got %d connections", p.outsideIP, p.outside.hits.Load())
	}
	denied := map[string]string{}
	for _, d := range rep.Network.Denied {
		denied[fmt.Sprintf("%s:%d", d.Host, d.Port)] = d.Reason
	}
	for _, hp := range []string{"refused.test:0", fmt.Sprintf("192.0.2.7:%d", p.refused.port), fmt.Sprintf("198.18.250.1:%d", p.allowed.port)} {
		if denied[hp] == "" {
			t.Errorf("report: %s not among the refusals %+v", hp, rep.Network.Denied)
		}
	}
	if p.outside != nil && denied[fmt.Sprintf("%s:%d", p.outsideIP, p.outside.port)] == "" {
		t.Errorf("report: %s not among the refusals %+v", p.outsideIP, rep.Network.Denied)
	}
	if p.ipv6 && denied[fmt.Sprintf("2001:db8::7:%d", p.refused.port)] == "" {
		t.Errorf("report: 2001:db8::7 not among the refusals %+v", rep.Network.Denied)
	}
	allowed := false
	for _, a := range rep.Network.Allowed {
		allowed = allowed || a.Host == "allowed.test" && a.Port == p.allowed.port && int64(a.Count) == wantHits
	}
	if !allowed {
		t.Errorf("report: allowed.test:%d not carried %d times: %+v", p.allowed.port, wantHits, rep.Network.Allowed)
	}
	if !strings.Contains(stderr, "agentbox: network: refused the name refused.test (not in allowed_domains") {
		t.Errorf("stderr lacks the refused name:\n%s", stderr)
	}
	if !strings.Contains(stderr, fmt.Sprintf("agentbox: network: refused 192.0.2.7:%d (not in allowed_domains", p.refused.port)) {
		t.Errorf("stderr lacks the refused address:\n%s", stderr)
	}
}

// TestTransparentLone: a lone run, as root and as a plain user.
func TestTransparentLone(t *testing.T) {
	p := newTransparentProbe(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		p.reset()
		fx := newFixture(t, u)
		report := filepath.Join(fx.dir, "report.json")
		r := runWith(t, u, runOpts{dir: fx.ws, env: append(fx.env(), "AGENTBOX_TEST_HOSTS="+p.hosts), timeout: 60 * time.Second},
			"run", "-C", fx.ws, "--config", p.config, "--report", report, "--", "/bin/sh", "-c", p.script())
		if r.code != 0 {
			t.Fatalf("run: %v", r)
		}
		p.check(t, r.stdout, r.stderr, readReport(t, report))
	})
}

// TestTransparentResident: where the resident helper runs (stdio that
// is not a regular file, a helper running for the state directory), an
// allow-list's run is not its to serve (resident.Eligible): it starts
// on its own, with transparent networking as a lone run has it.
func TestTransparentResident(t *testing.T) {
	p := newTransparentProbe(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		p.reset()
		fx := newFixture(t, u)
		re := newResidentEnv(t, fx, "AGENTBOX_TEST_HOSTS="+p.hosts)
		re.warm(t)
		report := filepath.Join(fx.dir, "report.json")
		served, r := re.served(t, runOpts{timeout: 60 * time.Second}, []string{"--config", p.config, "--report", report}, p.script())
		if served {
			t.Errorf("the helper served an allow-list's run")
		}
		if r.code != 0 {
			t.Fatalf("run: %v", r)
		}
		p.check(t, r.stdout, r.stderr, readReport(t, report))
	})
}

// TestTransparentSession: the same through agentbox mcp, twice in one
// session (the second command gets the name's same fake address, and its
// own report).
func TestTransparentSession(t *testing.T) {
	p := newTransparentProbe(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		cs, _, _ := mcpServerCmd(t, command(u, runOpts{env: append(fx.env(), "AGENTBOX_TEST_HOSTS="+p.hosts), dir: fx.ws},
			binPath, "mcp", "-C", fx.ws, "--config", p.config))
		var first string
		for i := range 2 {
			p.reset()
			r := mcpSh(t, cs, p.script())
			if r.ExitCode != 0 {
				t.Fatalf("call %d: %v", i, r)
			}
			p.check(t, r.Stdout, r.Stderr, r.Report)
			addr, _, _ := strings.Cut(r.Stdout, "\n")
			if i == 0 {
				first = addr
			} else if addr != first {
				t.Errorf("allowed.test was %q, then %q in the same session", first, addr)
			}
		}

		// Calls at once, call i connecting i+1 times while all of them
		// run: each report counts its own connections.
		const n = 3
		p.reset()
		results := make([]mcpResult, n)
		var wg sync.WaitGroup
		for i := range n {
			script := fmt.Sprintf(`touch "$WS/tcall%[1]d"; for _ in $(seq 100); do [ "$(ls "$WS"/tcall* | wc -l)" -ge %[2]d ] && break; sleep 0.05; done
exec env -u HTTPS_PROXY -u HTTP_PROXY -u ALL_PROXY -u https_proxy -u http_proxy -u all_proxy %[3]s -c '
import socket
for _ in range(%[4]d):
    print(socket.create_connection(("allowed.test", %[5]d), timeout=10).makefile().readline().strip())
'`, i, n, python, i+1, p.allowed.port)
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = mcpSh(t, cs, script)
			}()
		}
		wg.Wait()
		for i, r := range results {
			got := 0
			for _, a := range r.Report.Network.Allowed {
				if a.Host == "allowed.test" {
					got += a.Count
				}
			}
			if r.ExitCode != 0 || strings.Count(r.Stdout, "allowed-hello") != i+1 || got != i+1 {
				t.Errorf("call %d: %d connections in its report, want %d: %v %+v", i, got, i+1, r, r.Report.Network)
			}
		}
		if got, want := p.allowed.hits.Load(), int64(n*(n+1)/2); got != want {
			t.Errorf("host: the allowed server got %d connections, want %d", got, want)
		}
	})
}
