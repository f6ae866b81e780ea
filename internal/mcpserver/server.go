// Package mcpserver is agentbox's MCP server: one sandbox session, held
// for the life of the connection, and one tool, "run", that runs a
// command in it. It is built on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk), which speaks JSON-RPC 2.0,
// one message per line, at the current protocol version.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/internal/contract"
	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/policy"
	"github.com/agentbox/agentbox/sandbox"
)

// DefaultMaxOutput is how much of each of stdout and stderr a result
// carries before the rest is cut off with a marker.
const DefaultMaxOutput = 100 << 10

// maxAsk is the most directories, and the most domains, one
// request_permissions may ask for.
const maxAsk = 32

// maxLine is the longest message the server reads, the SDK's own limit.
const maxLine = mcp.DefaultMaxLineLength

// Options adjust the server.
type Options struct {
	// Version is reported to clients.
	Version string
	// MaxOutput caps stdout and stderr each, in bytes; 0 means
	// DefaultMaxOutput.
	MaxOutput int
	// DefaultTimeout applies to calls that give no timeout_seconds; 0
	// means none.
	DefaultTimeout time.Duration

	// base, when set, ends every call when it ends (see Serve).
	base context.Context
}

// RunInput is the run tool's input.
type RunInput struct {
	Command        []string `json:"command" jsonschema:"the program and its arguments, run directly without a shell (use [\"sh\", \"-c\", \"...\"] for pipes and redirections)"`
	Cwd            string   `json:"cwd,omitempty" jsonschema:"the directory to run in: inside the workspace, relative to it or absolute (default: the workspace)"`
	Stdin          *string  `json:"stdin,omitempty" jsonschema:"text given to the command on its standard input (default: none)"`
	TimeoutSeconds *float64 `json:"timeout_seconds,omitempty" jsonschema:"kill the command and everything it started after this many seconds"`

	// RequestPermissions asks for more than the sandbox allows, for this
	// call: the server asks the user (MCP elicitation), and only the
	// user's accept grants it.
	RequestPermissions *PermissionRequest `json:"request_permissions,omitempty" jsonschema:"more than the sandbox allows, for this call: directories to write beneath and hosts to reach. The user is asked and may grant it for this call or the rest of the session, or refuse (exit_code 125, nothing runs). A refused run's report.suggest says what to ask for"`
}

// PermissionRequest is request_permissions: what a call asks the user for.
type PermissionRequest struct {
	AddDirs      []string `json:"add_dirs,omitempty" jsonschema:"absolute directories to make writable (not /, the home directory or a system directory)"`
	AllowDomains []string `json:"allow_domains,omitempty" jsonschema:"hosts to reach through agentbox's proxy: name, *.suffix, name:port, IP or CIDR"`
	Reason       string   `json:"reason,omitempty" jsonschema:"why the command needs it, shown to the user"`
}

// RunOutput is the run tool's structured result.
type RunOutput struct {
	// ExitCode is the command's status; 128+N when a signal N killed it;
	// 125 when agentbox could not run it, 126 not executable, 127 not
	// found (the CLI's contract).
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// TimedOut is set when timeout_seconds (or --timeout) ended the
	// command.
	TimedOut bool `json:"timed_out,omitempty"`
	// Report is the run report, the object `agentbox run --report`
	// writes: the exit code and the network section (with an
	// allow-list, every destination asked for, allowed or refused).
	Report *sandbox.RunReport `json:"report"`
}

// New returns an MCP server whose run tool runs commands in s. The
// caller keeps ownership of s.
func New(s *sandbox.Session, opts Options) *mcp.Server {
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	if opts.Version == "" {
		opts.Version = "devel"
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "agentbox", Title: "agentbox sandbox", Version: opts.Version}, nil)
	h := &handler{s: s, opts: opts}
	if s.Approve == nil {
		// The user is asked through the client of the call that
		// asks; an embedding program may have set a hook of its own.
		s.Approve = approve
	}
	closed := true
	// The schemas the SDK's typed AddTool would derive, advertised as
	// they are; the handler is the SDK's untyped one, which decodes the
	// arguments once, strictly, instead of validating a generic copy of
	// them against the schema first, and returns the structured result
	// marshalled once, without the SDK unmarshalling it again to check it
	// against our own schema (a command's output can be large, and each
	// call is a command: this is its cost per call).
	in, err := jsonschema.For[RunInput](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: input schema: %v", err)) // a fixed type: fails every test if ever
	}
	out, err := jsonschema.For[RunOutput](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: output schema: %v", err))
	}
	// Plain types: clients that build arguments from the schema (the
	// MCP inspector's CLI parses `command=[...]` as JSON only for a
	// property whose type is "array") and single-type dialects do not
	// understand ["null", "array"], which the SDK's inference gives
	// every slice and pointer. The decoder takes a null as absent; the
	// output never holds one.
	plain(in)
	plain(out)
	srv.AddTool(&mcp.Tool{
		Name:         "run",
		Title:        "Run a command in the sandbox",
		Description:  describe(s),
		Annotations:  &mcp.ToolAnnotations{DestructiveHint: &closed, OpenWorldHint: ptr(s.Policy().Network())},
		InputSchema:  in,
		OutputSchema: out,
	}, h.call)
	return srv
}

func ptr[T any](v T) *T { return &v }

// plain rewrites every ["null", T] type in s, at any depth, as T.
func plain(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) == 2 && (s.Types[0] == "null" || s.Types[1] == "null") {
		s.Type = s.Types[0]
		if s.Type == "null" {
			s.Type = s.Types[1]
		}
		s.Types = nil
	}
	plain(s.Items)
	for _, p := range s.Properties {
		plain(p)
	}
}

// Serve runs the server on r and w (newline-delimited JSON-RPC, as on an
// MCP stdio connection) until the client disconnects or ctx ends.
func Serve(ctx context.Context, s *sandbox.Session, r io.Reader, w io.Writer, opts Options) error {
	// The SDK waits for calls in flight before Run returns; a client that
	// hangs up must not leave its commands running (or the server
	// waiting for them), so the end of the input cancels every call.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts.base = ctx
	// A session whose sandbox died would fail every later call: end the
	// server instead, so the client sees it gone and can start another.
	died := make(chan struct{})
	go func() {
		select {
		case <-s.Done():
			close(died)
			cancel()
		case <-ctx.Done():
		}
	}()
	t := &lineTransport{r: r, w: w, onEnd: cancel}
	err := New(s, opts).Run(ctx, t)
	select {
	case <-died:
		return errors.New("the session's sandbox ended unexpectedly; start agentbox mcp again")
	default:
	}
	if terr := t.err(); terr != nil {
		return terr
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil
	}
	return err
}

// describe tells the agent what the sandbox allows, from the session's
// policy.
func describe(s *sandbox.Session) string { return describePolicy(s.Policy()) }

func describePolicy(p *policy.Policy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run a command in agentbox's %s sandbox, in %s. ", p.Mode(), p.Cwd())
	switch {
	case p.Mode() == policy.DangerFullAccess:
		b.WriteString("There is no sandbox: the command can do anything you can.")
	default:
		b.WriteString("It may read what the user can read")
		if len(p.WritableRoots()) > 0 {
			fmt.Fprintf(&b, " and write only beneath %s", strings.Join(p.WritableRoots(), ", "))
			if len(p.ProtectedNames()) > 0 {
				fmt.Fprintf(&b, " (%s stay read-only)", strings.Join(p.ProtectedNames(), ", "))
			}
		} else {
			b.WriteString(" and write nowhere")
		}
		switch {
		case p.Network():
			b.WriteString("; the network is on.")
		case len(p.AllowedDomains()) > 0:
			b.WriteString("; the network reaches only " + allowed(p) + ", through agentbox's proxy, which the proxy variables (http_proxy, https_proxy, ALL_PROXY) name: tools that ignore them have no network, and names are not resolvable inside. Refused destinations are listed at the end of stderr.")
		default:
			b.WriteString("; the network is off (loopback works).")
		}
	}
	describePorts(&b, p)
	b.WriteString(" The command runs directly, without a shell; its background processes end with it. Returns exit_code, stdout and stderr.")
	return b.String()
}

// describePorts tells the agent which of the command's ports the user
// reaches, and which of the host's the command does.
func describePorts(b *strings.Builder, p *policy.Policy) {
	if pub := p.Publish(); len(pub) > 0 {
		var ms []string
		for _, m := range pub {
			ms = append(ms, fmt.Sprintf("127.0.0.1:%d at the host's 127.0.0.1:%d", m.Inner, m.Host))
		}
		fmt.Fprintf(b, " A server the command runs on the sandbox's %s is reachable from the user's machine while the command runs (published ports).", strings.Join(ms, ", "))
	}
	if hp := p.HostPorts(); len(hp) > 0 {
		var ps []string
		for _, port := range hp {
			ps = append(ps, fmt.Sprint(port))
		}
		fmt.Fprintf(b, " The command may connect to the host's 127.0.0.1 and [::1] on port %s, and no other host port.", strings.Join(ps, ", "))
	}
}

// allowed lists an allow-list's patterns for the tool's description.
func allowed(p *policy.Policy) string {
	names := p.AllowedDomains()
	if len(names) == 0 {
		return "nothing (the allow-list is empty)"
	}
	if len(names) > 20 {
		names = append(names[:20], fmt.Sprintf("and %d more", len(names)-20))
	}
	s := strings.Join(names, ", ")
	if len(p.DeniedDomains()) > 0 {
		s += " (except what [network] denied_domains refuses)"
	}
	return s
}

type handler struct {
	s    *sandbox.Session
	opts Options
}

// call decodes the arguments as the input schema says (an object with
// only RunInput's fields, each of its type), runs the command, and puts
// the result in both forms.
func (h *handler) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in RunInput
	args := []byte(req.Params.Arguments)
	if len(args) == 0 {
		args = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return toolError(fmt.Errorf(`validating "arguments": %w`, err)), nil
	}
	if dec.More() {
		return toolError(errors.New(`validating "arguments": trailing data after the object`)), nil
	}
	res, out, err := h.run(ctx, req, in)
	if err != nil {
		return toolError(err), nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("marshaling the result: %w", err)
	}
	res.StructuredContent = json.RawMessage(b)
	return res, nil
}

func toolError(err error) *mcp.CallToolResult {
	var r mcp.CallToolResult
	r.SetError(err)
	return &r
}

func (h *handler) run(ctx context.Context, req *mcp.CallToolRequest, in RunInput) (*mcp.CallToolResult, RunOutput, error) {
	if len(in.Command) == 0 || in.Command[0] == "" {
		return nil, RunOutput{}, errors.New(`"command" must hold the program and its arguments, e.g. ["ls", "-la"]`)
	}
	dir, err := workDir(h.s.Policy().Cwd(), in.Cwd)
	if err != nil {
		return nil, RunOutput{}, err
	}
	timeout := h.opts.DefaultTimeout
	if in.TimeoutSeconds != nil {
		t := *in.TimeoutSeconds
		if math.IsNaN(t) || t <= 0 || t > 1e9 {
			return nil, RunOutput{}, fmt.Errorf(`"timeout_seconds" must be a positive number of seconds, not %v`, t)
		}
		timeout = time.Duration(t * float64(time.Second))
	}
	// notifications/cancelled cancels ctx, which kills the command's
	// whole tree, as a timeout does; so does the client hanging up.
	if h.opts.base != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(h.opts.base, cancel)
		defer stop()
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	// The approval hook asks through the session of this call.
	ctx = context.WithValue(ctx, callKey{}, req.Session)
	c := h.s.Command(ctx, in.Command[0], in.Command[1:]...)
	c.Dir = dir
	if rp := in.RequestPermissions; rp != nil {
		// A question the user can read.
		if len(rp.AddDirs) > maxAsk || len(rp.AllowDomains) > maxAsk {
			return nil, RunOutput{}, fmt.Errorf(`"request_permissions" asks for more than %d directories or domains: ask for fewer`, maxAsk)
		}
		c.Request = &sandbox.Request{AddDirs: rp.AddDirs, AllowDomains: rp.AllowDomains, Reason: rp.Reason}
	}
	if in.Stdin != nil {
		c.Stdin = strings.NewReader(*in.Stdin)
	}
	stdout := &capped{max: h.opts.MaxOutput, name: "stdout"}
	stderr := &capped{max: h.opts.MaxOutput, name: "stderr"}
	c.Stdout, c.Stderr = stdout, stderr
	c.Diagnostics = stderr
	c.WaitDelay = 2 * time.Second

	err = c.Run()
	o := contract.Of(c.Policy, timeout, err, c.Report) // Report: set by Wait
	if o.TimedOut {
		// A killed command is mostly cut mid-line; the agent reads
		// its stderr and agentbox's lines as one text.
		io.WriteString(stderr, "\n")
	}
	o.Finish(stderr, nil)
	var re *sandbox.RefusedError
	if errors.As(o.Failure, &re) {
		hint := restartHint(re.Request)
		if re.Unhonourable {
			hint = "No one was asked: the sandbox can grant only existing absolute directories that are not /, the home, a directory above it, a system directory or a protected path, and domains [network] denied_domains does not refuse."
		}
		fmt.Fprintf(stderr, "agentbox: the command did not run. %s\n", hint)
	}
	out := RunOutput{ExitCode: o.Code, TimedOut: o.TimedOut, Report: o.Report}
	out.Stdout, out.Stderr = stdout.String(), stderr.String()
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: text(out)}},
		IsError: o.Failure != nil,
	}, out, nil
}

// workDir resolves the call's cwd against the workspace ws: "" is the
// workspace; anything else must be a directory inside it once every
// symlink is resolved (a link in the workspace pointing out is outside).
// The command gets the resolved path. The check is the contract of the
// tool, not a wall: the sandbox's roots are what confine the command,
// wherever it starts.
func workDir(ws, cwd string) (string, error) {
	if cwd == "" {
		return "", nil
	}
	p := cwd
	if !filepath.IsAbs(p) {
		p = filepath.Join(ws, p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf(`"cwd" %q does not exist`, cwd)
		}
		return "", fmt.Errorf(`"cwd" %q: %w`, cwd, err)
	}
	root, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return "", fmt.Errorf("the workspace %s: %w", ws, err)
	}
	if !fspath.Within(real, root) {
		how := ""
		if real != filepath.Clean(p) {
			how = " (it resolves to " + real + ")"
		}
		return "", fmt.Errorf(`"cwd" %q is outside the workspace %s%s: give a directory inside it`, cwd, ws, how)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf(`"cwd" %q: %w`, cwd, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf(`"cwd" %q is not a directory`, cwd)
	}
	return real, nil
}

// text is the result for clients that read only the text content.
func text(o RunOutput) string {
	var b strings.Builder
	b.WriteString(o.Stdout)
	if o.Stderr != "" {
		if b.Len() > 0 && !strings.HasSuffix(o.Stdout, "\n") {
			b.WriteByte('\n')
		}
		b.WriteString("[stderr]\n")
		b.WriteString(o.Stderr)
	}
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "[exit code: %d]", o.ExitCode)
	return b.String()
}

// capped keeps the first max bytes written to it and counts the rest.
type capped struct {
	mu      sync.Mutex
	max     int
	name    string
	b       bytes.Buffer
	dropped int64
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - c.b.Len()
	if room >= len(p) {
		c.b.Write(p)
		return len(p), nil
	}
	if room > 0 {
		c.b.Write(p[:room])
	}
	c.dropped += int64(len(p) - max(room, 0))
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := strings.ToValidUTF8(c.b.String(), "\uFFFD")
	if c.dropped > 0 {
		s += fmt.Sprintf("\n[agentbox: %s truncated: %d more bytes not shown]\n", c.name, c.dropped)
	}
	return s
}
