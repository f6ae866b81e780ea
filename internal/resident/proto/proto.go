// Package proto is the resident helper's one protocol: every message
// between the helper and its clients (the lean `agentbox run` client,
// `agentbox cleanup`), requests, replies and the signal controls a run
// sends while its command runs. A message is one SOCK_SEQPACKET packet:
// a tag byte saying its kind, then its fields in package wire's
// encoding, nothing left over; its kind fixes how many descriptors it
// carries (SCM_RIGHTS), and a packet with another number is refused.
//
// A run goes: the client sends Run with its stdio; the helper answers
// Fallback (nothing ran, the client's full CLI runs it), or OpenReport
// (the run has --report: the client opens the file and sends Report,
// or hangs up for its full CLI), then Started; the client may send
// Signal; the helper ends with Text (any number) and Exited.
package proto

import (
	"errors"
	"strconv"

	"github.com/agentbox/agentbox/internal/wire"
)

// Kind is a message's tag.
type Kind byte

// The client's messages.
const (
	// KindRun is a run as the client was asked for it, with its stdin,
	// stdout and stderr.
	KindRun Kind = 'R'
	// KindReport carries the --report file the client opened.
	KindReport Kind = 'P'
	// KindSignal is a signal for the running command.
	KindSignal Kind = 'G'
	// KindStopIdle is `agentbox cleanup`'s: stop if no command runs.
	KindStopIdle Kind = 'I'
)

// The helper's messages.
const (
	// KindStarted: the command runs; from here on the helper's answer
	// is the run's.
	KindStarted Kind = 'S'
	// KindFallback: nothing ran, and Text says why.
	KindFallback Kind = 'F'
	// KindOpenReport: open the --report file Text names, as the CLI
	// would, and send it.
	KindOpenReport Kind = 'O'
	// KindText is stderr to write before an Exited.
	KindText Kind = 'T'
	// KindExited: the run ended; exit with Code after writing Text.
	KindExited Kind = 'E'
	// KindStopped answers StopIdle: the helper was idle and exits.
	KindStopped Kind = 'X'
	// KindBusy answers StopIdle: the helper stays for Busy commands,
	// and closed Closed idle sessions.
	KindBusy Kind = 'B'
)

// MaxMessage bounds a message; a larger request is not sent (the full
// CLI runs the command itself) and a larger one is not read.
const MaxMessage = 1 << 20

// MaxReply bounds a helper's message: the client's buffer.
const MaxReply = 64 << 10

// Fds is how many descriptors a message of kind k carries.
func Fds(k Kind) int {
	switch k {
	case KindRun:
		return 3
	case KindReport:
		return 1
	}
	return 0
}

// Run is a run as the client was asked for it.
type Run struct {
	// What the helper compares with its own (package ident).
	Binary   string
	StateDir string
	Umask    int
	Rlimits  [][2]uint64
	// What policy resolution reads of the client.
	Dir        string   // os.Getwd
	Executable string   // os.Executable
	Args       []string // os.Args: Args[0] as invoked, Args[1] "run"
	Env        []string // os.Environ: also the command's environment
}

// Message is one message of either side; the fields its Kind uses are
// set, the others zero.
type Message struct {
	Kind Kind
	Run  *Run   // KindRun
	Text string // KindFallback, KindOpenReport, KindText, KindExited
	// Code is the exit status of KindExited (0 to 255) or the signal
	// of KindSignal (1 to 64).
	Code         int
	Busy, Closed int // KindBusy
}

// Marshal encodes m.
func (m *Message) Marshal() []byte {
	b := []byte{byte(m.Kind)}
	switch m.Kind {
	case KindRun:
		r := m.Run
		b = wire.AppendString(b, r.Binary)
		b = wire.AppendString(b, r.StateDir)
		b = wire.AppendUint(b, uint64(r.Umask))
		b = wire.AppendUint(b, uint64(len(r.Rlimits)))
		for _, l := range r.Rlimits {
			b = wire.AppendUint(wire.AppendUint(b, l[0]), l[1])
		}
		b = wire.AppendString(b, r.Dir)
		b = wire.AppendString(b, r.Executable)
		b = wire.AppendStrings(b, r.Args)
		b = wire.AppendStrings(b, r.Env)
	case KindSignal, KindExited:
		b = wire.AppendUint(b, uint64(m.Code))
		b = append(b, m.Text...)
	case KindFallback, KindOpenReport, KindText:
		b = append(b, m.Text...)
	case KindBusy:
		b = wire.AppendUint(wire.AppendUint(b, uint64(m.Busy)), uint64(m.Closed))
	}
	return b
}

// Unmarshal decodes a message that came with nfds descriptors; any
// malformation (an unknown tag, a field cut short, bytes left over, a
// value out of range, the wrong number of descriptors) is an error,
// never a panic.
func Unmarshal(b []byte, nfds int) (*Message, error) {
	if len(b) == 0 {
		return nil, errors.New("malformed message: empty")
	}
	if len(b) > MaxMessage {
		return nil, errors.New("malformed message: " + strconv.Itoa(len(b)) + " bytes")
	}
	m := &Message{Kind: Kind(b[0])}
	d := wire.NewDecoder(b[1:])
	switch m.Kind {
	case KindRun:
		r := &Run{}
		r.Binary = d.ReadString()
		r.StateDir = d.ReadString()
		umask := d.ReadUint()
		if umask > 0o777 {
			d.Fail("umask " + strconv.FormatUint(umask, 8))
		}
		r.Umask = int(umask)
		for range d.ReadCount(16) {
			r.Rlimits = append(r.Rlimits, [2]uint64{d.ReadUint(), d.ReadUint()})
		}
		r.Dir = d.ReadString()
		r.Executable = d.ReadString()
		r.Args = d.ReadStrings()
		r.Env = d.ReadStrings()
		m.Run = r
	case KindSignal:
		sig := d.ReadUint()
		if sig < 1 || sig > 64 {
			d.Fail("signal " + strconv.FormatUint(sig, 10))
		}
		m.Code = int(sig)
	case KindExited:
		code := d.ReadUint()
		if code > 255 {
			d.Fail("exit status " + strconv.FormatUint(code, 10))
		}
		m.Code = int(code)
		m.Text = string(d.Rest())
	case KindFallback, KindOpenReport, KindText:
		m.Text = string(d.Rest())
	case KindBusy:
		busy, closed := d.ReadUint(), d.ReadUint()
		if busy > 1<<20 || closed > 1<<20 {
			d.Fail("counts")
		}
		m.Busy, m.Closed = int(busy), int(closed)
	case KindReport, KindStopIdle, KindStarted, KindStopped:
	default:
		return nil, errors.New("malformed message: tag " + strconv.Itoa(int(b[0])))
	}
	if err := d.End(); err != nil {
		return nil, err
	}
	if nfds != Fds(m.Kind) {
		return nil, errors.New("malformed message: " + strconv.Itoa(nfds) + " descriptors with a " + string(rune(m.Kind)))
	}
	return m, nil
}

// Exited is the messages that end a run: the status the client exits
// with, and what it writes to its stderr first (agentbox's own lines,
// as the full CLI would have written them), in as many messages as fit
// the client's buffer.
func Exited(code int, stderr string) []*Message {
	var out []*Message
	const chunk = MaxReply - 16
	for len(stderr) > chunk {
		out = append(out, &Message{Kind: KindText, Text: stderr[:chunk]})
		stderr = stderr[chunk:]
	}
	return append(out, &Message{Kind: KindExited, Code: code, Text: stderr})
}
