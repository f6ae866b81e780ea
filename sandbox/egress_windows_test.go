package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/internal/windows/loopguard"
	winsetup "github.com/agentbox/agentbox/internal/windows/setup"
	"github.com/agentbox/agentbox/internal/windows/winapi"
	"github.com/agentbox/agentbox/policy"
)

// egressHelper runs the network probes; -1 for unknown names. Each exits
// 0 when the connection (or request) went through.
func egressHelper(name string, args []string) int {
	switch name {
	case "dial": // connect to args[0] directly, ignoring any proxy
		c, err := net.DialTimeout("tcp", args[0], 5*time.Second)
		if err != nil {
			fmt.Println("dial:", err)
			return 1
		}
		c.Close()
		fmt.Println("dial: connected")
		return 0
	case "proxyget": // GET args[0] through the proxy args[1] (default $HTTP_PROXY), print the body
		p := os.Getenv("HTTP_PROXY")
		if len(args) > 1 {
			p = args[1]
		}
		pu, err := url.Parse(p)
		if err != nil || p == "" {
			fmt.Println("proxyget: no proxy:", p, err)
			return 2
		}
		// An explicit proxy: Go's ProxyFromEnvironment never proxies
		// loopback destinations, and the test origin is on 127.0.0.2.
		cl := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
		resp, err := cl.Get(args[0])
		if err != nil {
			fmt.Println("proxyget:", err)
			return 1
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Print(string(b))
		if resp.StatusCode != 200 {
			return 1
		}
		return 0
	case "proxywait": // print $HTTP_PROXY, then wait for stdin to close
		fmt.Println(os.Getenv("HTTP_PROXY"))
		io.Copy(io.Discard, os.Stdin)
		return 0
	}
	return -1
}

// allowList returns pol with an allow-list of names.
func allowList(t *testing.T, pol *policy.Policy, names ...string) *policy.Policy {
	t.Helper()
	r, err := policy.ParseAllowList(names, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return policytest.Edit(pol, func(f *policytest.Fields) { f.Egress = r })
}

// freeRange finds n consecutive ports on 127.0.0.1 that nothing listens
// on now, for a test marker's proxy range.
func freeRange(t *testing.T, n int) []int {
	t.Helper()
	for range 50 {
		first := 42000 + rand.IntN(6000)
		ok := true
		for p := first; p < first+n && ok; p++ {
			ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				continue
			}
			ln.Close()
		}
		if ok {
			return loopguard.PortRange(first, n)
		}
	}
	t.Fatal("no free port range")
	return nil
}

// TestElevatedAllowListNeedsProxyPorts: a setup that opened no proxy
// range (version 2's, or one whose marker lost it) refuses an allow-list
// before anything is touched, and says to run setup again.
func TestElevatedAllowListNeedsProxyPorts(t *testing.T) {
	pol, pd := elevatedPolicy(t, policy.WorkspaceWrite)
	pol = allowList(t, pol, "good.test")
	writeMarker(t, pd, validMarker())
	err := runElevated(t, pol)
	if !isStartCode(err, CodeSandboxFailure) || !errors.Is(err, winsetup.ErrOutdated) || !strings.Contains(err.Error(), "opened no proxy ports") ||
		!strings.Contains(err.Error(), "run `agentbox setup` again") {
		t.Fatalf("Run = %v, want 125 saying setup must run again", err)
	}
	dir := stateDir()
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("a refused run created the state dir %s", dir)
	}
}

// TestElevatedForeignListener: a program listening on a port of the
// proxy range stops every Offline run, network off or allow-listed, with
// a message naming the port (and, where the TCP table names it, the
// process); doctor says the same.
func TestElevatedForeignListener(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprint("allow-list=", allow), func(t *testing.T) {
			pol, pd := elevatedPolicy(t, policy.WorkspaceWrite)
			if allow {
				pol = allowList(t, pol, "good.test")
			}
			m := validMarker()
			m.ProxyPorts = []int{port, port + 1}
			writeMarker(t, pd, m)
			stubFirewall(t, nil)
			err := runElevated(t, pol)
			want := fmt.Sprintf("port %d (127.0.0.1) is held by process ", port)
			if !isStartCode(err, CodeSandboxFailure) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "refusing to run") {
				t.Fatalf("Run = %v, want 125 naming %q", err, want)
			}
			if !winapi.IsWine() && !strings.Contains(err.Error(), fmt.Sprintf("process %d,", os.Getpid())) {
				t.Errorf("error %q does not name this process (%d)", err, os.Getpid())
			}
			r := Doctor(pol)
			if c, ok := check(r, "proxy ports"); !ok || c.OK || !strings.Contains(c.Detail, want) || r.CanSandbox {
				t.Errorf("doctor: %+v (can sandbox %v)", c, r.CanSandbox)
			}
		})
	}
}

// TestElevatedAllowListReleases: an allow-listed run that cannot start
// (here: no credentials) leaves no proxy behind: its ports are free and
// unregistered again. Under Wine this runs the whole proxy start-up: the
// TCP table, the listener check, the exclusive listeners, the registry.
func TestElevatedAllowListReleases(t *testing.T) {
	pol, pd := elevatedPolicy(t, policy.WorkspaceWrite)
	pol = allowList(t, pol, "good.test")
	m := validMarker()
	m.ProxyPorts = freeRange(t, 4)
	writeMarker(t, pd, m)
	stubFirewall(t, nil)
	// While the run starts: two ports of the range held, exclusively,
	// and registered as this process's.
	var held []int
	egressStarted = func(eg *elevatedEgress) {
		dir := stateDir()
		owned := loopguard.Owned(dir)
		for _, p := range eg.ports {
			if ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
				ln.Close()
				t.Errorf("proxy port %d not held while the run starts", p)
			}
			if owned[p] != uint32(os.Getpid()) {
				t.Errorf("proxy port %d registered to %d, want %d", p, owned[p], os.Getpid())
			}
		}
		held = eg.ports
		if len(eg.env) == 0 || !strings.Contains(strings.Join(eg.env, " "), fmt.Sprintf("HTTP_PROXY=http://127.0.0.1:%d", eg.ports[0])) {
			t.Errorf("proxy env %v", eg.env)
		}
	}
	t.Cleanup(func() { egressStarted = nil })
	err := runElevated(t, pol)
	if len(held) != 2 {
		t.Fatalf("proxy held ports %v, want two of %v", held, m.ProxyPorts)
	}
	if !isStartCode(err, CodeSandboxFailure) || errors.Is(err, winsetup.ErrOutdated) {
		t.Fatalf("Run = %v, want 125 for the missing credentials", err)
	}
	t.Logf("run refused as expected: %v", err)
	dir := stateDir()
	if o := loopguard.Owned(dir); len(o) != 0 {
		t.Errorf("registry still holds %v", o)
	}
	for _, p := range m.ProxyPorts {
		ln, err := loopguard.Listen(p)
		if err != nil {
			t.Errorf("port %d still held: %v", p, err)
			continue
		}
		ln.Close()
	}
	// With a healthy range doctor reports it open and checked, and the
	// allow-list as the firewall's.
	r := Doctor(pol)
	if c, ok := check(r, "proxy ports"); !ok || !c.OK || !strings.Contains(c.Detail, "127.0.0.1:") {
		t.Errorf("doctor: %+v", c)
	}
	if c, _ := check(r, "network"); !c.OK || !strings.HasPrefix(c.Detail, "allow-list, enforced") {
		t.Errorf("doctor network: %+v", c)
	}
}

// TestEnforceElevatedAllowList is the Windows-host enforcement test of
// elevated allow-listed egress. It needs a real Windows host where
// `agentbox setup` (version 3) completed and AGENTBOX_TEST_ELEVATED=1;
// under Wine it skips (Wine fakes users and logon and has no firewall).
// It proves, with the host checking the origin: an allowed name through
// the run's proxy works; direct connections (the origin, another loopback
// port, the internet) are blocked by the firewall; and a run cannot use
// another run's proxy port: the connection is refused and reported in the
// other run's report.
func TestEnforceElevatedAllowList(t *testing.T) {
	if winapi.IsWine() {
		t.Skip("enforcement unverified under Wine: Wine fakes users and logon and has no firewall; needs a real Windows host")
	}
	if os.Getenv("AGENTBOX_TEST_ELEVATED") != "1" {
		t.Skip("set AGENTBOX_TEST_ELEVATED=1 on a host where `agentbox setup` ran to run elevated commands for real")
	}
	st := winsetup.GetStatus()
	if st.Err != nil || !st.GrantsDone || len(st.Marker.ProxyPorts) < 4 {
		t.Skipf("elevated setup not usable here: %v (read grants done: %v, proxy ports %v)", st.Err, st.GrantsDone, st.Marker)
	}
	// The origin: on 127.0.0.2, outside the range, so the command can
	// reach it only through the proxy.
	oln, err := net.Listen("tcp4", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "origin-ok")
	})}
	go srv.Serve(oln)
	defer srv.Close()
	origin := oln.Addr().String()
	oport := oln.Addr().(*net.TCPAddr).Port
	hosts := filepath.Join(mkTemp(t, "hosts"), "hosts")
	os.WriteFile(hosts, []byte("127.0.0.2 good.test\n"), 0o644)
	t.Setenv(testHostsEnv, hosts)
	// Another service on the host's loopback, outside the range.
	other, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	pol, _ := testPolicy(t, policy.WorkspaceWrite)
	pol = policytest.Edit(pol, func(f *policytest.Fields) { f.Windows = policy.Elevated })
	pol = allowList(t, pol, "good.test", "127.0.0.2")
	t.Cleanup(func() { Cleanup(context.Background(), io.Discard) })
	run := func(helper string, args ...string) (bool, string, *RunReport) {
		c := Command(pol, exe(t), args...)
		c.Env = helperEnv(helper)
		out, err := c.CombinedOutput()
		return err == nil, string(out), c.Report
	}

	ok, out, rep := run("proxyget", fmt.Sprintf("http://good.test:%d/", oport))
	if !ok || out != "origin-ok" || hits.Load() != 1 {
		t.Fatalf("allowed name through the proxy: ok=%v %q, origin hits %d", ok, out, hits.Load())
	}
	if rep == nil || len(rep.Network.Allowed) != 1 {
		t.Errorf("report %+v", rep)
	}
	for _, to := range []string{origin, other.Addr().String(), "[::1]:" + fmt.Sprint(oport), "1.1.1.1:443"} {
		if ok, out, _ := run("dial", to); ok {
			t.Errorf("direct connection to %s went through: %s", to, out)
		}
	}
	if hits.Load() != 1 {
		t.Errorf("origin saw %d requests, want 1 (a direct connection reached it)", hits.Load())
	}

	// Run A holds its proxy while run B tries to use it.
	ca := Command(pol, exe(t))
	ca.Env = helperEnv("proxywait")
	aout, aw := io.Pipe()
	ca.Stdout = aw
	stdinR, stdinW := io.Pipe()
	ca.Stdin = stdinR
	if err := ca.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(aout).ReadString('\n')
	go io.Copy(io.Discard, aout)
	aProxy := strings.TrimSpace(line)
	if err != nil || !strings.HasPrefix(aProxy, "http://127.0.0.1:") {
		stdinW.Close()
		ca.Wait()
		t.Fatalf("run A's proxy: %q, %v", line, err)
	}
	ok, out, _ = run("proxyget", fmt.Sprintf("http://good.test:%d/", oport), aProxy)
	stdinW.Close()
	ca.Wait()
	aw.Close()
	if ok || hits.Load() != 1 {
		t.Errorf("run B used run A's proxy %s: ok=%v %q, origin hits %d", aProxy, ok, out, hits.Load())
	}
	if ca.Report == nil || !hasDenial(ca.Report, "not part of this run") {
		t.Errorf("run A's report does not show B's connection refused: %+v", ca.Report)
	}
}

func hasDenial(r *RunReport, reason string) bool {
	if r.Network == nil {
		return false
	}
	for _, d := range r.Network.Denied {
		if strings.Contains(d.Reason, reason) {
			return true
		}
	}
	return false
}
