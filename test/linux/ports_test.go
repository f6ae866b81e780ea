//go:build linux

package linux

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// freePort is a port of the host's 127.0.0.1 that nothing used a moment
// ago, below the kernel's ephemeral range: a port the kernel chose for
// another process's outgoing connection (other agentbox runs share the
// machine) would make the run's listen fail.
func freePort(t *testing.T) int {
	t.Helper()
	for range 100 {
		port := 20000 + rand.IntN(12000)
		if ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			ln.Close()
			return port
		}
	}
	t.Fatal("no free port found")
	return 0
}

// oneRequestServer is a command that serves one HTTP request on the
// sandbox's 127.0.0.1:inner with the body "from the sandbox", and exits.
// It also listens, unpublished, on 127.0.0.1:inner+1.
func oneRequestServer(inner int) string {
	return fmt.Sprintf(`exec %s -c '
import http.server, socket
other = socket.socket(); other.bind(("127.0.0.1", %d)); other.listen()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"from the sandbox"
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", %d), H)
s.handle_request()
'`, python, inner+1, inner)
}

// getPublished GETs the host's 127.0.0.1:port until the sandbox's server
// answers (it may not listen yet), and returns the body; ended says why,
// should the run end first.
func getPublished(t *testing.T, port int, ended func() (string, bool)) string {
	t.Helper()
	c := http.Client{Timeout: 3 * time.Second}
	var last error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if why, over := ended(); over {
			t.Fatalf("the run ended before 127.0.0.1:%d answered (%v): %s", port, last, why)
		}
		resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		if err != nil {
			last = err
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			return string(b)
		}
		last = err
	}
	t.Fatalf("host: 127.0.0.1:%d never answered: %v", port, last)
	return ""
}

// assertClosed checks that nothing listens on the host's 127.0.0.1:port
// any more.
func assertClosed(t *testing.T, port int) {
	t.Helper()
	if c, err := net.DialTimeout("tcp4", fmt.Sprintf("127.0.0.1:%d", port), 2*time.Second); err == nil {
		c.Close()
		t.Errorf("host: 127.0.0.1:%d still accepts connections after the run ended", port)
	}
}

// TestPublish: --publish PORT:INNER serves a command's HTTP server on
// the host's 127.0.0.1:PORT while the run lasts, and the port is closed
// once it has ended: through a lone run, a run the resident helper would
// serve (it leaves published ports to a lone run), and a session
// (agentbox mcp, for the session's life). A port in use on the host
// fails the run with 125 naming it.
func TestPublish(t *testing.T) {
	needBin(t)
	needPython(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		const inner = 8000
		for _, path := range []string{"lone", "allow-list", "resident"} {
			t.Run(path, func(t *testing.T) {
				fx := newFixture(t, u)
				port := freePort(t)
				rep := filepath.Join(fx.dir, "report.json")
				env := append(fx.env(), "AGENTBOX_RESIDENT=0")
				var re *residentEnv
				if path == "resident" {
					re = newResidentEnv(t, fx)
					re.warm(t)
					env = re.env()
				}
				args := []string{"run", "-C", fx.ws, "--publish", fmt.Sprintf("%d:%d", port, inner)}
				if path != "resident" {
					args = append(args, "--report", rep)
				}
				if path == "allow-list" {
					args = append(args, "--allow-domain", "agentbox.invalid")
				}
				args = append(args, "--", "/bin/sh", "-c", oneRequestServer(inner))
				done := make(chan result, 1)
				go func() { done <- runWith(t, u, runOpts{env: env, dir: fx.ws, timeout: 30 * time.Second}, args...) }()
				var r result
				ended := func() (string, bool) {
					select {
					case r = <-done:
						done <- r
						return r.String(), true
					default:
						return "", false
					}
				}
				if got := getPublished(t, port, ended); got != "from the sandbox" {
					t.Errorf("host: GET 127.0.0.1:%d = %q, want the sandbox's page", port, got)
				}
				r = <-done
				if r.code != 0 {
					t.Fatalf("run: %v", r)
				}
				assertClosed(t, port)
				// The sandbox's other listener was never the host's.
				assertClosed(t, inner+1)
				if path != "resident" {
					b, err := os.ReadFile(rep)
					if err != nil {
						t.Fatal(err)
					}
					if want := fmt.Sprintf(`"published":[{"host_port":%d,"port":%d,"count":1}]`, port, inner); !strings.Contains(compactJSON(b), want) {
						t.Errorf("report: want %s in %s", want, b)
					}
				}
			})
		}
		t.Run("session", func(t *testing.T) {
			fx := newFixture(t, u)
			port := freePort(t)
			cs, srv, hangUp := mcpServer(t, u, fx, "--publish", fmt.Sprintf("%d:%d", port, inner))
			// The session's port is the host's for the session's life:
			// one listener, of agentbox mcp's, on 127.0.0.1 only.
			if ls := hostListeners(t, srv.Process.Pid); len(ls) != 1 || ls[0] != fmt.Sprintf("0100007F:%04X", port) {
				t.Errorf("agentbox mcp listens on %v, want only 127.0.0.1:%d", ls, port)
			}
			for i := range 2 {
				done := make(chan mcpResult, 1)
				go func() { done <- mcpSh(t, cs, oneRequestServer(inner)) }()
				ended := func() (string, bool) {
					select {
					case r := <-done:
						done <- r
						return r.String(), true
					default:
						return "", false
					}
				}
				if got := getPublished(t, port, ended); got != "from the sandbox" {
					t.Errorf("call %d: host: GET 127.0.0.1:%d = %q", i, port, got)
				}
				r := <-done
				if r.ExitCode != 0 {
					t.Fatalf("call %d: %v", i, r)
				}
				if c, err := net.DialTimeout("tcp4", fmt.Sprintf("127.0.0.1:%d", port), 2*time.Second); err != nil {
					t.Errorf("after call %d: the session's port is closed: %v", i, err)
				} else {
					c.Close()
				}
			}
			hangUp.Close()
			if !waitFor(10*time.Second, func() bool {
				return srv.ProcessState != nil || procState(srv.Process.Pid) == "" || procState(srv.Process.Pid) == "Z"
			}) {
				t.Fatal("agentbox mcp did not end")
			}
			assertClosed(t, port)
		})
		t.Run("in use", func(t *testing.T) {
			fx := newFixture(t, u)
			ln, err := net.Listen("tcp4", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			port := ln.Addr().(*net.TCPAddr).Port
			mark := filepath.Join(fx.ws, "ran")
			r := sandboxed(t, fx, []string{"--publish", strconv.Itoa(port)}, `touch "$0"`+" "+mark)
			if r.code != 125 || !strings.Contains(r.stderr, "--publish") || !strings.Contains(r.stderr, strconv.Itoa(port)) || !strings.Contains(r.stderr, "in use") {
				t.Errorf("published port in use: want 125 naming --publish and %d: %v", port, r)
			}
			if exists(mark) {
				t.Error("the command ran although its port could not be published")
			}
		})
	})
}

// compactJSON is b without white space, for substring checks.
func compactJSON(b []byte) string {
	return strings.Join(strings.Fields(string(b)), "")
}

// countingServer listens on the host's 127.0.0.1 and answers every
// connection with its tag; accepted counts them.
type countingServer struct {
	ln       net.Listener
	port     int
	accepted atomic.Int32
	wg       sync.WaitGroup
}

func newCountingServer(t *testing.T, tag string) *countingServer {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &countingServer{ln: ln, port: ln.Addr().(*net.TCPAddr).Port}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			c.Write([]byte(tag))
			c.Close()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

// hostPortProbe connects to the host port a and to b (v4 and v6) and
// prints what each gave.
func hostPortProbe(a, b int) string {
	return fmt.Sprintf(`exec %s -c '
import socket
for host, port in (("127.0.0.1", %[2]d), ("127.0.0.1", %[3]d), ("::1", %[3]d), ("::ffff:127.0.0.1", %[3]d), ("127.0.0.2", %[3]d), ("127.0.0.1", 0)):
    try:
        s = socket.create_connection((host, port), timeout=3)
        print(host, port, "got", repr(s.recv(16)))
    except Exception as e:
        print(host, port, "refused")
'`, python, a, b)
}

// TestHostPort: --host-port PORT lets the command reach the host's
// 127.0.0.1:PORT, and a second host server on another port never sees a
// connection; through a lone run, the resident helper and a session.
func TestHostPort(t *testing.T) {
	needBin(t)
	needPython(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		for _, path := range []string{"lone", "allow-list", "resident", "session"} {
			t.Run(path, func(t *testing.T) {
				fx := newFixture(t, u)
				a, b := newCountingServer(t, "A"), newCountingServer(t, "B")
				// The control: from the host, both answer.
				for _, s := range []*countingServer{a, b} {
					c, err := net.Dial("tcp4", s.ln.Addr().String())
					if err != nil {
						t.Fatal(err)
					}
					c.Close()
					if !waitFor(5*time.Second, func() bool { return s.accepted.Load() == 1 }) {
						t.Fatal("host: the control connection never arrived")
					}
				}
				a.accepted.Store(0)
				b.accepted.Store(0)
				flag := []string{"--host-port", strconv.Itoa(a.port)}
				script := hostPortProbe(a.port, b.port)
				var out string
				var allowed []string
				switch path {
				case "lone", "allow-list":
					rep := filepath.Join(fx.dir, "report.json")
					args := []string{"run", "-C", fx.ws, "--report", rep}
					if path == "allow-list" {
						args = append(args, "--allow-domain", "agentbox.invalid")
					}
					r := runWith(t, u, runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0"), dir: fx.ws},
						append(args, append(flag, "--", "/bin/sh", "-c", script)...)...)
					if r.code != 0 {
						t.Fatalf("run: %v", r)
					}
					out = r.stdout
					for _, al := range readReport(t, rep).Network.Allowed {
						allowed = append(allowed, fmt.Sprintf("%s:%d=%d", al.Host, al.Port, al.Count))
					}
				case "resident":
					re := newResidentEnv(t, fx)
					re.warm(t, flag...)
					ok, r := re.served(t, runOpts{}, flag, script)
					if !ok || r.code != 0 {
						t.Fatalf("served %v: %v", ok, r)
					}
					out = r.stdout
					allowed = []string{fmt.Sprintf("127.0.0.1:%d=1", a.port)} // no report through the helper
				case "session":
					cs, _, _ := mcpServer(t, u, fx, flag...)
					r := mcpSh(t, cs, script)
					if r.ExitCode != 0 {
						t.Fatalf("call: %v", r)
					}
					out = r.Stdout
					for _, al := range r.Report.Network.Allowed {
						allowed = append(allowed, fmt.Sprintf("%s:%d=%d", al.Host, al.Port, al.Count))
					}
				}
				want := fmt.Sprintf("127.0.0.1 %[1]d got b'A'\n127.0.0.1 %[2]d refused\n::1 %[2]d refused\n::ffff:127.0.0.1 %[2]d refused\n127.0.0.2 %[2]d refused\n127.0.0.1 0 refused\n", a.port, b.port)
				if out != want {
					t.Errorf("sandbox: got\n%s\nwant\n%s", out, want)
				}
				if n := b.accepted.Load(); n != 0 {
					t.Errorf("host: the server on the port not listed got %d connection(s)", n)
				}
				if n := a.accepted.Load(); n != 1 {
					t.Errorf("host: the listed port's server got %d connection(s), want 1", n)
				}
				if want := fmt.Sprintf("127.0.0.1:%d=1", a.port); len(allowed) != 1 || allowed[0] != want {
					t.Errorf("report: allowed %v, want [%s]", allowed, want)
				}
			})
		}
	})
}

// TestPortsDegraded: without user namespaces there is no network
// namespace to carry ports across; --publish and --host-port refuse to
// run (125, naming the flag), even with the degraded mode allowed.
func TestPortsDegraded(t *testing.T) {
	needBin(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		mark := filepath.Join(fx.ws, "ran")
		for _, flag := range [][]string{{"--publish", strconv.Itoa(freePort(t))}, {"--host-port", "5432"}} {
			args := append([]string{"run", "-C", fx.ws, "--allow-degraded"}, flag...)
			args = append(args, "--", "/bin/sh", "-c", `touch "$0"`, mark)
			r := noUserns(t, u, runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0"), dir: fx.ws}, binPath, args...)
			if r.code != 125 || !strings.Contains(r.stderr, flag[0]) || !strings.Contains(r.stderr, "network namespace") {
				t.Errorf("%v degraded: want 125 naming %s: %v", flag, flag[0], r)
			}
			if exists(mark) {
				t.Errorf("%v: the command ran degraded", flag)
			}
			// agentbox mcp refuses at once, rather than at each call.
			args = append([]string{"mcp", "-C", fx.ws, "--allow-degraded"}, flag...)
			r = noUserns(t, u, runOpts{stdin: strings.NewReader(""), env: fx.env(), dir: fx.ws}, binPath, args...)
			if r.code != 125 || !strings.Contains(r.stderr, flag[0]) || !strings.Contains(r.stderr, "network namespace") {
				t.Errorf("agentbox mcp %v degraded: want 125 naming %s: %v", flag, flag[0], r)
			}
		}
	})
}

// TestPortsBadInput: what --publish and --host-port cannot be turned
// into (port 0, a range, an address, a name, IPv6 forms), and the
// network fully on, fail with 125 naming the flag before anything runs.
func TestPortsBadInput(t *testing.T) {
	needBin(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		mark := filepath.Join(fx.ws, "ran")
		for _, c := range [][]string{
			{"--host-port", "0"}, {"--host-port", "1-65535"}, {"--host-port", "localhost:5432"}, {"--host-port", "[::1]:5432"},
			{"--host-port", "::1"}, {"--host-port", "65536"}, {"--host-port", "postgres"}, {"--host-port", "5432", "--host-port", "5432"},
			{"--publish", "0"}, {"--publish", "0.0.0.0:8080:3000"}, {"--publish", "[::]:8080"}, {"--publish", "8080:"}, {"--publish", "3000-3010"},
			{"--publish", "3000", "--publish", "3000:4000"}, {"--publish", "3000", "--network"}, {"--host-port", "5432", "--network"},
		} {
			r := sandboxed(t, fx, c, `touch "$0" `+mark)
			if r.code != 125 || !strings.Contains(r.stderr, c[0]) {
				t.Errorf("%q: want 125 naming %s: %v", c, c[0], r)
			}
			if exists(mark) {
				t.Fatalf("%q: the command ran", c)
			}
		}
	})
}
