//go:build linux

package linux

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/mcpserver/wiretest"
)

// mcpWire is a raw JSON-RPC conversation with `agentbox mcp` as u.
type mcpWire struct {
	t      *testing.T
	cmd    *exec.Cmd
	c      *wiretest.Conn
	in     io.WriteCloser
	stdout io.ReadCloser
	stderr *bytes.Buffer
}

func startWire(t *testing.T, u *testUser, fx *fixture) *mcpWire {
	t.Helper()
	return startWireWith(t, u, fx, "{}")
}

// startWireWith is startWire with the client declaring the capabilities
// caps (a JSON object).
func startWireWith(t *testing.T, u *testUser, fx *fixture, caps string, env ...string) *mcpWire {
	t.Helper()
	needBin(t)
	w := &mcpWire{t: t, stderr: &bytes.Buffer{}}
	w.cmd = command(u, runOpts{env: append(fx.env(), env...), dir: fx.ws}, binPath, "mcp", "-C", fx.ws)
	w.cmd.Stderr = w.stderr
	var err error
	if w.in, err = w.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if w.stdout, err = w.cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	w.c = wiretest.New(w.in, w.stdout)
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.cmd.Process.Kill()
		w.cmd.Wait()
		if t.Failed() {
			t.Logf("agentbox mcp stderr: %s", w.stderr)
		}
	})
	if err := w.c.OpenWith(caps, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *mcpWire) send(line string) {
	w.t.Helper()
	if err := w.c.Send(line); err != nil {
		w.t.Fatalf("writing to agentbox mcp: %v", err)
	}
}

func (w *mcpWire) read() wiretest.Reply {
	w.t.Helper()
	r, err := w.c.Read(20 * time.Second)
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

// wait waits for the server to exit and returns its status.
func (w *mcpWire) wait(within time.Duration) int {
	w.t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.cmd.Wait() }()
	select {
	case err := <-done:
		return exitCode(w.cmd, err)
	case <-time.After(within):
		w.t.Fatalf("agentbox mcp still running %v later", within)
	}
	return -1
}

func wireCall(id int, script string) string { return wiretest.RunCall(id, "/bin/sh", "-c", script) }

func wireStdout(t *testing.T, r wiretest.Reply) string {
	t.Helper()
	out, err := r.Stdout()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMCPBadLines: `agentbox mcp` answers each line that is not a
// JSON-RPC 2.0 message (not JSON, [], {}, a 1.0 message, invalid UTF-8,
// a line over 16 MiB) with a JSON-RPC error whose id is null, and goes
// on serving; a call in flight meanwhile completes; the end of stdin
// ends it with status 0. Before, the first such line ended the session
// with status 0, no reply, and the call in flight killed.
func TestMCPBadLines(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, noCodex)
		w := startWire(t, u, fx)
		w.send(wireCall(1, `sleep 1; echo slow > "$WS/slow.txt"; echo slow`))
		huge := `{"jsonrpc":"2.0","id":77,"method":"ping","params":{"x":"` + strings.Repeat("a", 17<<20) + `"}}`
		for i, tc := range []struct {
			line string
			code int
		}{
			{"not json at all", -32700},
			{"[]", -32600},
			{"{}", -32600},
			{`"jsonrpc":"1.0"`, -32700},
			{`{"jsonrpc":"1.0","id":3,"method":"tools/list"}`, -32600},
			{"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\",\"params\":{\"x\":\"\xc3\x28\"}}", -32700},
			{huge, -32600},
		} {
			w.send(tc.line)
			r := w.read()
			if string(r.ID) != "null" || r.Error == nil || r.Error.Code != tc.code {
				t.Errorf("%.40q: %v, want error %d with id null", tc.line, r, tc.code)
			}
			w.send(wireCall(10+i, "echo ok"))
			if r := w.read(); string(r.ID) != fmt.Sprint(10+i) || wireStdout(t, r) != "ok\n" {
				t.Errorf("after %.40q: %v", tc.line, r)
			}
		}
		if r := w.read(); string(r.ID) != "1" || wireStdout(t, r) != "slow\n" {
			t.Errorf("the call in flight: %v", r)
		}
		assertContent(t, fx.ws+"/slow.txt", "slow\n")
		w.in.Close()
		if code := w.wait(10 * time.Second); code != 0 {
			t.Errorf("exit status %d after stdin closed, want 0", code)
		}
	})
}

// TestMCPTransportFailure: when stdin fails other than by ending (here it
// is a directory), or stdout does (the client closed its end while stdin
// stays open), `agentbox mcp` exits non-zero and says why on stderr.
// Before, a failed read ended it with status 0 and nothing said, and a
// failed write killed it with SIGPIPE.
func TestMCPTransportFailure(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, noCodex)
		dir, err := os.Open(fx.ws)
		if err != nil {
			t.Fatal(err)
		}
		defer dir.Close()
		r := runWith(t, u, runOpts{env: fx.env(), dir: fx.ws, stdin: dir}, "mcp", "-C", fx.ws)
		if r.code != 125 || !strings.Contains(r.stderr, "reading") {
			t.Errorf("stdin a directory: %v", r)
		}

		w := startWire(t, u, fx)
		w.stdout.Close()
		w.send(wireCall(1, "echo x"))
		code := w.wait(10 * time.Second)
		if code != 125 || !strings.Contains(w.stderr.String(), "writing") {
			t.Errorf("stdout closed: exit %d, stderr %q", code, w.stderr)
		}
	})
}
