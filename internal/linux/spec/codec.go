package spec

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/fsreport"
	"github.com/agentbox/agentbox/internal/wire"
)

// The tags of the session's messages (package wire): a message read by
// the wrong reader fails instead of decoding as another.
const (
	tagRequest = 'Q'
	tagAnswer  = 'A'
	tagMessage = 'M'
)

// The fewest bytes an encoded item of a list takes, by which a decoder
// refuses a count the input cannot hold (wire.Decoder.ReadCount).
const (
	minHide        = 8 + 1 + 8 + 8
	minUnreachable = 8 + 8 + 8 + 8
)

// Append appends the request's encoding to b.
func (r *Request) Append(b []byte) []byte {
	// Grown once: an environment's strings would grow it many times.
	b = wire.AppendString(wire.AppendTag(slices.Grow(b, r.size()), tagRequest), r.Op)
	b = wire.AppendString(wire.AppendUint(b, r.ID), r.Path)
	b = wire.AppendStrings(wire.AppendStrings(b, r.Argv), r.Env)
	b = wire.AppendInt(wire.AppendString(b, r.Dir), r.Sig)
	return AppendHides(wire.AppendStrings(b, r.Held), r.Hides)
}

// size is the length of the request's encoding.
func (r *Request) size() int {
	n := 1 + 6*8 + len(r.Op) + len(r.Path) + len(r.Dir) + stringsSize(r.Argv) + stringsSize(r.Env) + stringsSize(r.Held)
	for _, h := range r.Hides {
		n += 8 + len(h.Path) + 1 + stringsSize(h.Reopen) + stringsSize(h.Pins)
	}
	return n
}

// Decode sets r to the request b encodes, all of b.
func (r *Request) Decode(b []byte) error {
	d := wire.NewDecoder(b)
	d.Tag(tagRequest)
	*r = Request{}
	r.Op, r.ID, r.Path = d.ReadString(), d.ReadUint(), d.ReadString()
	r.Argv, r.Env = d.ReadStrings(), d.ReadStrings()
	r.Dir, r.Sig = d.ReadString(), d.ReadInt()
	r.Held, r.Hides = d.ReadStrings(), ReadHides(d)
	return d.End()
}

// stringsSize is what wire.AppendStrings takes for ss.
func stringsSize(ss []string) int {
	n := 8
	for _, s := range ss {
		n += 8 + len(s)
	}
	return n
}

// AppendHides appends hs to b.
func AppendHides(b []byte, hs []Hide) []byte {
	return wire.AppendList(b, hs, func(b []byte, h Hide) []byte {
		b = wire.AppendBool(wire.AppendString(b, h.Path), h.Dir)
		return wire.AppendStrings(wire.AppendStrings(b, h.Reopen), h.Pins)
	})
}

// ReadHides reads what AppendHides wrote.
func ReadHides(d *wire.Decoder) []Hide {
	return wire.ReadList(d, minHide, func(d *wire.Decoder) Hide {
		return Hide{Path: d.ReadString(), Dir: d.ReadBool(), Reopen: d.ReadStrings(), Pins: d.ReadStrings()}
	})
}

// Append appends the answer's encoding (not FDs, which travel beside it)
// to b.
// An Error that would make it longer than MaxPacket (a start error that
// quotes a huge argv[0], say) is cut to fit, as a status frame's is: the
// caller would refuse the whole answer, and the reason with it.
func (a *Answer) Append(b []byte) []byte {
	if over := a.size() - MaxPacket; over > 0 {
		c := *a
		c.Error = shorten(c.Error, over)
		a = &c
	}
	b = wire.AppendUint(wire.AppendTag(slices.Grow(b, a.size()), tagAnswer), a.ID)
	b = wire.AppendBool(wire.AppendBool(b, a.Started), a.Exited)
	b = wire.AppendInt(wire.AppendInt(b, a.Status), a.Signal)
	b = wire.AppendInt(wire.AppendString(b, a.Error), a.Code)
	b = fsreport.AppendDenied(appendUnreachable(b, a.Unreachable), a.Files)
	return wire.AppendString(b, a.FilesUnavailable)
}

// size is the length of the answer's encoding.
func (a *Answer) size() int {
	return 1 + 6*8 + 2 + len(a.Error) + unreachableSize(a.Unreachable) +
		fsreport.EncodedSize(a.Files) + len(a.FilesUnavailable)
}

// Decode sets a to the answer b encodes, all of b; FDs is left unset.
func (a *Answer) Decode(b []byte) error {
	d := wire.NewDecoder(b)
	d.Tag(tagAnswer)
	*a = Answer{ID: d.ReadUint()}
	a.Started, a.Exited = d.ReadBool(), d.ReadBool()
	a.Status, a.Signal = d.ReadInt(), d.ReadInt()
	a.Error, a.Code = d.ReadString(), d.ReadInt()
	a.Unreachable, a.Files = readUnreachable(d), fsreport.ReadDenied(d)
	a.FilesUnavailable = d.ReadString()
	return d.End()
}

// appendUnreachable appends us to b: the list a lone run's status
// message and a session's answer share.
func appendUnreachable(b []byte, us []Unreachable) []byte {
	return wire.AppendList(b, us, func(b []byte, u Unreachable) []byte {
		b = wire.AppendUint(wire.AppendString(b, u.Addr), uint64(u.Port))
		return wire.AppendString(wire.AppendInt(b, u.Count), u.Reason)
	})
}

// unreachableSize is what appendUnreachable takes for us.
func unreachableSize(us []Unreachable) int {
	n := 8
	for _, u := range us {
		n += minUnreachable + len(u.Addr) + len(u.Reason)
	}
	return n
}

// readUnreachable reads what appendUnreachable wrote; an empty list
// reads as nil.
func readUnreachable(d *wire.Decoder) []Unreachable {
	return wire.ReadList(d, minUnreachable, func(d *wire.Decoder) Unreachable {
		u := Unreachable{Addr: d.ReadString()}
		port := d.ReadUint()
		if port > 0xffff {
			d.Fail("port")
		}
		u.Port, u.Count, u.Reason = uint16(port), d.ReadInt(), d.ReadString()
		return u
	})
}

// MaxMessage bounds a status message's encoding: a lone run's exit
// carries at most maxFilesMessage bytes of file refusals (package
// stage), and a failure's text is cut to fit (AppendFrame).
const MaxMessage = 4 << 20

// frameHead is the length that begins a status frame.
const frameHead = 8

// AppendFrame appends the message's frame to b: the status pipe is a
// stream, so each message is its encoding's length, then the encoding.
// An Error that would make it longer than MaxMessage is cut to fit.
func (m *Message) AppendFrame(b []byte) []byte {
	if over := m.size() - MaxMessage; over > 0 {
		c := *m
		c.Error = shorten(c.Error, over)
		m = &c
	}
	n := m.size()
	b = wire.AppendUint(slices.Grow(b, frameHead+n), uint64(n))
	b = wire.AppendTag(b, tagMessage)
	b = wire.AppendInt(wire.AppendString(b, m.Error), m.Code)
	b = wire.AppendBool(wire.AppendBool(wire.AppendBool(b, m.Started), m.StdinReopened), m.Exited)
	b = wire.AppendInt(wire.AppendInt(b, m.Status), m.Signal)
	b = fsreport.AppendDenied(appendUnreachable(b, m.Unreachable), m.Files)
	return wire.AppendBool(wire.AppendString(b, m.FilesUnavailable), m.NoUserns)
}

// cut ends a text cut short.
const cut = "…"

// shorten cuts at least over bytes off s, at a rune's start so that the
// text stays UTF-8, and marks the cut.
func shorten(s string, over int) string {
	n := max(len(s)-over-len(cut), 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + cut
}

// size is the length of the message's encoding, its frame's head aside.
func (m *Message) size() int {
	return 1 + 5*8 + 4 + len(m.Error) + unreachableSize(m.Unreachable) +
		fsreport.EncodedSize(m.Files) + len(m.FilesUnavailable)
}

// Decode sets m to the message b encodes (a frame's body), all of b.
func (m *Message) Decode(b []byte) error {
	d := wire.NewDecoder(b)
	d.Tag(tagMessage)
	*m = Message{Error: d.ReadString(), Code: d.ReadInt()}
	m.Started, m.StdinReopened, m.Exited = d.ReadBool(), d.ReadBool(), d.ReadBool()
	m.Status, m.Signal = d.ReadInt(), d.ReadInt()
	m.Unreachable, m.Files = readUnreachable(d), fsreport.ReadDenied(d)
	m.FilesUnavailable, m.NoUserns = d.ReadString(), d.ReadBool()
	return d.End()
}

// ReadMessage reads the next frame of the status pipe r. It returns
// io.EOF alone when r ends before the frame does begin (the stage said
// nothing more), and an error wrapping io.ErrUnexpectedEOF when it ends
// inside one (the stage died writing it).
func ReadMessage(r io.Reader) (Message, error) {
	var m Message
	var head [frameHead]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return m, fmt.Errorf("status frame cut in its length: %w", err)
		}
		return m, err
	}
	d := wire.NewDecoder(head[:])
	n := d.ReadUint()
	if n > MaxMessage {
		return m, fmt.Errorf("status frame of %d bytes, over %d", n, MaxMessage)
	}
	b := make([]byte, n)
	if k, err := io.ReadFull(r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return m, fmt.Errorf("status frame cut after %d of %d bytes: %w", k, n, err)
	}
	err := m.Decode(b)
	return m, err
}

// Encode is the spec's encoding for the init stage's spec pipe: Argv and
// Env by package wire, byte for byte, then the rest as JSON. The rest is
// one large message sent once per sandbox, where JSON's cost does not
// show and its field names keep the struct easy to grow; Argv and Env
// are the only strings of it that may be other than UTF-8 (see NonUTF8),
// which JSON would change.
func (s *Spec) Encode() ([]byte, error) {
	b := wire.AppendStrings(wire.AppendStrings(nil, s.Command.Argv), s.Command.Env)
	rest, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return append(b, rest...), nil
}

// DecodeSpec is the inverse of Encode.
func DecodeSpec(b []byte) (*Spec, error) {
	d := wire.NewDecoder(b)
	argv, env := d.ReadStrings(), d.ReadStrings()
	if err := d.Err(); err != nil {
		return nil, err
	}
	var s Spec
	if err := json.Unmarshal(d.Rest(), &s); err != nil {
		return nil, err
	}
	s.Command.Argv, s.Command.Env = argv, env
	return &s, nil
}
