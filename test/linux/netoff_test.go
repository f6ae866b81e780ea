//go:build linux

package linux

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// With the network off, a command that tries the network must fail at
// once, and the run must end with one line on stderr that says so and
// names a host to allow. These tests run the same probe through the three
// paths a run takes (a lone run, the resident helper, a session through
// agentbox mcp) and check the timing, the line and the report.

// netoffProbe is a script that looks up names in the ways tools do
// (getent through glibc's NSS, Python's getaddrinfo, curl through its
// proxy variables when it has them) and prints how each ended, and the
// names it asked for.
type netoffProbe struct {
	getent, py string // names looked up
	curl       string // curl's path, "" without curl
}

func newNetoffProbe() *netoffProbe {
	p := &netoffProbe{getent: randName("nosuch-") + ".example.com", py: randName("nopy-") + ".example.org"}
	p.curl, _ = exec.LookPath("curl")
	return p
}

func (p *netoffProbe) script() string {
	s := fmt.Sprintf(`getent hosts %s; echo "getent=$?"
/usr/bin/python3 -c '
import socket, sys
try:
    socket.getaddrinfo(sys.argv[1], 443)
    print("py=resolved")
except socket.gaierror as e:
    print("py=%%d" %% e.errno)
' %s
/usr/bin/python3 -c '
import socket
try:
    socket.create_connection(("192.0.2.1", 443), timeout=10)
    print("connect=connected")
except OSError as e:
    print("connect=%%d" %% e.errno)
'
`, p.getent, p.py)
	if p.curl != "" {
		s += p.curl + ` -sS --max-time 30 -o /dev/null https://registry.npmjs.org/; echo "curl=$?"` + "\n"
	}
	return s
}

// hosts are the names and addresses the probe must have been refused.
func (p *netoffProbe) hosts() []string {
	h := []string{p.getent, p.py, "192.0.2.1"}
	if p.curl != "" {
		h = append(h, "registry.npmjs.org")
	}
	return h
}

// check checks the probe's output, the run's stderr and report, and its
// duration.
func (p *netoffProbe) check(t *testing.T, stdout, stderr string, rep runReport, took time.Duration) {
	t.Helper()
	if took > 5*time.Second {
		t.Errorf("the probe took %v with the network off, want well under 5 s", took.Round(time.Millisecond))
	}
	if !strings.Contains(stdout, "getent=2\n") {
		t.Errorf("getent of an unknown name: want exit 2 (not found), got %q", stdout)
	}
	if !strings.Contains(stdout, "py=-2\n") { // EAI_NONAME: no such name, not "try again"
		t.Errorf("getaddrinfo: want EAI_NONAME (-2), got %q", stdout)
	}
	if !strings.Contains(stdout, "connect=101\n") { // ENETUNREACH
		t.Errorf("a connect to an address: want ENETUNREACH (101), got %q", stdout)
	}
	if p.curl != "" && (strings.Contains(stdout, "curl=0\n") || !strings.Contains(stdout, "curl=")) {
		t.Errorf("curl https://registry.npmjs.org/ with the network off: %q", stdout)
	}
	checkNetoffLine(t, stderr, p.hosts())
	if rep.Network.Mode != "off" {
		t.Errorf("report: network mode %q, want off", rep.Network.Mode)
	}
	seen := map[string]bool{}
	for _, d := range rep.Network.Denied {
		if d.Reason != "network off" || d.Count < 1 {
			t.Errorf("report: denied entry %+v, want reason \"network off\" and a count", d)
		}
		seen[d.Host] = true
	}
	for _, h := range p.hosts() {
		if !seen[h] {
			t.Errorf("report: %s is not among the refused hosts %+v", h, rep.Network.Denied)
		}
	}
	if len(rep.Network.Allowed) != 0 {
		t.Errorf("report: allowed %+v with the network off", rep.Network.Allowed)
	}
	// The request that would have allowed them, for an agent to ask.
	for _, h := range p.hosts() {
		if rep.Suggest == nil || !slices.Contains(rep.Suggest.AllowDomains, h) {
			t.Errorf("report: suggest %+v does not hold %s", rep.Suggest, h)
		}
	}
}

// checkNetoffLine checks that stderr holds exactly one line about the
// network, that it says the network is off, names one of hosts and says
// how to allow it.
func checkNetoffLine(t *testing.T, stderr string, hosts []string) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "agentbox: network") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Errorf("want one line about the network on stderr, got %d: %q", len(lines), stderr)
		return
	}
	l := lines[0]
	named := slices.ContainsFunc(hosts, func(h string) bool { return strings.Contains(l, "--allow-domain "+h) })
	if !strings.HasPrefix(l, "agentbox: network is off: ") || !named {
		t.Errorf("the line %q does not say the network is off and how to allow one of %v", l, hosts)
	}
}

// checkQuiet checks a run that never touched the network: nothing about
// it on stderr, nothing refused in the report.
func checkQuiet(t *testing.T, stderr string, rep runReport) {
	t.Helper()
	if strings.Contains(stderr, "agentbox: network") {
		t.Errorf("a run that never tried the network printed: %q", stderr)
	}
	if rep.Network.Mode != "off" || len(rep.Network.Denied) != 0 || rep.Suggest != nil {
		t.Errorf("report of a run that never tried the network: %+v, suggest %+v", rep.Network, rep.Suggest)
	}
}

// etcProbe prints what the sandbox's resolver files say and whether the
// command can change them, and resolves the names they hold.
const etcProbe = `grep -v '^#' /etc/resolv.conf
if (echo x >> /etc/resolv.conf) 2>/dev/null; then echo resolv:writable; fi
if (echo x >> /etc/hosts) 2>/dev/null; then echo hosts:writable; fi
getent hosts localhost >/dev/null && echo localhost:ok
getent hosts "$(hostname)" >/dev/null && echo hostname:ok
echo "proxy=$https_proxy"
`

// TestNetworkOffLone: a lone run (the resident helper switched off).
func TestNetworkOffLone(t *testing.T) {
	needPython(t)
	p := newNetoffProbe()
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		hostResolv, _ := os.ReadFile("/etc/resolv.conf")
		report := filepath.Join(fx.dir, "report.json")
		o := runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0"), dir: fx.ws, timeout: 60 * time.Second}
		r := runWith(t, u, o, "run", "-C", fx.ws, "--report", report, "--", "/bin/sh", "-c", p.script())
		if r.code == 125 {
			t.Fatalf("agentbox failed: %v", r)
		}
		p.check(t, r.stdout, r.stderr, readReport(t, report), r.dur)

		r = runWith(t, u, o, "run", "-C", fx.ws, "--report", report, "--", "/bin/sh", "-c", etcProbe)
		if r.code != 0 || !strings.Contains(r.stdout, "nameserver 127.0.0.1\n") || strings.Contains(r.stdout, "writable") ||
			!strings.Contains(r.stdout, "localhost:ok") || !strings.Contains(r.stdout, "hostname:ok") {
			t.Errorf("the sandbox's /etc/resolv.conf and /etc/hosts: %v", r)
		}
		checkQuiet(t, r.stderr, readReport(t, report))
		if b, _ := os.ReadFile("/etc/resolv.conf"); string(b) != string(hostResolv) {
			t.Errorf("host: /etc/resolv.conf changed: %q", b)
		}

		// --network: the host's resolver files, no proxy.
		r = runWith(t, u, o, "run", "-C", fx.ws, "--network", "--", "/bin/sh", "-c", `cat /etc/resolv.conf; echo "proxy=$https_proxy"`)
		if r.code != 0 || r.stdout != string(hostResolv)+"proxy=\n" {
			t.Errorf("--network: want the host's /etc/resolv.conf and no proxy: %v", r)
		}
	})
}

// TestNetworkOffResident: the same through the resident helper.
func TestNetworkOffResident(t *testing.T) {
	needPython(t)
	p := newNetoffProbe()
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		re := newResidentEnv(t, fx)
		re.warm(t)
		report := filepath.Join(fx.dir, "report.json")
		o := runOpts{timeout: 60 * time.Second}
		ok, r := re.served(t, o, []string{"--report", report}, p.script())
		if !ok {
			t.Fatalf("the helper did not serve the run: %v", r)
		}
		p.check(t, r.stdout, r.stderr, readReport(t, report), r.dur)
		// The lean client's path (no --report): the line too.
		ok, r = re.served(t, o, nil, p.script())
		if !ok {
			t.Fatalf("the helper did not serve the lean run: %v", r)
		}
		checkNetoffLine(t, r.stderr, p.hosts())
		ok, r = re.served(t, o, []string{"--report", report}, "echo quiet")
		if !ok || r.code != 0 {
			t.Fatalf("quiet run: served %v, %v", ok, r)
		}
		checkQuiet(t, r.stderr, readReport(t, report))
	})
}

// TestNetworkOffSession: the same through agentbox mcp, and each call's
// report and line hold its own look-ups alone, also when calls run at the
// same time.
func TestNetworkOffSession(t *testing.T) {
	needPython(t)
	p := newNetoffProbe()
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		cs, _, _ := mcpServer(t, u, fx)
		start := time.Now()
		r := mcpSh(t, cs, p.script())
		p.check(t, r.Stdout, r.Stderr, r.Report, time.Since(start))
		r = mcpSh(t, cs, etcProbe)
		if r.ExitCode != 0 || !strings.Contains(r.Stdout, "nameserver 127.0.0.1\n") || strings.Contains(r.Stdout, "writable") ||
			!strings.Contains(r.Stdout, "localhost:ok") {
			t.Errorf("the session's /etc/resolv.conf and /etc/hosts: %v", r)
		}
		checkQuiet(t, r.Stderr, r.Report)

		// Calls at once: each looks its own name up (through glibc and
		// through Python) and asks the proxy for it (curl) while all of
		// them run.
		const n = 3
		results := make([]mcpResult, n)
		names := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			names[i] = randName(fmt.Sprintf("call%d-", i)) + ".example.net"
			curl := ""
			if p.curl != "" {
				curl = p.curl + " -sS --max-time 10 -o /dev/null https://" + names[i] + "/ 2>/dev/null"
			}
			script := fmt.Sprintf(`touch "$WS/call%[1]d"; for _ in $(seq 100); do [ "$(ls "$WS"/call* | wc -l)" -ge %[2]d ] && break; sleep 0.05; done
getent hosts %[3]s; /usr/bin/python3 -c 'import socket,sys
try: socket.getaddrinfo(sys.argv[1], 80)
except socket.gaierror: pass' %[3]s
%[4]s
touch "$WS/done%[1]d"; for _ in $(seq 100); do [ "$(ls "$WS"/done* | wc -l)" -ge %[2]d ] && break; sleep 0.05; done`, i, n, names[i], curl)
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = mcpSh(t, cs, script)
			}()
		}
		wg.Wait()
		for i, r := range results {
			d := r.Report.Network.Denied
			want := 1 // the look-ups
			if p.curl != "" {
				want = 2 // and the proxy's request, port 443
			}
			if len(d) != want || slices.ContainsFunc(d, func(e struct {
				Host   string `json:"host"`
				Port   int    `json:"port"`
				Reason string `json:"reason"`
				Count  int    `json:"count"`
			}) bool {
				return e.Host != names[i] || e.Reason != "network off"
			}) {
				t.Errorf("call %d at once with others: denied %+v, want %s alone (%d entries)", i, d, names[i], want)
			}
			checkNetoffLine(t, r.Stderr, names[i:i+1])
		}
	})
}

// TestNetworkOffNpm: npm, which retries a failed request twice (after 10
// and 60 s) whether the name did not resolve or the connection failed,
// gives up at once, and the run names its registry.
func TestNetworkOffNpm(t *testing.T) {
	needBin(t)
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("no npm on this machine")
	}
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		o := runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0"), dir: fx.ws, timeout: 120 * time.Second}
		r := runWith(t, u, o, "run", "-C", fx.ws, "--", npm, "install", "left-pad")
		t.Logf("npm install left-pad with the network off: exit %d after %v", r.code, r.dur.Round(time.Millisecond))
		if r.code == 0 || r.code == 125 {
			t.Errorf("npm install: %v", r)
		}
		if r.dur > 10*time.Second {
			t.Errorf("npm install took %v to fail, want under 10 s", r.dur.Round(time.Millisecond))
		}
		checkNetoffLine(t, r.stderr, []string{"registry.npmjs.org"})
	})
}

// TestNetworkOffDegraded: without a network namespace (degraded mode)
// seccomp refuses every inet socket; a look-up fails at once there too.
func TestNetworkOffDegraded(t *testing.T) {
	needPython(t)
	p := newNetoffProbe()
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		start := time.Now()
		r := degraded(t, fx, []string{"--allow-degraded"}, p.script())
		took := time.Since(start)
		if r.code == 125 || took > 5*time.Second || !strings.Contains(r.stdout, "getent=2\n") {
			t.Errorf("degraded, network off: want the look-ups to fail at once: %v (%v)", r, took)
		}
		t.Logf("degraded: %v", r)
	})
}
