package ipc

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/agentbox/agentbox/internal/windows/strictjson"
)

// Version is the protocol version every frame carries. A peer that sees
// another version stops: agentbox and agentbox-runner ship together, so a
// mismatch means a stale runner copy, never something to negotiate.
const Version = 1

// MaxFrame caps one frame's JSON body. Output chunks are far smaller
// (see [MaxChunk]); the cap only bounds what a confused or hostile peer can
// make the other side allocate.
const MaxFrame = 1 << 20

// MaxChunk is the most stdio bytes one frame carries; base64 and the
// envelope keep the frame well under [MaxFrame].
const MaxChunk = 64 << 10

// Message types. Parent (agentbox) to runner:
const (
	TypeSpawn      = "spawn"       // Spawn: start the command
	TypeStdin      = "stdin"       // Data: bytes for the command's stdin
	TypeCloseStdin = "close_stdin" // no payload
	TypeTerminate  = "terminate"   // no payload: kill the whole job
)

// Runner to parent:
const (
	TypeReady  = "ready"  // Ready: the command runs
	TypeStdout = "stdout" // Data
	TypeStderr = "stderr" // Data
	TypeExit   = "exit"   // Exit: the whole tree is gone
	TypeError  = "error"  // Error: the runner failed
)

var knownTypes = map[string]bool{
	TypeSpawn: true, TypeStdin: true, TypeCloseStdin: true, TypeTerminate: true,
	TypeReady: true, TypeStdout: true, TypeStderr: true, TypeExit: true, TypeError: true,
}

// Frame is one message: the envelope around a typed payload.
type Frame struct {
	Version int             `json:"version"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Spawn asks the runner to start a command.
type Spawn struct {
	// Path is the resolved executable; Args[0] is what the command sees.
	Path string   `json:"path"`
	Args []string `json:"args"`
	// CmdLine, when set, is passed to CreateProcess verbatim instead of a
	// command line composed from Args (cmd.exe and batch files need it).
	CmdLine string   `json:"cmdline,omitempty"`
	Dir     string   `json:"dir"`
	Env     []string `json:"env"`
	// SIDs are extra restricting SIDs (the synthetic write SID) besides
	// Everyone and the logon SID, in string form.
	SIDs []string `json:"sids"`
	// StdinOpen says whether the parent will send stdin frames; if false
	// the command's stdin is NUL.
	StdinOpen bool `json:"stdin_open"`
}

// Data is a chunk of stdio.
type Data struct {
	B []byte `json:"b"` // base64 in JSON
}

// Ready reports the started command's process id.
type Ready struct {
	PID uint32 `json:"pid"`
	// Job says which job limits held (winapi.JobLimits.String): the
	// runner is in a job already, so its sandbox job may lack the UI
	// restrictions.
	Job string `json:"job,omitempty"`
	// UI reports that the job has its UI restrictions.
	UI bool `json:"ui,omitempty"`
	// JobHandle is the runner's handle to the command's job, a value in
	// the runner's handle table: agentbox duplicates it through its
	// handle to the runner process to ask which processes belong to the
	// run (the allow-list proxy serves only those).
	JobHandle uint64 `json:"job_handle,omitempty"`
}

// Exit reports how the command ended.
type Exit struct {
	Code uint32 `json:"code"`
}

// Error reports a runner failure. Code is one of the Code* values.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes the runner sends.
const (
	CodeProtocol    = "protocol"     // bad or unexpected frame
	CodeToken       = "token"        // building the restricted token failed
	CodeNotFound    = "not_found"    // the command does not exist
	CodeNotExec     = "not_exec"     // the command is not executable
	CodeSpawnFailed = "spawn_failed" // anything else about starting it
)

func (e *Error) Error() string { return "agentbox-runner: " + e.Code + ": " + e.Message }

// ErrFrameTooLarge is returned for a frame whose declared length exceeds
// [MaxFrame]; the stream is unusable after it.
var ErrFrameTooLarge = errors.New("ipc: frame too large")

// NewFrame builds a frame of type typ around payload (nil for none).
func NewFrame(typ string, payload any) (*Frame, error) {
	f := &Frame{Version: Version, Type: typ}
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			return nil, fmt.Errorf("ipc: encoding %s payload: %w", typ, err)
		}
		f.Payload = b
	}
	return f, nil
}

// Decode unmarshals the payload into v, refusing unknown fields so a
// mismatched peer fails loudly.
func (f *Frame) Decode(v any) error {
	if len(f.Payload) == 0 {
		return fmt.Errorf("ipc: %s frame has no payload", f.Type)
	}
	if err := strictjson.Unmarshal(f.Payload, v); err != nil {
		return fmt.Errorf("ipc: decoding %s payload: %w", f.Type, err)
	}
	return nil
}

// WriteFrame writes f as a little-endian uint32 length and the JSON body,
// in one Write so frames from one writer never interleave on a pipe.
func WriteFrame(w io.Writer, f *Frame) error {
	body, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("ipc: encoding frame: %w", err)
	}
	if len(body) > MaxFrame {
		return fmt.Errorf("ipc: %s frame of %d bytes: %w", f.Type, len(body), ErrFrameTooLarge)
	}
	buf := make([]byte, 4+len(body))
	binary.LittleEndian.PutUint32(buf, uint32(len(body)))
	copy(buf[4:], body)
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("ipc: writing %s frame: %w", f.Type, err)
	}
	return nil
}

// Send builds and writes a frame.
func Send(w io.Writer, typ string, payload any) error {
	f, err := NewFrame(typ, payload)
	if err != nil {
		return err
	}
	return WriteFrame(w, f)
}

// ReadFrame reads one frame. It returns io.EOF only at a clean frame
// boundary; a stream cut inside a frame is io.ErrUnexpectedEOF. The length
// is checked before anything is allocated.
func ReadFrame(r io.Reader) (*Frame, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n > MaxFrame {
		return nil, fmt.Errorf("ipc: declared length %d: %w", n, ErrFrameTooLarge)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("ipc: reading frame body: %w", err)
	}
	return parseFrame(body)
}

func parseFrame(body []byte) (*Frame, error) {
	var f Frame
	if err := strictjson.Unmarshal(body, &f); err != nil {
		return nil, fmt.Errorf("ipc: bad frame: %w", err)
	}
	if f.Version != Version {
		return nil, fmt.Errorf("ipc: frame version %d, want %d (stale agentbox-runner?)", f.Version, Version)
	}
	if !knownTypes[f.Type] {
		return nil, fmt.Errorf("ipc: unknown frame type %q", f.Type)
	}
	return &f, nil
}
