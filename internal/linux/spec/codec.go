package spec

import (
	"encoding/json"
	"slices"

	"github.com/agentbox/agentbox/internal/fsreport"
	"github.com/agentbox/agentbox/internal/wire"
)

// The tags of the session's messages (package wire): a message read by
// the wrong reader fails instead of decoding as another.
const (
	tagRequest = 'Q'
	tagAnswer  = 'A'
)

// The fewest bytes an encoded item of a list takes, by which a decoder
// refuses a count the input cannot hold (wire.Decoder.ReadCount).
const (
	minHide        = 8 + 1 + 8 + 8
	minUnreachable = 8 + 8 + 8 + 8
	minDenied      = 8 + 8 + 8 + 8
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
	b = wire.AppendUint(b, uint64(len(hs)))
	for _, h := range hs {
		b = wire.AppendString(b, h.Path)
		b = wire.AppendBool(b, h.Dir)
		b = wire.AppendStrings(b, h.Reopen)
		b = wire.AppendStrings(b, h.Pins)
	}
	return b
}

// ReadHides reads what AppendHides wrote.
func ReadHides(d *wire.Decoder) []Hide {
	n := d.ReadCount(minHide)
	if n == 0 {
		return nil
	}
	hs := make([]Hide, n)
	for i := range hs {
		hs[i] = Hide{Path: d.ReadString(), Dir: d.ReadBool(), Reopen: d.ReadStrings(), Pins: d.ReadStrings()}
	}
	return hs
}

// Append appends the answer's encoding (not FDs, which travel beside it)
// to b.
func (a *Answer) Append(b []byte) []byte {
	b = wire.AppendUint(wire.AppendTag(slices.Grow(b, a.size()), tagAnswer), a.ID)
	b = wire.AppendBool(wire.AppendBool(b, a.Started), a.Exited)
	b = wire.AppendInt(wire.AppendInt(b, a.Status), a.Signal)
	b = wire.AppendInt(wire.AppendString(b, a.Error), a.Code)
	b = wire.AppendUint(b, uint64(len(a.Unreachable)))
	for _, u := range a.Unreachable {
		b = wire.AppendUint(wire.AppendString(b, u.Addr), uint64(u.Port))
		b = wire.AppendString(wire.AppendInt(b, u.Count), u.Reason)
	}
	b = wire.AppendUint(b, uint64(len(a.Files)))
	for _, f := range a.Files {
		b = wire.AppendString(wire.AppendString(b, f.Op), f.Path)
		b = wire.AppendInt(wire.AppendString(b, f.Reason), f.Count)
	}
	return wire.AppendString(b, a.FilesUnavailable)
}

// size is the length of the answer's encoding.
func (a *Answer) size() int {
	n := 1 + 8*8 + 2 + len(a.Error) + len(a.FilesUnavailable)
	for _, u := range a.Unreachable {
		n += minUnreachable + len(u.Addr) + len(u.Reason)
	}
	for _, f := range a.Files {
		n += minDenied + len(f.Op) + len(f.Path) + len(f.Reason)
	}
	return n
}

// Decode sets a to the answer b encodes, all of b; FDs is left unset.
func (a *Answer) Decode(b []byte) error {
	d := wire.NewDecoder(b)
	d.Tag(tagAnswer)
	*a = Answer{ID: d.ReadUint()}
	a.Started, a.Exited = d.ReadBool(), d.ReadBool()
	a.Status, a.Signal = d.ReadInt(), d.ReadInt()
	a.Error, a.Code = d.ReadString(), d.ReadInt()
	if n := d.ReadCount(minUnreachable); n > 0 {
		a.Unreachable = make([]Unreachable, n)
		for i := range a.Unreachable {
			u := &a.Unreachable[i]
			u.Addr = d.ReadString()
			port := d.ReadUint()
			if port > 0xffff {
				d.Fail("port")
			}
			u.Port = uint16(port)
			u.Count = d.ReadInt()
			u.Reason = d.ReadString()
		}
	}
	if n := d.ReadCount(minDenied); n > 0 {
		a.Files = make([]fsreport.Denied, n)
		for i := range a.Files {
			a.Files[i] = fsreport.Denied{Op: d.ReadString(), Path: d.ReadString(), Reason: d.ReadString(), Count: d.ReadInt()}
		}
	}
	a.FilesUnavailable = d.ReadString()
	return d.End()
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
