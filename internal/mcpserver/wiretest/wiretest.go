// Package wiretest speaks raw JSON-RPC to an MCP server over its line
// stream, for tests that send what no SDK client would: bad lines,
// oversized ones, messages after a failure.
package wiretest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Initialize and Initialized open an MCP session.
const (
	Initialize  = `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wiretest","version":"v0"}}}`
	Initialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

// Conn is the client's end: lines written to W, replies read from R.
type Conn struct {
	W io.Writer
	R *bufio.Reader
}

// New is a Conn over w and r.
func New(w io.Writer, r io.Reader) *Conn { return &Conn{W: w, R: bufio.NewReaderSize(r, 1<<20)} }

// Reply is a JSON-RPC response, or a request from the server (Method
// set), such as elicitation/create.
type Reply struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (r Reply) String() string {
	if r.Method != "" {
		return fmt.Sprintf("request id %s method %s params %.600s", r.ID, r.Method, r.Params)
	}
	return fmt.Sprintf("id %s result %.600s error %+v", r.ID, r.Result, r.Error)
}

// RunResult is the structured content of a run tool result.
type RunResult struct {
	ExitCode int             `json:"exit_code"`
	Stdout   string          `json:"stdout"`
	Stderr   string          `json:"stderr"`
	Report   json.RawMessage `json:"report"`
	// IsError is the result's isError.
	IsError bool `json:"-"`
}

// Run is r as a run tool result.
func (r Reply) Run() (RunResult, error) {
	var res struct {
		StructuredContent *RunResult `json:"structuredContent"`
		IsError           bool       `json:"isError"`
	}
	if r.Error != nil || r.Method != "" || json.Unmarshal(r.Result, &res) != nil || res.StructuredContent == nil {
		return RunResult{}, fmt.Errorf("not a tool result: %v", r)
	}
	out := *res.StructuredContent
	out.IsError = res.IsError
	return out, nil
}

// InitializeWith is Initialize declaring the client capabilities caps (a
// JSON object, such as {"elicitation":{}}).
func InitializeWith(caps string) string {
	return strings.Replace(Initialize, `"capabilities":{}`, `"capabilities":`+caps, 1)
}

// OpenWith is Open declaring the client capabilities caps.
func (c *Conn) OpenWith(caps string, within time.Duration) error {
	return c.OpenAt("", caps, within)
}

// OpenAt is OpenWith asking for protocol version (Initialize's when "").
func (c *Conn) OpenAt(version, caps string, within time.Duration) error {
	line := InitializeWith(caps)
	if version != "" {
		line = strings.Replace(line, `"protocolVersion":"2025-11-25"`, `"protocolVersion":"`+version+`"`, 1)
	}
	if err := c.Send(line); err != nil {
		return err
	}
	r, err := c.Read(within)
	if err != nil {
		return err
	}
	if string(r.ID) != `"init"` || r.Error != nil {
		return fmt.Errorf("initialize: %v", r)
	}
	return c.Send(Initialized)
}

// Call is a tools/call of the run tool with the arguments args (marshalled).
func Call(id int, args any) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
		"params": map[string]any{"name": "run", "arguments": args}})
	return string(b)
}

// Answer is the client's response with result (marshalled) to the
// server's request req.
func Answer(req Reply, result any) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
	return string(b)
}

// Stdout is a run tool result's stdout.
func (r Reply) Stdout() (string, error) {
	var res struct {
		StructuredContent struct {
			Stdout string `json:"stdout"`
		} `json:"structuredContent"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil {
		return "", fmt.Errorf("not a tool result: %v", r)
	}
	return res.StructuredContent.Stdout, nil
}

// Send writes line and its newline.
func (c *Conn) Send(line string) error {
	_, err := io.WriteString(c.W, line+"\n")
	return err
}

// Open sends Initialize, checks its reply and sends Initialized.
func (c *Conn) Open(within time.Duration) error {
	return c.OpenWith("{}", within)
}

// Read reads the next reply, waiting at most within.
func (c *Conn) Read(within time.Duration) (Reply, error) {
	type lineErr struct {
		b   []byte
		err error
	}
	got := make(chan lineErr, 1)
	go func() {
		b, err := c.R.ReadBytes('\n')
		got <- lineErr{b, err}
	}()
	select {
	case l := <-got:
		if l.err != nil {
			return Reply{}, fmt.Errorf("reading the server's reply: %w (%q)", l.err, l.b)
		}
		var r Reply
		if err := json.Unmarshal(l.b, &r); err != nil {
			return Reply{}, fmt.Errorf("reply %q: %w", l.b, err)
		}
		return r, nil
	case <-time.After(within):
		return Reply{}, errors.New("no reply from the server within " + within.String())
	}
}

// RunCall is a tools/call of the run tool with argv.
func RunCall(id int, argv ...string) string {
	b, _ := json.Marshal(argv)
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run","arguments":{"command":%s}}}`, id, b)
}
