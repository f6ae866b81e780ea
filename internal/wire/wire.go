// Package wire is agentbox's light binary codec, on every hop between its
// processes: integers as 8 bytes big-endian (signed ones two's
// complement), booleans and message tags as one byte, strings as their
// length then their bytes, lists as their count then their items.
// Strings travel byte for byte, valid UTF-8 or not, and nothing here
// needs reflection: a program that links only this (the resident helper's
// lean client, a session command's pid 1, a re-executed stage) starts
// before most of agentbox's packages are initialised.
//
// A Decoder never panics on malformed input: the first malformation is
// its error, and every read after it returns zero values.
package wire

import (
	"errors"
	"strconv"
)

// AppendUint appends v.
func AppendUint(b []byte, v uint64) []byte {
	for i := 7; i >= 0; i-- {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

// AppendInt appends v.
func AppendInt(b []byte, v int) []byte { return AppendUint(b, uint64(int64(v))) }

// AppendBool appends v.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// AppendTag begins a message with its tag, which names what the message
// is: read by the wrong reader it fails at once (see [Decoder.Tag]).
func AppendTag(b []byte, tag byte) []byte { return append(b, tag) }

// AppendString appends s, its length first.
func AppendString(b []byte, s string) []byte {
	return append(AppendUint(b, uint64(len(s))), s...)
}

// AppendStrings appends ss, its count first.
func AppendStrings(b []byte, ss []string) []byte { return AppendList(b, ss, AppendString) }

// AppendList appends xs: their count, then each as item appends it.
func AppendList[T any](b []byte, xs []T, item func([]byte, T) []byte) []byte {
	b = AppendUint(b, uint64(len(xs)))
	for _, x := range xs {
		b = item(b, x)
	}
	return b
}

// Decoder reads what the Append functions wrote, in the same order.
type Decoder struct {
	b   []byte
	err error
}

// NewDecoder reads b.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// Err is the first malformation met, nil if none.
func (d *Decoder) Err() error { return d.err }

// Fail records why the input is malformed (the first reason stays) and
// drops the rest of it.
func (d *Decoder) Fail(why string) {
	if d.err == nil {
		d.err = errors.New("malformed message: " + why)
	}
	d.b = nil
}

// End is Err, or an error when bytes are left over: a message is read
// whole or not at all.
func (d *Decoder) End() error {
	if d.err == nil && len(d.b) != 0 {
		d.Fail(strconv.Itoa(len(d.b)) + " trailing bytes")
	}
	return d.err
}

// Rest returns what is left unread, and consumes it.
func (d *Decoder) Rest() []byte {
	b := d.b
	d.b = nil
	return b
}

// ReadUint reads an unsigned integer.
func (d *Decoder) ReadUint() uint64 {
	if len(d.b) < 8 {
		d.Fail("short")
		return 0
	}
	var v uint64
	for _, c := range d.b[:8] {
		v = v<<8 | uint64(c)
	}
	d.b = d.b[8:]
	return v
}

// ReadInt reads a signed integer.
func (d *Decoder) ReadInt() int {
	v := int64(d.ReadUint())
	if int64(int(v)) != v {
		d.Fail("integer " + strconv.FormatInt(v, 10))
		return 0
	}
	return int(v)
}

// ReadBool reads a boolean: a byte other than 0 or 1 is malformed.
func (d *Decoder) ReadBool() bool {
	switch d.readByte() {
	case 1:
		return true
	case 0:
		return false
	}
	d.Fail("boolean")
	return false
}

// Tag reads a message's tag, a malformation unless it is want.
func (d *Decoder) Tag(want byte) {
	if d.err != nil {
		return
	}
	if got := d.readByte(); d.err == nil && got != want {
		d.Fail("tag " + strconv.Itoa(int(got)) + ", not " + strconv.Itoa(int(want)))
	}
}

// readByte reads one byte; short input reads as 0xff, which no caller
// accepts, once it has failed the decoder.
func (d *Decoder) readByte() byte {
	if len(d.b) < 1 {
		d.Fail("short")
		return 0xff
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// ReadCount reads a count of items of at least min bytes each, refused when
// what is left cannot hold that many: nothing is allocated for a count
// the input does not back.
func (d *Decoder) ReadCount(min int) int {
	n := d.ReadUint()
	if n > uint64(len(d.b)/min) {
		d.Fail("count " + strconv.FormatUint(n, 10))
		return 0
	}
	return int(n)
}

// ReadString reads a string.
func (d *Decoder) ReadString() string {
	n := d.ReadUint()
	if n > uint64(len(d.b)) {
		d.Fail("length " + strconv.FormatUint(n, 10))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// ReadStrings reads a list of strings.
// ReadList reads what AppendList wrote, each item as item reads it. min
// is the fewest bytes an item takes, so that a count the input cannot
// hold fails before anything is allocated (see ReadCount). An empty list
// reads as nil.
func ReadList[T any](d *Decoder, min int, item func(*Decoder) T) []T {
	n := d.ReadCount(min)
	if n == 0 {
		return nil
	}
	xs := make([]T, n)
	for i := range xs {
		xs[i] = item(d)
	}
	return xs
}

func (d *Decoder) ReadStrings() []string {
	n := d.ReadCount(8)
	out := make([]string, 0, n)
	for range n {
		out = append(out, d.ReadString())
	}
	return out
}
