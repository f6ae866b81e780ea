package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/policy"
)

// TestCmdReport: the library exposes the run report on the finished
// command: the allowed request and the refused one, as the proxy saw them.
func TestCmdReport(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl on this machine")
	}
	ln, err := net.Listen("tcp4", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "ok")
	})}
	go srv.Serve(ln)
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	hosts := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(hosts, []byte("127.0.0.2 good.test evil.test\n"), 0o644)
	t.Setenv(testHostsEnv, hosts)

	ws, _ := filepath.EvalSymlinks(t.TempDir())
	pol, err := policytest.Resolve(policy.Options{Cwd: ws, AllowDomains: []string{"good.test", "127.0.0.2"}},
		func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	c := Command(pol, "sh", "-c", fmt.Sprintf("%[1]s -fsS http://good.test:%[2]d/; %[1]s -fsS http://evil.test:%[2]d/; exit 0", curl, port))
	out, err := c.Output()
	if err != nil || string(out) != "ok" {
		t.Fatalf("output %q, %v", out, err)
	}
	r := c.Report
	if r == nil || r.ExitCode != 0 || r.Network.Mode != NetworkAllowList {
		t.Fatalf("report %+v", r)
	}
	if len(r.Network.Allowed) != 1 || r.Network.Allowed[0] != (NetworkAllowed{"good.test", uint16(port), 1}) {
		t.Errorf("allowed %+v", r.Network.Allowed)
	}
	if len(r.Network.Denied) != 1 || r.Network.Denied[0].Host != "evil.test" || r.Network.Denied[0].Reason != "not in allowed_domains" {
		t.Errorf("denied %+v", r.Network.Denied)
	}
	if hits.Load() != 1 {
		t.Errorf("server saw %d requests, want 1", hits.Load())
	}
}

// egressOrigin is an HTTP server on 127.0.0.2 counting requests, with a
// hosts file giving good.test and evilN.test its address for the proxy.
func egressOrigin(t *testing.T) (port int, hits *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	hits = new(atomic.Int64)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "ok")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	hosts := filepath.Join(t.TempDir(), "hosts")
	names := "good.test"
	for i := range 8 {
		names += fmt.Sprintf(" evil%d.test", i)
	}
	os.WriteFile(hosts, []byte("127.0.0.2 "+names+"\n"), 0o644)
	t.Setenv(testHostsEnv, hosts)
	return ln.Addr().(*net.TCPAddr).Port, hits
}

// socketFDs counts this process's socket descriptors.
func socketFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// allowListSession is a session whose allow-list admits good.test and
// 127.0.0.2, the origin egressOrigin serves there, curl's path, and how
// many sockets this process held right before the session.
func allowListSession(t *testing.T) (s *Session, curl string, port int, hits *atomic.Int64, sockets int) {
	t.Helper()
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl on this machine")
	}
	port, hits = egressOrigin(t)
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	pol, err := policytest.Resolve(policy.Options{Cwd: ws, AllowDomains: []string{"good.test", "127.0.0.2"}},
		func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	sockets = socketFDs(t)
	return sessionFor(t, pol), curl, port, hits, sockets
}

// TestSessionAllowListReports: a session with an allow-list serves its
// commands through one proxy, each on listeners of its own in the
// session's network namespace, so that each command's report holds
// exactly its own decisions, over HTTP, CONNECT and SOCKS5, even when
// the commands run at the same time. A command's listeners close when it
// ends (the next command's namespace lists only its own), and after
// Close the process holds no socket the session made.
func TestSessionAllowListReports(t *testing.T) {
	s, curl, port, hits, sockets := allowListSession(t)

	// Command i asks for good.test i+1 times over plain HTTP, once over
	// CONNECT and once over SOCKS5, and for evili.test once each way;
	// all run at once, each waiting for its siblings to be in flight.
	const n = 6
	var wg sync.WaitGroup
	cmds := make([]*Cmd, n)
	outs := make([][]byte, n)
	errs := make([]error, n)
	for i := range n {
		script := fmt.Sprintf(`
for _ in $(seq %[3]d); do %[1]s -fsS http://good.test:%[2]d/ >/dev/null || echo FAIL plain; done
%[1]s -fsS -p http://good.test:%[2]d/ >/dev/null || echo FAIL connect
%[1]s -fsS -x "$ALL_PROXY" http://good.test:%[2]d/ >/dev/null || echo FAIL socks
%[1]s -fsS http://evil%[4]d.test:%[2]d/ 2>/dev/null && echo FAIL evil plain
%[1]s -fsS -p http://evil%[4]d.test:%[2]d/ 2>/dev/null && echo FAIL evil connect
%[1]s -fsS -x "$ALL_PROXY" http://evil%[4]d.test:%[2]d/ 2>/dev/null && echo FAIL evil socks
touch started%[4]d; for _ in $(seq 100); do [ "$(ls started* | wc -l)" -ge %[5]d ] && break; sleep 0.1; done
echo "$http_proxy $ALL_PROXY"`, curl, port, i+1, i, n)
		cmds[i] = s.Command(context.Background(), "sh", "-c", script)
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = cmds[i].Output()
		}()
	}
	wg.Wait()
	proxies := map[string]bool{}
	for i, c := range cmds {
		if errs[i] != nil || strings.Contains(string(outs[i]), "FAIL") {
			t.Fatalf("command %d: %v\n%s", i, errs[i], outs[i])
		}
		proxies[strings.TrimSpace(string(outs[i]))] = true
		r := c.Report
		if r == nil || r.Network.Mode != NetworkAllowList {
			t.Fatalf("command %d: report %+v", i, r)
		}
		if want := []NetworkAllowed{{"good.test", uint16(port), i + 3}}; fmt.Sprint(r.Network.Allowed) != fmt.Sprint(want) {
			t.Errorf("command %d allowed %+v, want %+v", i, r.Network.Allowed, want)
		}
		if want := []NetworkDenied{{fmt.Sprintf("evil%d.test", i), uint16(port), "not in allowed_domains", 3}}; fmt.Sprint(r.Network.Denied) != fmt.Sprint(want) {
			t.Errorf("command %d denied %+v, want %+v", i, r.Network.Denied, want)
		}
	}
	if len(proxies) != n {
		t.Errorf("commands running at once shared proxy listeners: %v", proxies)
	}
	if want := int64(n*(n+1)/2 + 2*n); hits.Load() != want {
		t.Errorf("host: the origin got %d requests, want %d", hits.Load(), want)
	}

	// A command that cannot start leaves no listener either.
	var se *StartError
	if err := s.Command(context.Background(), "/nonexistent/cmd").Run(); !errors.As(err, &se) || se.Code != CodeNotFound {
		t.Fatalf("a missing command: %v", err)
	}
	// The commands' listeners are gone: the next command's namespace
	// has its own two and nothing else listening (state 0A) but the
	// session's name server (127.0.0.1:53) and its transparent
	// listeners (127.0.0.1, and ::1 where the kernel has IPv6).
	want := 6
	if _, err := os.Stat("/proc/net/if_inet6"); err == nil {
		want = 7
	}
	out, err := sh(s, `echo "$http_proxy $ALL_PROXY"; awk '$4 == "0A" { print $2 }' /proc/net/tcp /proc/net/tcp6`).Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(out))
	if len(lines) != want {
		t.Fatalf("listening in the session's namespace, want this command's two and the session's two: %q", out)
	}
	var others []int
	for _, l := range lines[2:] {
		_, hexPort, _ := strings.Cut(l, ":")
		var p int
		fmt.Sscanf(hexPort, "%x", &p)
		if !strings.HasSuffix(lines[0], fmt.Sprintf(":%d", p)) && !strings.HasSuffix(lines[1], fmt.Sprintf(":%d", p)) {
			others = append(others, p)
		}
	}
	if len(others) != want-4 || !slices.Contains(others, 53) {
		t.Errorf("listening in the session's namespace besides this command's (%s %s): %v, want 53 and the transparent listeners", lines[0], lines[1], others)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := socketFDs(t); got > sockets {
		t.Errorf("after Close this process holds %d sockets, %d before the session", got, sockets)
	}
	// And nothing of the proxy still runs (its accept loops end as
	// their listeners close: allow them a moment).
	deadline := time.Now().Add(5 * time.Second)
	for proxyGoroutines() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := proxyGoroutines(); n > 0 {
		t.Errorf("%d goroutines of the proxy outlived Close", n)
	}
}

// proxyGoroutines counts the goroutines running netproxy code.
func proxyGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "internal/netproxy.") {
			n++
		}
	}
	return n
}

// TestSessionAllowListSiblingPorts: commands of one session share its
// network namespace, so a command can reach another running command's
// proxy listeners. That is the documented attribution limit, not a way
// out: it is served under the session's one policy (a refused destination
// stays refused, an allowed one is reached as through its own), and the
// requests count in the other command's report, not in its own.
func TestSessionAllowListSiblingPorts(t *testing.T) {
	s, curl, port, hits, _ := allowListSession(t)
	// A holds its listeners open until B is done with them.
	a := s.Command(context.Background(), "sh", "-c", `echo "$http_proxy" > a.proxy; while [ ! -e b.done ]; do sleep 0.05; done`)
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	b := sh(s, fmt.Sprintf(`while [ ! -s a.proxy ]; do sleep 0.05; done; p=$(cat a.proxy)
%[1]s -fsS -x "$p" http://good.test:%[2]d/ || echo FAIL good
%[1]s -fsS -x "$p" http://evil0.test:%[2]d/ 2>/dev/null && echo FAIL evil
%[1]s -fsS -x "$p" http://127.0.0.3:%[2]d/ 2>/dev/null && echo FAIL local
touch b.done`, curl, port))
	out, err := b.Output()
	if err != nil || string(out) != "ok" {
		t.Fatalf("B through A's proxy: %q, %v", out, err)
	}
	if err := a.Wait(); err != nil {
		t.Fatal(err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("host: the origin got %d requests, want 1 (only the allowed one)", n)
	}
	if r := b.Report.Network; len(r.Allowed)+len(r.Denied) != 0 {
		t.Errorf("B's report holds what it asked for on A's listeners: %+v", r)
	}
	r := a.Report.Network
	if len(r.Allowed) != 1 || r.Allowed[0].Host != "good.test" || len(r.Denied) != 2 {
		t.Errorf("A's report, want B's one allowed and two refused requests: %+v", r)
	}
}
