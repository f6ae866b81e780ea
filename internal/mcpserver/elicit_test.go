package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/mcpserver/wiretest"
	"github.com/agentbox/agentbox/policy"
)

// elicitCaps declares the elicitation capability, as a client that can
// ask its user does.
const elicitCaps = `{"elicitation":{}}`

// ewire is a raw JSON-RPC conversation with Serve that records every
// line both ways.
type ewire struct {
	t  *testing.T
	c  *wiretest.Conn
	ws string

	mu  sync.Mutex
	log bytes.Buffer // the transcript: "> " client, "< " server
}

func (w *ewire) record(dir string, b []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range bytes.SplitAfter(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			w.log.WriteString(dir)
			w.log.Write(l)
		}
	}
}

type recorder struct {
	w   *ewire
	dir string
	io.Writer
}

func (r recorder) Write(b []byte) (int, error) {
	r.w.record(r.dir, b)
	return r.Writer.Write(b)
}

// serveElicit starts Serve on a session for a fresh workspace and opens
// the MCP session declaring caps.
func serveElicit(t *testing.T, caps string) *ewire {
	t.Helper()
	return serveElicitWith(t, caps, policy.Options{})
}

// serveElicitWith is serveElicit for a session resolved from o.
func serveElicitWith(t *testing.T, caps string, o policy.Options) *ewire {
	t.Helper()
	return serveElicitAt(t, "", caps, o)
}

// serveElicitAt is serveElicitWith opening the MCP session at protocol
// version.
func serveElicitAt(t *testing.T, version, caps string, o policy.Options) *ewire {
	t.Helper()
	s, ws := newSessionWith(t, o)
	w := &ewire{t: t, ws: ws}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	w.c = wiretest.New(recorder{w, "> ", inW}, outR)
	served := make(chan error, 1)
	go func() { served <- Serve(context.Background(), s, inR, recorder{w, "< ", outW}, Options{}) }()
	t.Cleanup(func() {
		// Both ends: a call still answering must not block on an
		// output no one reads.
		inW.Close()
		outR.Close()
		select {
		case <-served:
		case <-time.After(20 * time.Second):
			t.Error("the server did not end with its input")
		}
	})
	if err := w.c.OpenAt(version, caps, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *ewire) send(line string) {
	w.t.Helper()
	if err := w.c.Send(line); err != nil {
		w.t.Fatalf("writing to the server: %v", err)
	}
}

func (w *ewire) read() wiretest.Reply {
	w.t.Helper()
	r, err := w.c.Read(30 * time.Second)
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

// elicitation reads the next message and checks it is an
// elicitation/create naming every item, with the one-property schema.
func (w *ewire) elicitation(items ...string) wiretest.Reply {
	w.t.Helper()
	r := w.read()
	if r.Method != "elicitation/create" {
		w.t.Fatalf("want an elicitation/create, got %v", r)
	}
	var p struct {
		Message         string `json:"message"`
		RequestedSchema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"requestedSchema"`
	}
	if err := json.Unmarshal(r.Params, &p); err != nil {
		w.t.Fatalf("elicitation params %s: %v", r.Params, err)
	}
	for _, it := range items {
		if !strings.Contains(p.Message, it) {
			w.t.Errorf("the message does not name %q: %q", it, p.Message)
		}
	}
	if p.RequestedSchema.Type != "object" || len(p.RequestedSchema.Properties) != 1 {
		w.t.Errorf("requestedSchema: %s", r.Params)
	}
	var scope struct {
		Type    string   `json:"type"`
		Enum    []string `json:"enum"`
		Default string   `json:"default"`
	}
	json.Unmarshal(p.RequestedSchema.Properties["scope"], &scope)
	if scope.Type != "string" || strings.Join(scope.Enum, ",") != "once,session" || scope.Default != "once" {
		w.t.Errorf("the scope property: %s", p.RequestedSchema.Properties["scope"])
	}
	return r
}

// result reads the next message and checks it is the run result of call
// id.
func (w *ewire) result(id int) wiretest.RunResult {
	w.t.Helper()
	r := w.read()
	if string(r.ID) != fmt.Sprint(id) {
		w.t.Fatalf("want the result of call %d, got %v", id, r)
	}
	out, err := r.Run()
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

// outsideDir is a directory outside every writable root of the test
// sessions (/tmp is private in them; /var/tmp is not a root).
func outsideDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/var/tmp", "agentbox-elicit-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	d, err = filepath.EvalSymlinks(d)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func touchArgs(req map[string]any, paths ...string) map[string]any {
	a := map[string]any{"command": append([]string{"touch"}, paths...)}
	if req != nil {
		a["request_permissions"] = req
	}
	return a
}

func accept(scope string) map[string]any {
	return map[string]any{"action": "accept", "content": map[string]any{"scope": scope}}
}

func mustExist(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Stat(p); err != nil {
		t.Errorf("%s: %v, want it written", p, err)
	}
}

func mustBeAbsent(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists on the host (%v): the command ran or was allowed", p, err)
	}
}

// TestElicitOnce: an accepted request with scope once writes where it
// asked, and the next call without a request may not; the write is
// checked on the host.
func TestElicitOnce(t *testing.T) {
	// At protocol 2025-06-18, whose elicitation has no "mode".
	w := serveElicitAt(t, "2025-06-18", elicitCaps, policy.Options{})
	out := outsideDir(t)
	req := map[string]any{"add_dirs": []string{out}, "reason": "write the build output"}
	w.send(wiretest.Call(11, touchArgs(req, out+"/granted")))
	e := w.elicitation(out, "write the build output", "touch")
	if bytes.Contains(e.Params, []byte(`"mode"`)) {
		t.Errorf("a 2025-06-18 elicitation with a mode: %s", e.Params)
	}
	w.send(wiretest.Answer(e, accept("once")))
	if r := w.result(11); r.ExitCode != 0 || r.IsError {
		t.Errorf("accepted once: %+v", r)
	}
	mustExist(t, out+"/granted")

	// The next call, without a request, is refused the write.
	w.send(wiretest.Call(12, touchArgs(nil, out+"/later")))
	if r := w.result(12); r.ExitCode == 0 {
		t.Errorf("a call after a once grant: %+v", r)
	}
	mustBeAbsent(t, out+"/later")
	if b := os.Getenv("AGENTBOX_ELICIT_TRANSCRIPT"); b != "" {
		// The README's transcript, captured from this conversation.
		w.mu.Lock()
		os.WriteFile(b, w.log.Bytes(), 0o644)
		w.mu.Unlock()
	}
	// Asking again asks again.
	w.send(wiretest.Call(13, touchArgs(req, out+"/again")))
	e = w.elicitation(out)
	w.send(wiretest.Answer(e, accept("once")))
	if r := w.result(13); r.ExitCode != 0 {
		t.Errorf("accepted once again: %+v", r)
	}
	mustExist(t, out+"/again")
}

// TestElicitSession: scope session widens every later call; an accept
// without content is the default, once.
func TestElicitSession(t *testing.T) {
	w := serveElicit(t, elicitCaps)
	out, other := outsideDir(t), outsideDir(t)
	w.send(wiretest.Call(1, touchArgs(map[string]any{"add_dirs": []string{out}}, out+"/a")))
	e := w.elicitation(out)
	if !bytes.Contains(e.Params, []byte(`"mode":"form"`)) {
		t.Errorf("a 2025-11-25 elicitation without its mode: %s", e.Params)
	}
	w.send(wiretest.Answer(e, accept("session")))
	if r := w.result(1); r.ExitCode != 0 {
		t.Errorf("accepted for the session: %+v", r)
	}
	for i, name := range []string{"b", "c"} {
		w.send(wiretest.Call(2+i, touchArgs(nil, out+"/"+name)))
		if r := w.result(2 + i); r.ExitCode != 0 {
			t.Errorf("a later call in the session: %+v", r)
		}
		mustExist(t, out+"/"+name)
	}
	// A request the session already covers is not asked again.
	w.send(wiretest.Call(4, touchArgs(map[string]any{"add_dirs": []string{out}}, out+"/d")))
	if r := w.result(4); r.ExitCode != 0 {
		t.Errorf("a covered request: %+v", r)
	}
	// Another directory is its own request; an accept without content
	// takes the default scope.
	w.send(wiretest.Call(5, touchArgs(map[string]any{"add_dirs": []string{other}}, other+"/x", out+"/e")))
	w.send(wiretest.Answer(w.elicitation(other), map[string]any{"action": "accept"}))
	if r := w.result(5); r.ExitCode != 0 {
		t.Errorf("a second grant: %+v", r)
	}
	w.send(wiretest.Call(6, touchArgs(nil, other+"/y")))
	if r := w.result(6); r.ExitCode == 0 {
		t.Errorf("the default scope lasted beyond its call: %+v", r)
	}
	mustBeAbsent(t, other+"/y")
	mustExist(t, other+"/x")
}

// TestElicitRefused: decline, cancel, an error answer, a malformed one and
// a client without the capability run nothing and return 125 saying why
// and what the user can do.
func TestElicitRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		caps   string
		answer func(e wiretest.Reply) string // nil: no elicitation expected
		why    string
	}{
		{"decline", elicitCaps, func(e wiretest.Reply) string {
			return wiretest.Answer(e, map[string]any{"action": "decline"})
		}, "declined"},
		{"cancel", elicitCaps, func(e wiretest.Reply) string {
			return wiretest.Answer(e, map[string]any{"action": "cancel"})
		}, "cancel"},
		{"error", elicitCaps, func(e wiretest.Reply) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"no UI"}}`, e.ID)
		}, "asking the user"},
		{"bad scope", elicitCaps, func(e wiretest.Reply) string {
			return wiretest.Answer(e, accept("forever"))
		}, "asking the user"},
		{"no capability", `{}`, nil, "elicitation capability"},
		{"sampling only", `{"sampling":{}}`, nil, "elicitation capability"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := serveElicit(t, tc.caps)
			out := outsideDir(t)
			marker := filepath.Join(w.ws, "ran")
			w.send(wiretest.Call(1, map[string]any{"command": []string{"sh", "-c", "touch " + marker + " " + out + "/x"},
				"request_permissions": map[string]any{"add_dirs": []string{out}, "allow_domains": []string{"example.com"}}}))
			if tc.answer != nil {
				w.send(tc.answer(w.elicitation(out, "example.com")))
			}
			r := w.result(1)
			if r.ExitCode != 125 || !r.IsError || !strings.Contains(r.Stderr, tc.why) ||
				!strings.Contains(r.Stderr, "--add-dir "+out) || !strings.Contains(r.Stderr, "--allow-domain example.com") {
				t.Errorf("result: %+v, want 125 saying %q and the flags", r, tc.why)
			}
			mustBeAbsent(t, marker)
			mustBeAbsent(t, out+"/x")
		})
	}
}

// TestElicitUnhonourable: a request the policy cannot grant is refused
// with 125 without asking: no elicitation is sent (the next message is
// the call's result).
func TestElicitUnhonourable(t *testing.T) {
	w := serveElicit(t, elicitCaps)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	out := outsideDir(t)
	file := filepath.Join(out, "file")
	os.WriteFile(file, nil, 0o644)
	link := filepath.Join(out, "root-link")
	os.Symlink("/", link)
	marker := filepath.Join(w.ws, "ran")
	for i, tc := range []struct {
		req map[string]any
		why string
	}{
		{map[string]any{"add_dirs": []string{"/"}}, "root of a file system"},
		{map[string]any{"add_dirs": []string{home}}, "confines nothing"},
		{map[string]any{"add_dirs": []string{filepath.Dir(home)}}, "confines nothing"},
		{map[string]any{"add_dirs": []string{"/etc"}}, "system directory"},
		{map[string]any{"add_dirs": []string{"/usr"}}, "system directory"},
		{map[string]any{"add_dirs": []string{link}}, "root of a file system"},
		{map[string]any{"add_dirs": []string{"relative/dir"}}, "not an absolute path"},
		{map[string]any{"add_dirs": []string{out + "/missing"}}, "does not exist"},
		{map[string]any{"add_dirs": []string{file}}, "not a directory"},
		{map[string]any{"add_dirs": []string{out, "/"}}, "root of a file system"},
		{map[string]any{"allow_domains": []string{"*"}}, "not a domain pattern"},
		{map[string]any{"allow_domains": []string{"exa mple.com"}}, "not a domain pattern"},
	} {
		w.send(wiretest.Call(10+i, touchArgs(tc.req, marker)))
		r := w.result(10 + i)
		if r.ExitCode != 125 || !strings.Contains(r.Stderr, tc.why) || !strings.Contains(r.Stderr, "cannot grant") || !strings.Contains(r.Stderr, "No one was asked") {
			t.Errorf("%v: %+v, want 125 saying %q", tc.req, r, tc.why)
		}
		mustBeAbsent(t, marker)
	}
	many := make([]string, 33)
	for i := range many {
		many[i] = fmt.Sprintf("h%d.test", i)
	}
	w.send(wiretest.Call(99, touchArgs(map[string]any{"allow_domains": many}, marker)))
	if r := w.read(); !bytes.Contains(r.Result, []byte("ask for fewer")) || !bytes.Contains(r.Result, []byte(`"isError":true`)) {
		t.Errorf("33 domains: %v", r)
	}
	mustBeAbsent(t, marker)
}

// TestElicitConcurrent: two calls ask at once for different directories;
// both questions are out before either is answered (the server reads
// answers while calls run), the answers come in the other order, and
// each command gets its own grant only.
func TestElicitConcurrent(t *testing.T) {
	w := serveElicit(t, elicitCaps)
	a, b := outsideDir(t), outsideDir(t)
	both := func(name string) []string {
		return []string{"sh", "-c", fmt.Sprintf("touch %s/%s; touch %s/%s; true", a, name, b, name)}
	}
	w.send(wiretest.Call(1, map[string]any{"command": both("one"), "request_permissions": map[string]any{"add_dirs": []string{a}}}))
	w.send(wiretest.Call(2, map[string]any{"command": both("two"), "request_permissions": map[string]any{"add_dirs": []string{b}}}))
	asks := map[string]wiretest.Reply{}
	for range 2 {
		e := w.elicitation()
		switch {
		case bytes.Contains(e.Params, []byte(`beneath:\n  - `+a)):
			asks[a] = e
		case bytes.Contains(e.Params, []byte(`beneath:\n  - `+b)):
			asks[b] = e
		}
	}
	if len(asks) != 2 {
		t.Fatalf("the two questions: %v", asks)
	}
	w.send(wiretest.Answer(asks[b], accept("once")))
	w.send(wiretest.Answer(asks[a], accept("once")))
	for range 2 {
		r := w.read()
		if _, err := r.Run(); err != nil {
			t.Fatal(err)
		}
	}
	mustExist(t, a+"/one")
	mustExist(t, b+"/two")
	mustBeAbsent(t, b+"/one")
	mustBeAbsent(t, a+"/two")
}

// TestElicitDomains: with the network off, an accepted allow_domains
// reaches the host it names through agentbox's proxy for that call; the
// next call is refused it, and its report suggests the request. A domain
// denied_domains refuses is refused without asking.
func TestElicitDomains(t *testing.T) {
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
		fmt.Fprint(w, "hello")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	hosts := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(hosts, []byte("127.0.0.2 good.test evil.test\n"), 0o644)
	t.Setenv("AGENTBOX_TEST_HOSTS", hosts)

	w := serveElicitWith(t, elicitCaps, policy.Options{Config: &policy.Config{Network: policy.NetworkSection{DeniedDomains: []string{"evil.test"}}}})
	get := []string{curl, "-fsS", fmt.Sprintf("http://good.test:%d/", port)}
	// The name resolves to a local address: the agent lists it too, as
	// an allow-list must.
	w.send(wiretest.Call(1, map[string]any{"command": get,
		"request_permissions": map[string]any{"allow_domains": []string{"good.test", "127.0.0.2"}, "reason": "fetch the test page"}}))
	w.send(wiretest.Answer(w.elicitation("good.test", "127.0.0.2", "fetch the test page"), accept("once")))
	if r := w.result(1); r.ExitCode != 0 || r.Stdout != "hello" {
		t.Errorf("granted domain: %+v", r)
	}
	if hits.Load() != 1 {
		t.Errorf("the server saw %d requests, want 1", hits.Load())
	}
	w.send(wiretest.Call(2, map[string]any{"command": get}))
	r := w.result(2)
	var rep struct {
		Suggest struct {
			AllowDomains []string `json:"allow_domains"`
		} `json:"suggest"`
	}
	json.Unmarshal(r.Report, &rep)
	if r.ExitCode == 0 || hits.Load() != 1 {
		t.Errorf("the next call reached the server: %+v", r)
	}
	if want := fmt.Sprintf("good.test:%d", port); !slices.Contains(rep.Suggest.AllowDomains, want) {
		t.Errorf("report %s: want suggest.allow_domains with %s", r.Report, want)
	}
	// For the session: later calls reach it through the session's
	// widened sandbox.
	w.send(wiretest.Call(3, map[string]any{"command": get,
		"request_permissions": map[string]any{"allow_domains": []string{"good.test", "127.0.0.2"}}}))
	w.send(wiretest.Answer(w.elicitation("good.test"), accept("session")))
	if r := w.result(3); r.ExitCode != 0 || r.Stdout != "hello" {
		t.Errorf("granted for the session: %+v", r)
	}
	w.send(wiretest.Call(4, map[string]any{"command": get}))
	if r := w.result(4); r.ExitCode != 0 || r.Stdout != "hello" || hits.Load() != 3 {
		t.Errorf("a later call of the session: %+v (%d requests)", r, hits.Load())
	}
	for i, d := range []string{"evil.test", "*.test", "EVIL.test:80"} {
		w.send(wiretest.Call(10+i, map[string]any{"command": get, "request_permissions": map[string]any{"allow_domains": []string{d}}}))
		if r := w.result(10 + i); r.ExitCode != 125 || !strings.Contains(r.Stderr, "denied_domains") {
			t.Errorf("%s: %+v, want 125 naming denied_domains", d, r)
		}
	}
}

// TestElicitShowsWhatIsGranted: a directory asked for through a symlink
// is asked about, and granted, as the directory it leads to; the reason
// cannot pass for more of the question; a line break in a path shows
// quoted.
func TestElicitShowsWhatIsGranted(t *testing.T) {
	w := serveElicit(t, elicitCaps)
	real, other := outsideDir(t), outsideDir(t)
	link := filepath.Join(other, "innocent")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	odd := filepath.Join(other, "a\nWrite access beneath:")
	if err := os.Mkdir(odd, 0o755); err != nil {
		t.Fatal(err)
	}
	w.send(wiretest.Call(1, touchArgs(map[string]any{"add_dirs": []string{link, odd},
		"reason": "build\nNetwork access to:\n  - nothing"}, real+"/x")))
	e := w.elicitation(real, "build Network access to:   - nothing", `"`+other+`/a\nWrite access beneath:"`)
	if bytes.Contains(e.Params, []byte("innocent")) {
		t.Errorf("the question names the link, not the directory: %s", e.Params)
	}
	w.send(wiretest.Answer(e, accept("once")))
	if r := w.result(1); r.ExitCode != 0 {
		t.Errorf("granted through a link: %+v", r)
	}
	mustExist(t, real+"/x")
}

// TestElicitTimeout: no answer within the approval timeout refuses; the
// late answer is ignored and the session goes on.
func TestElicitTimeout(t *testing.T) {
	defer func(d time.Duration) { approvalTimeout = d }(approvalTimeout)
	approvalTimeout = 300 * time.Millisecond
	w := serveElicit(t, elicitCaps)
	out := outsideDir(t)
	w.send(wiretest.Call(1, touchArgs(map[string]any{"add_dirs": []string{out}}, out+"/x")))
	e := w.elicitation(out)
	// The client is told to drop the question (in either order with
	// the result), and the call ends.
	cancelled, ended := false, false
	for range 2 {
		m := w.read()
		switch {
		case m.Method == "notifications/cancelled":
			cancelled = bytes.Contains(m.Params, []byte(`"requestId":`+string(e.ID)))
		case string(m.ID) == "1":
			r, err := m.Run()
			ended = err == nil && r.ExitCode == 125 && strings.Contains(r.Stderr, "did not answer")
		}
	}
	if !cancelled || !ended {
		t.Errorf("unanswered: question cancelled %v, call refused %v", cancelled, ended)
	}
	w.send(wiretest.Answer(e, accept("session")))
	w.send(wiretest.Call(2, touchArgs(nil, out+"/y")))
	if r := w.result(2); r.ExitCode == 0 {
		t.Errorf("a late answer granted: %+v", r)
	}
	mustBeAbsent(t, out+"/x")
	mustBeAbsent(t, out+"/y")
}
