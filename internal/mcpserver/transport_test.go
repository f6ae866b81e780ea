package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/mcpserver/wiretest"
)

// wire is a raw JSON-RPC conversation with Serve: lines written to its
// stdin, replies read from its stdout.
type wire struct {
	t      *testing.T
	c      *wiretest.Conn
	in     *io.PipeWriter
	served chan error
}

type reply = wiretest.Reply

// serveWire starts Serve on a session for a fresh workspace, reading r
// (nil: a pipe the wire writes, and the MCP session is opened).
func serveWire(t *testing.T, r io.Reader) *wire {
	t.Helper()
	s, _ := newSession(t)
	w := &wire{t: t, served: make(chan error, 1)}
	if r == nil {
		pr, pw := io.Pipe()
		r, w.in = pr, pw
		t.Cleanup(func() { pw.Close() })
	}
	outR, outW := io.Pipe()
	t.Cleanup(func() { outR.Close() })
	w.c = wiretest.New(w.in, outR)
	go func() { w.served <- Serve(context.Background(), s, r, outW, Options{}) }()
	if w.in != nil {
		if err := w.c.Open(20 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *wire) send(line string) {
	w.t.Helper()
	if err := w.c.Send(line); err != nil {
		w.t.Fatalf("writing to the server: %v", err)
	}
}

func (w *wire) read() reply {
	w.t.Helper()
	r, err := w.c.Read(20 * time.Second)
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

var runCall = wiretest.RunCall

func stdoutOf(t *testing.T, r reply) string {
	t.Helper()
	out, err := r.Stdout()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestServeBadFrames: a line that is not a JSON-RPC 2.0 message gets an
// error reply with id null, -32700 for what is not JSON and -32600 for
// JSON that is not a request, and the session goes on; a call in flight
// when one arrives still completes.
func TestServeBadFrames(t *testing.T) {
	w := serveWire(t, nil)
	w.send(runCall(1, "sh", "-c", "sleep 0.5; echo slow"))
	for i, tc := range []struct {
		line string
		code int
	}{
		{"this is not json", -32700},
		{`{"jsonrpc":"2.0","id":9,"method":"tools/list"`, -32700},
		{`[]`, -32600},
		{`[{"jsonrpc":"2.0","id":9,"method":"tools/list"}]`, -32600},
		{`{}`, -32600},
		{`"jsonrpc":"1.0"`, -32700},
		{`{"jsonrpc":"1.0","id":9,"method":"tools/list"}`, -32600},
		{`{"id":9,"method":"tools/list"}`, -32600},
		{`{"jsonrpc":"2.0","id":{},"method":"tools/list"}`, -32600},
		{`{"jsonrpc":"2.0","id":9,"method":7}`, -32600},
		{"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\",\"params\":{\"x\":\"\xff\xfe\"}}", -32700},
		{`42`, -32600},
		{`{"jsonrpc":"2.0","id":9,"method":"tools/list"} {"more":1}`, -32700},
	} {
		w.send(tc.line)
		r := w.read()
		if i == 0 && string(r.ID) == "1" {
			t.Fatalf("the slow call answered before the bad line: %+v", r)
		}
		if string(r.ID) != "null" || r.Error == nil || r.Error.Code != tc.code || r.Error.Message == "" {
			t.Errorf("%q: reply %+v, want code %d with id null", tc.line, r, tc.code)
		}
		w.send(runCall(100+i, "echo", "ok"))
		if r := w.read(); string(r.ID) != fmt.Sprint(100+i) || stdoutOf(t, r) != "ok\n" {
			t.Errorf("after %q: %+v", tc.line, r)
		}
	}
	// Blank lines are no messages at all.
	w.send("")
	w.send("  \r")
	w.send(runCall(2, "echo", "after blanks"))
	var slow, blanks bool
	for !slow || !blanks {
		r := w.read()
		switch string(r.ID) {
		case "1":
			slow = stdoutOf(t, r) == "slow\n"
		case "2":
			blanks = stdoutOf(t, r) == "after blanks\n"
		default:
			t.Fatalf("unexpected reply %+v", r)
		}
	}
	w.in.Close()
	select {
	case err := <-w.served:
		if err != nil {
			t.Errorf("Serve after EOF: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after EOF")
	}
}

// TestServeOversizedLine: a line over the limit (here four times it) is
// read to its newline without being held whole, answered with an error,
// and the next message is served; a call in flight still completes.
func TestServeOversizedLine(t *testing.T) {
	w := serveWire(t, nil)
	w.send(runCall(1, "sh", "-c", "sleep 0.5; echo slow"))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const size = 4 * maxLine
	go func() {
		// In pieces, as a pipe delivers it.
		io.WriteString(w.in, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"run","arguments":{"command":["echo","`)
		piece := bytes.Repeat([]byte("a"), 64<<10)
		for range size / len(piece) {
			if _, err := w.in.Write(piece); err != nil {
				return
			}
		}
		io.WriteString(w.in, `"]}}}`+"\n"+runCall(2, "echo", "next")+"\n")
	}()
	r := w.read()
	if string(r.ID) != "null" || r.Error == nil || r.Error.Code != -32600 || !strings.Contains(r.Error.Message, "MiB") {
		t.Fatalf("oversized line: %+v", r)
	}
	got := map[string]string{}
	for len(got) < 2 {
		r := w.read()
		got[string(r.ID)] = stdoutOf(t, r)
	}
	if got["1"] != "slow\n" || got["2"] != "next\n" {
		t.Errorf("replies: %q", got)
	}
	runtime.ReadMemStats(&after)
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 3*maxLine {
		t.Errorf("%d MiB allocated while reading past a line of %d MiB", grown>>20, size>>20)
	}
	// A line of exactly the limit is still a message.
	line := runCall(3, "echo", "x")
	w.send(line[:len(line)-1] + strings.Repeat(" ", maxLine-len(line)) + "}")
	if r := w.read(); string(r.ID) != "3" || stdoutOf(t, r) != "x\n" {
		t.Errorf("a line of %d bytes: %+v", maxLine, r)
	}
}

// errReader fails with err after its data.
type errReader struct {
	data string
	err  error
}

func (e *errReader) Read(p []byte) (int, error) {
	if e.data == "" {
		return 0, e.err
	}
	n := copy(p, e.data)
	e.data = e.data[n:]
	return n, nil
}

// TestServeTransportFailure: a read error other than the end of the input
// is Serve's error, naming it; the end of the input is not.
func TestServeTransportFailure(t *testing.T) {
	boom := errors.New("input/output error")
	init := `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wire","version":"v0"}}}` + "\n"
	for _, tc := range []struct {
		err  error
		want error // nil: Serve returns nil
	}{{boom, boom}, {io.EOF, nil}} {
		w := serveWire(t, &errReader{data: init, err: tc.err})
		go io.Copy(io.Discard, w.c.R)
		select {
		case err := <-w.served:
			if tc.want == nil && err != nil {
				t.Errorf("Serve after EOF: %v", err)
			}
			if tc.want != nil && (!errors.Is(err, tc.want) || !strings.Contains(err.Error(), "reading")) {
				t.Errorf("Serve: %v, want a read error wrapping %v", err, boom)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Serve did not return after its input ended with %v", tc.err)
		}
	}
}
