package sandbox

import (
	"context"
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
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/policy"
)

// oneRequest is a python3 program serving one GET on 127.0.0.1:port.
const oneRequest = `
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).handle_request()
`

func publishPolicy(t *testing.T) (*policy.Policy, int) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	// Below the ephemeral range, where no other process's outgoing
	// connection can hold the port when the run listens on it.
	port := 0
	for range 100 {
		p := 20000 + rand.IntN(12000)
		if ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			ln.Close()
			port = p
			break
		}
	}
	if port == 0 {
		t.Fatal("no free port")
	}
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policytest.Resolve(policy.Options{Cwd: ws, Publish: []string{fmt.Sprintf("%d:8000", port)}}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return pol, port
}

func getUntil(t *testing.T, port int) string {
	t.Helper()
	c := http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		if err != nil {
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			return string(b)
		}
	}
	t.Fatalf("127.0.0.1:%d never answered", port)
	return ""
}

func listening(port int) bool {
	c, err := net.DialTimeout("tcp4", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// TestPublishClosedAfterWait: a published port is open on the host while
// the command runs and closed once Wait returns, with this process (the
// library's caller) still alive.
func TestPublishClosedAfterWait(t *testing.T) {
	pol, port := publishPolicy(t)
	cmd := Command(pol, "/usr/bin/python3", "-c", oneRequest, "8000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if got := getUntil(t, port); got != "ok" {
		t.Errorf("GET = %q", got)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if listening(port) {
		t.Errorf("127.0.0.1:%d still open after Wait", port)
	}
	if p := cmd.Report.Network.Published; len(p) != 1 || p[0] != (NetworkPublished{HostPort: uint16(port), Port: 8000, Count: 1}) {
		t.Errorf("report: published %+v", p)
	}
}

// TestPublishSession: a session's published port is open for the
// session's life, between commands too, and closed by Close.
func TestPublishSession(t *testing.T) {
	pol, port := publishPolicy(t)
	s, err := NewSession(pol)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 2 {
		cmd := s.Command(context.Background(), "/usr/bin/python3", "-c", oneRequest, "8000")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if got := getUntil(t, port); got != "ok" {
			t.Errorf("command %d: GET = %q", i, got)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		if p := cmd.Report.Network.Published; len(p) != 1 || p[0].Count != 1 {
			t.Errorf("command %d: report: published %+v", i, p)
		}
		if !listening(port) {
			t.Errorf("command %d: the session's port closed with the command", i)
		}
	}
	s.Close()
	if listening(port) {
		t.Errorf("127.0.0.1:%d still open after the session's Close", port)
	}
}

// TestHostPortFlood: a command that opens more connections to a host
// port than agentbox carries at once gets the excess closed; the host's
// server never sees more than maxCarried, and the run ends normally.
func TestHostPortFlood(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			c.Write([]byte("x"))
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policytest.Resolve(policy.Options{Cwd: ws, HostPorts: []string{strconv.Itoa(port)}}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	const n = maxCarried + 100
	out, err := Command(pol, "/usr/bin/python3", "-c", fmt.Sprintf(`
import socket
socks, got = [], 0
for _ in range(%d):
    s = socket.create_connection(("127.0.0.1", %d), timeout=5); socks.append(s)
for s in socks:
    try:
        got += len(s.recv(1))
    except OSError:
        pass
print(got)
`, n, port)).Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	mu.Lock()
	arrived := len(held)
	mu.Unlock()
	if got != maxCarried || arrived > maxCarried {
		t.Errorf("%d connections: %d answered inside, %d arrived on the host; want %d and at most %d", n, got, arrived, maxCarried, maxCarried)
	}
}
