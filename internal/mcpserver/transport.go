package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// lineTransport is MCP's stdio transport, one JSON-RPC message per line,
// written for a server that must outlive a client's mistakes: the SDK's
// own (mcp.IOTransport) ends the connection, and every call in flight,
// on the first line it cannot decode. Here a line that is not a JSON-RPC
// 2.0 message is answered with a JSON-RPC error (id null: its id cannot
// be trusted) and the next line is read; a line over maxLine is read
// past, not held whole, and answered likewise. Only the end of the
// input ends the connection, and a failure to read or write is kept for
// Serve to report.
type lineTransport struct {
	r io.Reader
	w io.Writer
	// onEnd runs when the input ends or fails and when the SDK closes
	// the connection: the calls in flight are then cancelled.
	onEnd func()
	conn  *lineConn
}

func (t *lineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{w: t.w, onEnd: t.onEnd, incoming: make(chan frame), closed: make(chan struct{})}
	t.conn = c
	go c.readLoop(t.r)
	return c, nil
}

// err is the transport's failure, nil if it had none (the input's end is
// none).
func (t *lineTransport) err() error {
	if t.conn == nil {
		return nil
	}
	t.conn.mu.Lock()
	defer t.conn.mu.Unlock()
	return t.conn.failure
}

// frame is one line of input (its content, without the newline), or the
// input's end or failure.
type frame struct {
	line    []byte
	tooLong bool
	err     error
}

type lineConn struct {
	w        io.Writer
	onEnd    func()
	writeMu  sync.Mutex
	incoming chan frame
	closed   chan struct{}
	once     sync.Once

	mu      sync.Mutex
	ended   bool  // the input ended: a failed write then is the client gone
	failure error // the first read or write failure
	// version is the protocol version the client's initialize asked for.
	version string
}

func (c *lineConn) SessionID() string { return "" }

// readLoop reads lines until the input ends, on its own goroutine so that
// Close can unblock a Read waiting for one.
func (c *lineConn) readLoop(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, tooLong, err := readLine(br, maxLine)
		if len(line) > 0 || tooLong {
			if !c.deliver(frame{line: line, tooLong: tooLong}) {
				return
			}
		}
		if err != nil {
			c.mu.Lock()
			c.ended = true
			if !errors.Is(err, io.EOF) && c.failure == nil {
				c.failure = fmt.Errorf("reading the client's messages: %w", err)
			}
			c.mu.Unlock()
			// No message can come now, nor a notifications/cancelled:
			// the calls in flight end with the input, as the client
			// hanging up means.
			c.onEnd()
			if !errors.Is(err, io.EOF) {
				err = fmt.Errorf("reading the client's messages: %w", err)
			}
			c.deliver(frame{err: err})
			return
		}
	}
}

func (c *lineConn) deliver(f frame) bool {
	select {
	case c.incoming <- f:
		return true
	case <-c.closed:
		return false
	}
}

// readLine reads one line of at most limit bytes (the newline not counted)
// from br. A longer one is read to its end but not kept: tooLong is set
// and line is nil. err is the reader's error, with the last line before
// it, which may have no newline.
func readLine(br *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		end := err == nil
		if end {
			chunk = chunk[:len(chunk)-1]
		}
		if !tooLong {
			if len(line)+len(chunk) > limit {
				tooLong, line = true, nil
			} else {
				if cap(line)-len(line) < len(chunk) {
					// Doubling, not append's gentler growth: a long line
					// then costs at most twice its size in allocations.
					grown := make([]byte, len(line), min(limit, max(2*cap(line), len(line)+len(chunk))))
					copy(grown, line)
					line = grown
				}
				line = append(line, chunk...)
			}
		}
		switch {
		case end:
			return line, tooLong, nil
		case errors.Is(err, bufio.ErrBufferFull):
		default:
			return line, tooLong, err
		}
	}
}

// Read returns the next message, answering every bad line on the way.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		case f := <-c.incoming:
			if f.err != nil {
				return nil, f.err
			}
			msg, code, why := decode(f)
			if msg != nil {
				c.noteVersion(msg)
				return msg, nil
			}
			if code == 0 {
				continue // a blank line
			}
			if err := c.writeError(code, why); err != nil {
				return nil, err
			}
		}
	}
}

// decode makes a message of a line, or says why it is none with the
// JSON-RPC 2.0 error code for it: -32700 for what is not JSON (UTF-8, as
// JSON text must be), -32600 for JSON that is not a request or response
// object. code 0 is a blank line, to be ignored.
func decode(f frame) (jsonrpc.Message, int, string) {
	if f.tooLong {
		return nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: a message over %d MiB (the limit), discarded", maxLine>>20)
	}
	b := bytes.TrimSpace(f.line)
	if len(b) == 0 {
		return nil, 0, ""
	}
	// Checked first, and whole: the SDK's decoder would take a
	// message with anything after it, and invalid UTF-8.
	if !utf8.Valid(b) {
		return nil, jsonrpc.CodeParseError, "parse error: the message is not valid UTF-8"
	}
	if !json.Valid(b) {
		return nil, jsonrpc.CodeParseError, "parse error: the message is not one JSON value on one line"
	}
	switch b[0] {
	case '{':
	case '[':
		// A batch. MCP dropped JSON-RPC batches in 2025-06-18; an empty
		// one is invalid in any version.
		return nil, jsonrpc.CodeInvalidRequest, "invalid request: batches are not supported; send one message per line"
	default:
		return nil, jsonrpc.CodeInvalidRequest, "invalid request: a JSON-RPC message is an object"
	}
	msg, err := jsonrpc.DecodeMessage(b)
	if err != nil {
		return nil, jsonrpc.CodeInvalidRequest, "invalid request: " + err.Error()
	}
	return msg, 0, ""
}

// wireError is a JSON-RPC error response to a message whose id is unknown.
type wireError struct {
	Version string        `json:"jsonrpc"`
	ID      *struct{}     `json:"id"` // always null
	Error   jsonrpc.Error `json:"error"`
}

func (c *lineConn) writeError(code int, message string) error {
	b, err := json.Marshal(wireError{Version: "2.0", Error: jsonrpc.Error{Code: int64(code), Message: message}})
	if err != nil {
		return err
	}
	return c.write(append(b, '\n'))
}

// noteVersion keeps the protocol version an initialize request asks for.
func (c *lineConn) noteVersion(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != "initialize" {
		return
	}
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(req.Params, &p) == nil {
		c.mu.Lock()
		c.version = p.ProtocolVersion
		c.mu.Unlock()
	}
}

// elicitModeSince is the first protocol version whose elicitation/create
// has "mode" (2025-11-25; form when absent).
const elicitModeSince = "2025-11-25"

// dropElicitMode takes "mode":"form", which the SDK always sends, out of
// an elicitation/create for a client of an earlier protocol version
// (2025-06-18's request is exactly message and requestedSchema); the
// meaning is the same, and a strict client of that version sees only
// what its schema names. Versions are dates, which compare as strings.
func (c *lineConn) dropElicitMode(msg jsonrpc.Message) jsonrpc.Message {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != "elicitation/create" {
		return msg
	}
	c.mu.Lock()
	v := c.version
	c.mu.Unlock()
	if v == "" || v >= elicitModeSince {
		return msg
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(req.Params, &p) != nil || string(p["mode"]) != `"form"` {
		return msg
	}
	delete(p, "mode")
	b, err := json.Marshal(p)
	if err != nil {
		return msg
	}
	r := *req
	r.Params = b
	return &r
}

func (c *lineConn) Write(_ context.Context, msg jsonrpc.Message) error {
	msg = c.dropElicitMode(msg)
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("marshaling a message: %w", err)
	}
	return c.write(append(b, '\n'))
}

// write writes one whole message: replies of concurrent calls and error
// replies never interleave.
func (c *lineConn) write(b []byte) error {
	c.writeMu.Lock()
	_, err := c.w.Write(b)
	c.writeMu.Unlock()
	if err != nil {
		c.mu.Lock()
		if !c.ended && c.failure == nil {
			c.failure = fmt.Errorf("writing to the client: %w", err)
		}
		c.mu.Unlock()
	}
	return err
}

func (c *lineConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.onEnd()
	})
	return nil
}
