// Package fastpath is the lean `agentbox run` client: from a package init,
// before most of the binary's packages are initialised, it hands the run
// as typed (its arguments, directory, environment and stdio) to the
// resident helper, which resolves the policy exactly as the CLI would
// have and runs the command in a sandbox prepared for it. Anything the
// helper does not serve that way (no helper yet, a terminal, a flag error,
// a policy it does not hold) it says before anything runs, and the
// binary then starts as usual: the full CLI does what it always did.
//
// A Go program pays for every package it links at start-up: the CLI's
// ~120 package inits touch most of a 16 MB binary (about 0.7 ms here
// before main, and more to tear down at exit), and resolving a policy in
// a cold process costs about as much again. The client imports only
// packages that initialise early (os, os/signal, syscall, strconv and
// errors, as package ident does), so that it runs after about 20 inits.
//
// The wire format is its own, not JSON (which would pull in reflect and,
// with it, most of the binary's inits): length-prefixed fields, so that
// arguments and environment values travel byte for byte, valid UTF-8 or
// not.
package fastpath

import (
	"errors"
	"strconv"
)

// magic opens a request. As the 4-byte big-endian header length of the
// helper's other requests it would exceed MaxMessage, so neither kind of
// request can be read as the other.
const magic = "\xffagentbox-run-1\x00"

// MaxMessage bounds a request; a larger one is not sent and the full CLI
// runs the command itself.
const MaxMessage = 1 << 20

// maxReply bounds a reply: the stderr text of an Exited one is cut to fit.
const maxReply = 64 << 10

// Request is a run as the client was asked for it.
type Request struct {
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

// IsRequest reports whether b is a fastpath request (and not the
// helper's other kind).
func IsRequest(b []byte) bool {
	return len(b) >= len(magic) && string(b[:len(magic)]) == magic
}

// Encode frames r.
func Encode(r *Request) []byte {
	b := append([]byte(nil), magic...)
	b = putString(b, r.Binary)
	b = putString(b, r.StateDir)
	b = putUint(b, uint64(r.Umask))
	b = putUint(b, uint64(len(r.Rlimits)))
	for _, l := range r.Rlimits {
		b = putUint(putUint(b, l[0]), l[1])
	}
	b = putString(b, r.Dir)
	b = putString(b, r.Executable)
	b = putStrings(b, r.Args)
	return putStrings(b, r.Env)
}

// Decode parses a request; any malformation is an error, never a panic.
func Decode(b []byte) (*Request, error) {
	if !IsRequest(b) {
		return nil, errors.New("not a fastpath request")
	}
	d := decoder{b: b[len(magic):]}
	r := &Request{}
	r.Binary = d.string()
	r.StateDir = d.string()
	umask := d.uint()
	if umask > 0o777 {
		d.fail("umask " + strconv.FormatUint(umask, 8))
	}
	r.Umask = int(umask)
	n := d.count(16)
	for range n {
		r.Rlimits = append(r.Rlimits, [2]uint64{d.uint(), d.uint()})
	}
	r.Dir = d.string()
	r.Executable = d.string()
	r.Args = d.strings()
	r.Env = d.strings()
	if d.err == nil && len(d.b) != 0 {
		d.fail(strconv.Itoa(len(d.b)) + " trailing bytes")
	}
	if d.err != nil {
		return nil, d.err
	}
	return r, nil
}

// The helper's replies: one Started or Fallback, then (after Started)
// one Exited.
const (
	replyStarted  = 'S'
	replyFallback = 'F' // followed by why, for tests and traces
	replyExited   = 'E' // followed by the exit status (8 bytes) and stderr
	replyText     = 'T' // more stderr, before an Exited
)

// Started is the reply that the command runs: from here on the helper's
// answer is the run's.
func Started() []byte { return []byte{replyStarted} }

// Fallback is the reply that nothing ran and the client must run the
// command itself (the full CLI), with why.
func Fallback(why string) []byte { return append([]byte{replyFallback}, why...) }

// Exited is the replies that the run ended: the status the client exits
// with, and what it writes to its stderr first (agentbox's own messages,
// as the full CLI would have written them), in as many messages as that
// takes.
func Exited(code int, stderr string) [][]byte {
	var out [][]byte
	const chunk = maxReply - 16
	for len(stderr) > chunk {
		out = append(out, append([]byte{replyText}, stderr[:chunk]...))
		stderr = stderr[chunk:]
	}
	b := putUint([]byte{replyExited}, uint64(int64(code)))
	return append(out, append(b, stderr...))
}

// reply is a decoded reply.
type reply struct {
	kind   byte
	code   int
	text   string
	failed bool // malformed
}

func parseReply(b []byte) reply {
	if len(b) == 0 {
		return reply{failed: true}
	}
	r := reply{kind: b[0]}
	switch b[0] {
	case replyStarted:
		r.failed = len(b) != 1
	case replyFallback, replyText:
		r.text = string(b[1:])
	case replyExited:
		d := decoder{b: b[1:]}
		c := int64(d.uint())
		if d.err != nil || c < 0 || c > 255 {
			return reply{failed: true}
		}
		r.code, r.text = int(c), string(d.b)
	default:
		r.failed = true
	}
	return r
}

func putUint(b []byte, v uint64) []byte {
	for i := 7; i >= 0; i-- {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

func putString(b []byte, s string) []byte {
	return append(putUint(b, uint64(len(s))), s...)
}

func putStrings(b []byte, ss []string) []byte {
	b = putUint(b, uint64(len(ss)))
	for _, s := range ss {
		b = putString(b, s)
	}
	return b
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(why string) {
	if d.err == nil {
		d.err = errors.New("malformed fastpath message: " + why)
	}
	d.b = nil
}

func (d *decoder) uint() uint64 {
	if len(d.b) < 8 {
		d.fail("short")
		return 0
	}
	var v uint64
	for _, c := range d.b[:8] {
		v = v<<8 | uint64(c)
	}
	d.b = d.b[8:]
	return v
}

// count reads a count of items of at least min bytes each, bounded by
// what is left.
func (d *decoder) count(min int) int {
	n := d.uint()
	if n > uint64(len(d.b)/min) {
		d.fail("count " + strconv.FormatUint(n, 10))
		return 0
	}
	return int(n)
}

func (d *decoder) string() string {
	n := d.uint()
	if n > uint64(len(d.b)) {
		d.fail("length " + strconv.FormatUint(n, 10))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) strings() []string {
	n := d.count(8)
	out := make([]string, 0, n)
	for range n {
		out = append(out, d.string())
	}
	return out
}
