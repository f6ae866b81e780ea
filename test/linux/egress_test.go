//go:build linux

package linux

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// webServer is an HTTP server on one loopback address of the host that
// counts the requests it gets and answers with its name.
type webServer struct {
	name string
	ip   string
	port int
	hits atomic.Int64
}

func listenWeb(t *testing.T, ip, name string) *webServer {
	t.Helper()
	ln, err := net.Listen("tcp4", ip+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	s := &webServer{name: name, ip: ip, port: ln.Addr().(*net.TCPAddr).Port}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		fmt.Fprintf(w, "%s-ok\n", s.name)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

func (s *webServer) at(host string) string { return fmt.Sprintf("http://%s:%d/", host, s.port) }

// runReport is the --report file as a program reads it.
type runReport struct {
	ExitCode int `json:"exit_code"`
	Network  struct {
		Mode    string `json:"mode"`
		Allowed []struct {
			Host  string `json:"host"`
			Port  int    `json:"port"`
			Count int    `json:"count"`
		} `json:"allowed"`
		Denied []struct {
			Host   string `json:"host"`
			Port   int    `json:"port"`
			Reason string `json:"reason"`
			Count  int    `json:"count"`
		} `json:"denied"`
	} `json:"network"`
	Filesystem *struct {
		Denied           []fsDenied `json:"denied"`
		Unavailable      string     `json:"unavailable"`
		ReadsUnavailable string     `json:"reads_unavailable"`
	} `json:"filesystem"`
	Suggest *struct {
		AddDirs      []string `json:"add_dirs"`
		AllowDomains []string `json:"allow_domains"`
	} `json:"suggest"`
}

// fsDenied is an entry of the report's filesystem.denied.
type fsDenied struct {
	Op     string `json:"op"`
	Path   string `json:"path"`
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

func readReport(t *testing.T, path string) runReport {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("host: report: %v", err)
	}
	var r runReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("host: report is not JSON: %v\n%s", err, b)
	}
	return r
}

// egressProbe is the allow-list scenario: servers on several loopback
// addresses of the host, test names resolvable for agentbox's proxy only,
// and a script that asks for each destination in turn: listed names over
// plain HTTP, CONNECT and SOCKS5, look-alike names, bare and numeric
// addresses, a name resolving to an unlisted local address, and
// connections that ignore the proxy.
type egressProbe struct {
	good, local, bad *webServer
	tlsHits          atomic.Int64
	hosts            string   // AGENTBOX_TEST_HOSTS
	allow            []string // the flags
	script           string
	want             map[string]string
}

func newEgressProbe(t *testing.T) *egressProbe {
	t.Helper()
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl on this machine")
	}
	p := &egressProbe{
		good:  listenWeb(t, "127.0.0.2", "good"),
		local: listenWeb(t, "127.0.0.3", "local"),
		bad:   listenWeb(t, "127.0.0.4", "bad"),
	}
	// An HTTPS origin on the allowed address: curl reaches it through
	// https_proxy, that is CONNECT, as real registries are reached.
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.tlsHits.Add(1)
		fmt.Fprintln(w, "tls-ok")
	}))
	tlsLn, err := net.Listen("tcp4", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	tlsSrv.Listener = tlsLn
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	tlsPort := tlsLn.Addr().(*net.TCPAddr).Port
	// Test names, resolvable for agentbox's proxy only.
	p.hosts = filepath.Join(baseDir, "egress-hosts")
	if err := os.WriteFile(p.hosts, []byte(`127.0.0.2 good.test x.wild.test
127.0.0.3 local.test
127.0.0.4 good.test.evil.test evilgood.test
`), 0o644); err != nil {
		t.Fatal(err)
	}
	p.allow = []string{"--allow-domain", "good.test", "--allow-domain", "*.wild.test",
		"--allow-domain", "local.test", "--allow-domain", "127.0.0.2"}
	// Each probe prints NAME:body on success and NAME:refused on failure.
	good, local, bad := p.good, p.local, p.bad
	p.script = fmt.Sprintf(`
c() { n=$1; shift; if out=$(%[1]s -fsS --max-time 10 "$@" 2>/dev/null); then echo "$n:$out"; else echo "$n:refused"; fi; }
c plain %[2]s
c connect -p %[3]s
c socks -x "$ALL_PROXY" %[2]s
c socks-ip -x "$ALL_PROXY" %[4]s
c https -k https://good.test:%[11]d/
c lookalike %[5]s
c lookalike2 %[6]s
c bareip %[7]s
c decimal %[8]s
c socks-bareip -x "$ALL_PROXY" %[7]s
c local %[9]s
c direct --noproxy '*' %[4]s
c direct-bad --noproxy '*' %[7]s
if (exec 3<>/dev/tcp/127.0.0.4/%[10]d) 2>/dev/null; then echo devtcp:connected; else echo devtcp:refused; fi
`, curl, good.at("good.test"), good.at("x.wild.test"), good.at("127.0.0.2"),
		bad.at("good.test.evil.test"), bad.at("evilgood.test"), bad.at("127.0.0.4"),
		bad.at("2130706436"), local.at("local.test"), bad.port, tlsPort)
	p.want = map[string]string{
		"plain": "good-ok", "connect": "good-ok", "socks": "good-ok", "socks-ip": "good-ok", "https": "tls-ok",
		"lookalike": "refused", "lookalike2": "refused", "bareip": "refused", "decimal": "refused",
		"socks-bareip": "refused", "local": "refused", "direct": "refused", "direct-bad": "refused",
		"devtcp": "refused",
	}
	return p
}

// reset zeroes the servers' counters.
func (p *egressProbe) reset() {
	p.good.hits.Store(0)
	p.local.hits.Store(0)
	p.bad.hits.Store(0)
	p.tlsHits.Store(0)
}

// check judges one run of the script: its output, what the servers saw
// (the ground truth), the refusals summarised on stderr and the report.
func (p *egressProbe) check(t *testing.T, stdout, stderr string, rep runReport) {
	t.Helper()
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			got[k] = strings.TrimSpace(v)
		}
	}
	for k, v := range p.want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	if n := p.good.hits.Load(); n != 4 {
		t.Errorf("host: the allowed server got %d requests, want 4", n)
	}
	if n := p.tlsHits.Load(); n != 1 {
		t.Errorf("host: the HTTPS server got %d requests, want 1", n)
	}
	if n := p.bad.hits.Load() + p.local.hits.Load(); n != 0 {
		t.Errorf("host: refused servers got %d requests", n)
	}
	bad, local := p.bad, p.local
	refusals := []string{
		fmt.Sprintf("agentbox: network: refused good.test.evil.test:%d (not in allowed_domains)", bad.port),
		fmt.Sprintf("agentbox: network: refused evilgood.test:%d (not in allowed_domains)", bad.port),
		fmt.Sprintf("agentbox: network: refused 127.0.0.4:%d (not in allowed_domains, 3 times)", bad.port),
		fmt.Sprintf("agentbox: network: refused local.test:%d (resolves to local address 127.0.0.3 (allow_local_binding is off))", local.port),
	}
	for _, line := range refusals {
		if !strings.Contains(stderr, line+"\n") {
			t.Errorf("stderr lacks %q:\n%s", line, stderr)
		}
	}
	if rep.ExitCode != 0 || rep.Network.Mode != "allow-list" {
		t.Errorf("report: %+v", rep)
	}
	denied := map[string]int{}
	for _, d := range rep.Network.Denied {
		denied[fmt.Sprintf("%s:%d", d.Host, d.Port)] += d.Count
	}
	wantDenied := map[string]int{
		fmt.Sprintf("good.test.evil.test:%d", bad.port): 1,
		fmt.Sprintf("evilgood.test:%d", bad.port):       1,
		fmt.Sprintf("127.0.0.4:%d", bad.port):           3,
		fmt.Sprintf("local.test:%d", local.port):        1,
	}
	for hp, n := range wantDenied {
		if denied[hp] != n {
			t.Errorf("report: %s refused %d times, want %d: %+v", hp, denied[hp], n, rep.Network.Denied)
		}
	}
	if len(denied) != len(wantDenied) {
		t.Errorf("report: refusals %+v, want exactly %v", rep.Network.Denied, wantDenied)
	}
	allowed := 0
	for _, a := range rep.Network.Allowed {
		allowed += a.Count
	}
	if allowed != 5 {
		t.Errorf("report: %d allowed connections, want 5: %+v", allowed, rep.Network.Allowed)
	}
}

// TestEgressAllowList: with an allow-list the command reaches the listed
// hosts through agentbox's proxy (plain HTTP, CONNECT and SOCKS5), and
// nothing else: not look-alike names, not bare addresses, not a name that
// resolves to an unlisted local address, and not anything reached
// directly, ignoring the proxy. The servers on the host count what
// reached them; stderr and the report list every refusal.
func TestEgressAllowList(t *testing.T) {
	needBin(t)
	p := newEgressProbe(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		p.reset()
		fx := newFixture(t, u)
		report := filepath.Join(fx.dir, "report.json")
		args := append([]string{"run", "-C", fx.ws, "--report", report}, p.allow...)
		args = append(args, "--", "/bin/bash", "-c", p.script)
		r := runWith(t, u, runOpts{dir: fx.ws, env: []string{"AGENTBOX_TEST_HOSTS=" + p.hosts}}, args...)
		if r.code != 0 {
			t.Fatalf("run failed: %v", r)
		}
		p.check(t, r.stdout, r.stderr, readReport(t, report))
	})
}

// TestEgressAllowLocalBinding: with allow_local_binding, a listed name
// that resolves to a local address is reachable; a bare unlisted address
// still is not.
func TestEgressAllowLocalBinding(t *testing.T) {
	needBin(t)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl on this machine")
	}
	local := listenWeb(t, "127.0.0.3", "local")
	hosts := filepath.Join(baseDir, "egress-hosts-local")
	if err := os.WriteFile(hosts, []byte("127.0.0.3 local.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	forEachUser(t, func(t *testing.T, u *testUser) {
		local.hits.Store(0)
		fx := newFixture(t, u)
		cfg := filepath.Join(fx.dir, "config.toml")
		if err := os.WriteFile(cfg, []byte("[network]\nallowed_domains = [\"local.test\"]\nallow_local_binding = true\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		script := fmt.Sprintf(`%[1]s -fsS %[2]s; %[1]s -fsS %[3]s || echo bare:refused`, curl, local.at("local.test"), local.at("127.0.0.3"))
		r := runWith(t, u, runOpts{dir: fx.ws, env: []string{"AGENTBOX_TEST_HOSTS=" + hosts}},
			"run", "-C", fx.ws, "--config", cfg, "--", "/bin/sh", "-c", script)
		if !strings.Contains(r.stdout, "local-ok") || !strings.Contains(r.stdout, "bare:refused") {
			t.Errorf("want local.test served and 127.0.0.3 refused: %v", r)
		}
		if n := local.hits.Load(); n != 1 {
			t.Errorf("host: local server got %d requests, want 1", n)
		}
	})
}

// TestEgressContractErrors: an allow-list with the network fully on, and
// malformed patterns, are agentbox failures (125) naming what is wrong,
// and nothing runs. --report records the failure.
func TestEgressContractErrors(t *testing.T) {
	needBin(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		marker := filepath.Join(fx.ws, "ran")
		report := filepath.Join(fx.dir, "report.json")
		cases := []struct {
			args []string
			want []string
		}{
			{[]string{"--network", "--allow-domain", "a.test"}, []string{"--network", "--allow-domain"}},
			{[]string{"--allow-domain", "*"}, []string{"--allow-domain", `"*"`}},
			{[]string{"--allow-domain", "https://a.test"}, []string{"--allow-domain", "scheme"}},
			{[]string{"--allow-domain", "10.0.0.1/8"}, []string{"--allow-domain", "host bits"}},
			{[]string{"--allow-domain", "a.test:70000"}, []string{"--allow-domain", "70000"}},
		}
		for _, c := range cases {
			args := append([]string{"run", "-C", fx.ws, "--report", report}, c.args...)
			args = append(args, "--", "/bin/sh", "-c", "touch "+marker)
			r := runWith(t, u, runOpts{dir: fx.ws}, args...)
			if r.code != 125 {
				t.Errorf("%q: exit %d, want 125: %v", c.args, r.code, r)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("%q: stderr lacks %q: %q", c.args, w, r.stderr)
				}
			}
			if exists(marker) {
				t.Errorf("%q: the command ran", c.args)
				os.Remove(marker)
			}
			if rep := readReport(t, report); rep.ExitCode != 125 {
				t.Errorf("%q: report exit_code %d, want 125", c.args, rep.ExitCode)
			}
		}
	})
}

// TestEgressDegraded: without user namespaces (hence without a network
// namespace) an allow-list still confines the command: agentbox names the
// gap and refuses unless --allow-degraded; with it, the proxy on the
// host's loopback is the command's only TCP destination (every connect is
// checked by the supervisor), allowed names work through it, and direct
// connections, bare IPs, UDP and listening sockets are refused.
func TestEgressDegraded(t *testing.T) {
	needBin(t)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl on this machine")
	}
	good := listenWeb(t, "127.0.0.2", "good")
	bad := listenWeb(t, "127.0.0.4", "bad")
	udp := listenUDP(t)
	hosts := filepath.Join(baseDir, "egress-hosts-degraded")
	if err := os.WriteFile(hosts, []byte("127.0.0.2 good.test\n127.0.0.4 evil.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	allow := []string{"--allow-domain", "good.test", "--allow-domain", "127.0.0.2"}
	script := fmt.Sprintf(`
c() { n=$1; shift; if out=$(%[1]s -fsS --max-time 10 "$@" 2>/dev/null); then echo "$n:$out"; else echo "$n:refused"; fi; }
c plain %[2]s
c connect -p %[2]s
c socks -x "$ALL_PROXY" %[2]s
c evil %[3]s
c bareip %[4]s
c direct --noproxy '*' %[5]s
c direct-bad --noproxy '*' %[4]s
if (exec 3<>/dev/tcp/127.0.0.4/%[6]d) 2>/dev/null; then echo devtcp:connected; else echo devtcp:refused; fi
if (echo ping >/dev/udp/127.0.0.1/%[7]s) 2>/dev/null; then echo udp:sent; else echo udp:refused; fi
`, curl, good.at("good.test"), bad.at("evil.test"), bad.at("127.0.0.4"), good.at("127.0.0.2"), bad.port, udp.addr)
	want := map[string]string{
		"plain": "good-ok", "connect": "good-ok", "socks": "good-ok",
		"evil": "refused", "bareip": "refused", "direct": "refused", "direct-bad": "refused",
		"devtcp": "refused", "udp": "refused",
	}
	forEachUser(t, func(t *testing.T, u *testUser) {
		good.hits.Store(0)
		bad.hits.Store(0)
		udp.hits.Store(0)
		fx := newFixture(t, u)
		r := degraded(t, fx, allow, `echo ran > "$WS/ran.txt"`)
		if r.code != 125 || !strings.Contains(r.stderr, "--allow-degraded") || !strings.Contains(r.stderr, "allow-list proxy listens on the host's loopback") {
			t.Errorf("without --allow-degraded: want 125 naming the proxy gap: %v", r)
		}
		assertAbsent(t, filepath.Join(fx.ws, "ran.txt"))

		report := filepath.Join(fx.dir, "report.json")
		args := append([]string{"--allow-degraded", "--report", report}, allow...)
		r = degradedWith(t, fx, []string{"AGENTBOX_TEST_HOSTS=" + hosts}, args, script)
		if r.code != 0 {
			t.Fatalf("run failed: %v", r)
		}
		got := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok {
				got[k] = strings.TrimSpace(v)
			}
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: got %q, want %q (stderr %q)", k, got[k], v, r.stderr)
			}
		}
		time.Sleep(100 * time.Millisecond) // let a datagram land
		if n := good.hits.Load(); n != 3 {
			t.Errorf("host: the allowed server got %d requests, want 3", n)
		}
		if n := bad.hits.Load() + udp.hits.Load(); n != 0 {
			t.Errorf("host: refused servers got %d requests/datagrams", n)
		}
		if !strings.Contains(r.stderr, fmt.Sprintf("agentbox: network: refused evil.test:%d (not in allowed_domains)", bad.port)) {
			t.Errorf("stderr lacks the refusal of evil.test: %q", r.stderr)
		}
		if rep := readReport(t, report); rep.Network.Mode != "allow-list" || len(rep.Network.Denied) != 2 {
			t.Errorf("report: %+v", rep)
		}
	})
}

// TestEgressDoctor: doctor says how allow-listed egress is enforced here,
// having run one (the network namespace with the proxy outside, or, with
// no user namespaces, the degraded host-loopback proxy and connect
// supervisor), and names every malformed pattern of the config with its
// key (exit 125), not only the first.
func TestEgressDoctor(t *testing.T) {
	needBin(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		egressLine := func(out string) string {
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "allow-listed egress") {
					return l
				}
			}
			return ""
		}
		r := runWith(t, u, runOpts{dir: fx.ws}, "doctor", "-C", fx.ws, "--allow-domain", "good.test", "--allow-domain", "10.1.2.0/24")
		if l := egressLine(r.stdout); r.code != 0 || !strings.Contains(l, "[ok  ]") || !strings.Contains(l, "available: the sandbox's own network namespace") {
			t.Errorf("doctor with an allow-list: %q\n%v", l, r)
		}
		if !strings.Contains(r.stdout, `2 allowed and 0 denied patterns, all well-formed; local addresses allowed by listing them: "10.1.2.0/24"`) {
			t.Errorf("doctor does not describe the allow-list: %v", r)
		}
		r = execute(t, u, runOpts{dir: fx.ws}, "unshare", "-Ur", "sh", "-c", `echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" "$@"`,
			binPath, "doctor", "-C", fx.ws, "--allow-domain", "good.test")
		if l := egressLine(r.stdout); !strings.Contains(l, "[ok  ]") || !strings.Contains(l, "degraded only (needs --allow-degraded)") || !strings.Contains(l, "connect supervisor") {
			t.Errorf("doctor without user namespaces: %q\n%v", l, r)
		}
		cfg := filepath.Join(fx.dir, "config.toml")
		if err := os.WriteFile(cfg, []byte("[network]\nallowed_domains = [\"good.test\", \"*\", \"a.test:70000\"]\ndenied_domains = [\"https://x.test\"]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r = runWith(t, u, runOpts{dir: fx.ws}, "doctor", "-C", fx.ws, "--config", cfg)
		if r.code != 125 {
			t.Errorf("doctor with malformed patterns: exit %d, want 125: %v", r.code, r)
		}
		for _, w := range []string{`network.allowed_domains: "*"`, `network.allowed_domains: "a.test:70000"`, `network.denied_domains: "https://x.test"`} {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("doctor does not name %s: %q", w, r.stderr)
			}
		}
	})
}
