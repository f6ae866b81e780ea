package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/policy"
	"github.com/agentbox/agentbox/sandbox"
)

// No TestMain calls sandbox.Main: the re-executed test binary becomes the
// sandbox's init stage at package init on its own.

// connect starts a server on a session for a fresh workspace and returns
// the SDK's own client connected to it over an in-memory pipe.
func connect(t *testing.T, opts Options) (*mcp.ClientSession, string) {
	t.Helper()
	s, ws := newSession(t)
	ctx, cancel := context.WithCancel(context.Background())
	st, ct := mcp.NewInMemoryTransports()
	srv := New(s, opts)
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
		cancel()
	})
	return cs, ws
}

// newSession is a sandbox session for a fresh workspace, closed when the
// test ends.
func newSession(t *testing.T) (*sandbox.Session, string) {
	t.Helper()
	return newSessionWith(t, policy.Options{})
}

// newSessionWith is newSession with o (its Cwd the fresh workspace).
func newSessionWith(t *testing.T, o policy.Options) (*sandbox.Session, string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("sandbox sessions are exercised on Linux")
	}
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	o.Cwd = ws
	pol, err := policytest.Resolve(o, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	s, err := sandbox.NewSession(pol)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ws
}

func call(t *testing.T, ctx context.Context, cs *mcp.ClientSession, args map[string]any) (*mcp.CallToolResult, RunOutput, error) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run", Arguments: args})
	if err != nil {
		return nil, RunOutput{}, err
	}
	var out RunOutput
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	return res, out, nil
}

func TestRunTool(t *testing.T) {
	cs, ws := connect(t, Options{})
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "run" {
		t.Fatalf("tools: %+v, %v", tools, err)
	}
	if !strings.Contains(tools.Tools[0].Description, ws) {
		t.Errorf("description does not name the workspace: %q", tools.Tools[0].Description)
	}
	res, out, err := call(t, ctx, cs, map[string]any{
		"command": []string{"sh", "-c", "pwd; cat; echo oops >&2; echo x > made.txt; exit 3"},
		"stdin":   "from stdin\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.ExitCode != 3 || out.Report == nil || out.Report.ExitCode != 3 || out.Stdout != ws+"\nfrom stdin\n" || out.Stderr != "oops\n" {
		t.Errorf("result: %+v", out)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(text, "from stdin") || !strings.Contains(text, "[exit code: 3]") {
		t.Errorf("text content: %q", text)
	}
	if res.IsError {
		t.Error("a command's non-zero exit is not a tool error")
	}
	if _, err := os.Stat(filepath.Join(ws, "made.txt")); err != nil {
		t.Errorf("write in the workspace: %v", err)
	}
	// A write outside the writable roots fails, and the host is unchanged.
	vt, err := os.MkdirTemp("/var/tmp", "agentbox-mcp-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(vt)
	_, out, _ = call(t, ctx, cs, map[string]any{"command": []string{"sh", "-c", "echo x > " + vt + "/f"}})
	if out.ExitCode == 0 {
		t.Error("write outside succeeded")
	}
	if _, err := os.Stat(filepath.Join(vt, "f")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("host: %v", err)
	}
	// Start failures keep the CLI's statuses.
	res, out, _ = call(t, ctx, cs, map[string]any{"command": []string{"no-such-command-agentbox"}})
	if out.ExitCode != 127 || !res.IsError {
		t.Errorf("not found: %+v", out)
	}
	// Bad input is a tool error, not a crash.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"command": []string{}}})
	if err != nil || !res.IsError {
		t.Errorf("empty command: %+v, %v", res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"command": []string{"true"}, "timeout_seconds": -1}})
	if err != nil || !res.IsError {
		t.Errorf("negative timeout: %+v, %v", res, err)
	}
}

func TestRunToolTruncates(t *testing.T) {
	cs, _ := connect(t, Options{MaxOutput: 1000})
	_, out, err := call(t, context.Background(), cs, map[string]any{"command": []string{"sh", "-c", "head -c 5000 /dev/zero | tr '\\0' a"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.Stdout, strings.Repeat("a", 1000)+"\n[agentbox: stdout truncated: 4000 more bytes not shown]") {
		t.Errorf("stdout: %q", out.Stdout)
	}
}

// TestRunToolLargeOutputAndStdin: nothing of a large output is lost (the
// cap counts what it drops) and a large stdin reaches its end.
func TestRunToolLargeOutputAndStdin(t *testing.T) {
	cs, _ := connect(t, Options{MaxOutput: 1000})
	const n = 10 << 20
	_, out, err := call(t, context.Background(), cs, map[string]any{
		"command": []string{"sh", "-c", fmt.Sprintf("wc -c >&2; head -c %d /dev/zero | tr '\\0' a", n)},
		"stdin":   strings.Repeat("y", 1<<20),
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("[agentbox: stdout truncated: %d more bytes not shown]", n-1000); !strings.Contains(out.Stdout, want) {
		t.Errorf("stdout ends %q, want %q", out.Stdout[max(0, len(out.Stdout)-80):], want)
	}
	if !strings.HasPrefix(out.Stderr, fmt.Sprint(1<<20)+"\n") {
		t.Errorf("stderr %q, want the stdin's size", out.Stderr)
	}
}

// TestRunToolTimeoutAndCancel: timeout_seconds and notifications/cancelled
// kill the command and its background children; the session goes on.
func TestRunToolTimeoutAndCancel(t *testing.T) {
	cs, ws := connect(t, Options{})
	ctx := context.Background()
	start := time.Now()
	_, out, err := call(t, ctx, cs, map[string]any{
		"command":         []string{"sh", "-c", "(sleep 2; echo late > late1) & sleep 30"},
		"timeout_seconds": 0.3,
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.ExitCode != 137 || !out.TimedOut || time.Since(start) > 5*time.Second {
		t.Errorf("timeout: %+v after %v", out, time.Since(start))
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		time.Sleep(300 * time.Millisecond)
		cancel() // the client sends notifications/cancelled
	}()
	_, _, err = call(t, cctx, cs, map[string]any{"command": []string{"sh", "-c", "(sleep 2; echo late > late2) & sleep 30"}})
	if err == nil {
		t.Error("cancelled call returned a result")
	}
	time.Sleep(2500 * time.Millisecond)
	for _, f := range []string{"late1", "late2"} {
		if _, err := os.Stat(filepath.Join(ws, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: a background child survived", f)
		}
	}
	// The command is gone from the session too: nothing sleeps any more.
	_, out, _ = call(t, ctx, cs, map[string]any{"command": []string{"sh", "-c", "cat /proc/[0-9]*/comm"}})
	if strings.Contains(out.Stdout, "sleep") || !strings.Contains(out.Stdout, "sh") {
		t.Errorf("processes in the session: %q", out.Stdout)
	}
}

func TestRunToolParallel(t *testing.T) {
	cs, _ := connect(t, Options{})
	var wg sync.WaitGroup
	start := time.Now()
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, out, err := call(t, context.Background(), cs, map[string]any{"command": []string{"sh", "-c", "sleep 0.5; echo $0", string(rune('a' + i))}})
			if err != nil || out.Stdout != string(rune('a'+i))+"\n" {
				t.Errorf("call %d: %+v, %v", i, out, err)
			}
		}()
	}
	wg.Wait()
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Errorf("6 parallel calls of 0.5 s took %v: not run concurrently", d)
	}
}

// TestServeClientHangsUp: when the client's side of the connection ends
// with a call in flight, Serve returns at once and the command dies.
func TestServeClientHangsUp(t *testing.T) {
	s, ws := newSession(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- Serve(context.Background(), s, inR, outW, Options{}) }()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	go cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run", Arguments: map[string]any{
		"command": []string{"sh", "-c", "sleep 2; echo late > late.txt"}}})
	time.Sleep(300 * time.Millisecond)
	inW.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(1500 * time.Millisecond):
		t.Fatal("Serve waits for the call in flight after the client hung up")
	}
	time.Sleep(2 * time.Second)
	if _, err := os.Stat(filepath.Join(ws, "late.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Error("the command outlived its client")
	}
}

// BenchmarkRunTrue: one run call of `true`, through the SDK's client and
// an in-memory pipe.
func BenchmarkRunTrue(b *testing.B) {
	ws, _ := filepath.EvalSymlinks(b.TempDir())
	pol, err := policytest.Resolve(policy.Options{Cwd: ws}, func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	s, err := sandbox.NewSession(pol)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := New(s, Options{}).Connect(context.Background(), st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	for b.Loop() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"command": []string{"true"}}})
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

// TestDescribeNetwork: the tool's description tells the agent which hosts
// an allow-list lets it reach and how (the proxy variables), instead of
// calling the network off.
func TestDescribeNetwork(t *testing.T) {
	rules, err := policy.ParseAllowList([]string{"github.com", "*.npmjs.org"}, []string{"gist.github.com"}, false)
	if err != nil {
		t.Fatal(err)
	}
	got := describePolicy(policytest.New(policytest.Fields{Mode: policy.WorkspaceWrite, Cwd: "/ws", Egress: rules}))
	for _, w := range []string{"reaches only github.com, *.npmjs.org (except what", "http_proxy", "have no network"} {
		if !strings.Contains(got, w) {
			t.Errorf("description lacks %q: %s", w, got)
		}
	}
	if strings.Contains(got, "network is off") {
		t.Errorf("an allow-list described as the network off: %s", got)
	}
	if got := describePolicy(policytest.New(policytest.Fields{Mode: policy.WorkspaceWrite, Cwd: "/ws"})); !strings.Contains(got, "the network is off") || strings.Contains(got, "port") {
		t.Errorf("network off: %s", got)
	}
	got = describePolicy(policytest.New(policytest.Fields{Mode: policy.WorkspaceWrite, Cwd: "/ws",
		Publish: []policy.PortMap{{Host: 8080, Inner: 3000}}, HostPorts: []uint16{5432, 6379}}))
	for _, w := range []string{"sandbox's 127.0.0.1:3000 at the host's 127.0.0.1:8080", "host's 127.0.0.1 and [::1] on port 5432, 6379"} {
		if !strings.Contains(got, w) {
			t.Errorf("description lacks %q: %s", w, got)
		}
	}
}

// TestRunToolSchema: the input schema is plain JSON Schema, one `type`
// per property, as clients that build arguments from it (the MCP
// inspector's CLI turns `command=["a"]` into an array only when the type
// says "array") and single-type dialects need; so is the output schema,
// whose values are never null.
func TestRunToolSchema(t *testing.T) {
	cs, _ := connect(t, Options{})
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 1 {
		t.Fatalf("tools: %+v, %v", tools, err)
	}
	var in struct {
		Type                 string                     `json:"type"`
		Properties           map[string]json.RawMessage `json:"properties"`
		Required             []string                   `json:"required"`
		AdditionalProperties *bool                      `json:"additionalProperties"`
	}
	b, _ := json.Marshal(tools.Tools[0].InputSchema)
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"command":         `{"type":"array","items":{"type":"string"}}`,
		"stdin":           `{"type":"string"}`,
		"timeout_seconds": `{"type":"number"}`,
		"cwd":             `{"type":"string"}`,
		"request_permissions": `{"type":"object","additionalProperties":false,"properties":{` +
			`"add_dirs":{"type":"array","items":{"type":"string"},"description":"absolute directories to make writable (not /, the home directory or a system directory)"},` +
			`"allow_domains":{"type":"array","items":{"type":"string"},"description":"hosts to reach through agentbox's proxy: name, *.suffix, name:port, IP or CIDR"},` +
			`"reason":{"type":"string","description":"why the command needs it, shown to the user"}}}`,
	}
	if in.Type != "object" || len(in.Required) != 1 || in.Required[0] != "command" || in.AdditionalProperties == nil || *in.AdditionalProperties {
		t.Errorf("input schema: %s", b)
	}
	if len(in.Properties) != len(want) {
		t.Errorf("input properties: %s", b)
	}
	for name, w := range want {
		var got map[string]any
		if err := json.Unmarshal(in.Properties[name], &got); err != nil {
			t.Errorf("%s: %s: %v", name, in.Properties[name], err)
			continue
		}
		if d, _ := got["description"].(string); d == "" {
			t.Errorf("%s has no description", name)
		}
		delete(got, "description")
		g, _ := json.Marshal(got)
		var wm map[string]any
		json.Unmarshal([]byte(w), &wm)
		ws, _ := json.Marshal(wm)
		if string(g) != string(ws) {
			t.Errorf("%s: schema %s, want %s", name, g, ws)
		}
	}
	out, _ := json.Marshal(tools.Tools[0].OutputSchema)
	for _, s := range []string{string(b), string(out)} {
		if strings.Contains(s, `"null"`) || strings.Contains(s, `"type":[`) {
			t.Errorf("a nullable or multi-type property: %s", s)
		}
	}
}

// TestRunToolCwd: cwd is a directory inside the workspace, relative to it
// or absolute; one outside it (a symlink in the workspace pointing out
// included), one that does not exist and a file are tool errors, and
// nothing runs.
func TestRunToolCwd(t *testing.T) {
	cs, ws := connect(t, Options{})
	ctx := context.Background()
	outside, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"sub/deeper", "other"} {
		if err := os.MkdirAll(filepath.Join(ws, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"out": outside, "in": "sub/deeper", "up": ".."} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ cwd, want string }{
		{"sub", ws + "/sub"},
		{"sub/deeper/", ws + "/sub/deeper"},
		{".", ws},
		{"", ws},
		{ws, ws},
		{ws + "/other", ws + "/other"},
		{"in", ws + "/sub/deeper"},
		{"sub/../other", ws + "/other"},
	} {
		res, out, err := call(t, ctx, cs, map[string]any{"command": []string{"pwd", "-P"}, "cwd": tc.cwd})
		if err != nil || res.IsError || out.ExitCode != 0 || out.Stdout != tc.want+"\n" {
			t.Errorf("cwd %q: %+v, %v", tc.cwd, out, err)
		}
	}
	marker := filepath.Join(ws, "ran")
	for _, tc := range []struct{ cwd, msg string }{
		{outside, "outside the workspace"},
		{"..", "outside the workspace"},
		{"/", "outside the workspace"},
		{"out", "outside the workspace"},
		{"up", "outside the workspace"},
		{"nonexistent", "does not exist"},
		{outside + "/nonexistent", "does not exist"},
		{"file", "not a directory"},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run", Arguments: map[string]any{
			"command": []string{"touch", marker}, "cwd": tc.cwd}})
		if err != nil {
			t.Fatalf("cwd %q: %v", tc.cwd, err)
		}
		msg := ""
		if len(res.Content) > 0 {
			msg = res.Content[0].(*mcp.TextContent).Text
		}
		if !res.IsError || !strings.Contains(msg, tc.msg) || !strings.Contains(msg, "cwd") {
			t.Errorf("cwd %q: %v %q, want a tool error saying %q", tc.cwd, res.IsError, msg, tc.msg)
		}
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cwd %q: the command ran", tc.cwd)
			os.Remove(marker)
		}
	}
}
