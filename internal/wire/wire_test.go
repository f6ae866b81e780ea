package wire

import (
	"reflect"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	ss := []string{"", "a=b", "\xff\x00\xfe"}
	b := AppendUint(nil, 1<<63|5)
	b = AppendString(b, "caf\xe9")
	b = AppendStrings(b, ss)
	b = append(b, "tail"...)
	d := NewDecoder(b)
	if v := d.ReadUint(); v != 1<<63|5 {
		t.Errorf("uint %d", v)
	}
	if s := d.ReadString(); s != "caf\xe9" {
		t.Errorf("string %q", s)
	}
	if got := d.ReadStrings(); !reflect.DeepEqual(got, ss) {
		t.Errorf("strings %q", got)
	}
	if r := string(d.Rest()); r != "tail" || d.End() != nil {
		t.Errorf("rest %q, end %v", r, d.End())
	}
}

// Every cut of an encoding is an error, never a panic, and a count or
// length the input does not back is refused before any allocation.
func TestMalformed(t *testing.T) {
	b := AppendStrings(AppendString(AppendUint(nil, 7), "xy"), []string{"a", "bc"})
	for n := 0; n < len(b); n++ {
		d := NewDecoder(b[:n])
		d.ReadUint()
		d.ReadString()
		d.ReadStrings()
		if d.End() == nil {
			t.Errorf("cut to %d of %d bytes: decoded", n, len(b))
		}
	}
	d := NewDecoder(append(AppendUint(nil, 1<<62), 0))
	if d.ReadStrings(); d.Err() == nil {
		t.Error("a count of 2^62 strings in one byte decoded")
	}
	d = NewDecoder(AppendUint(nil, ^uint64(0)))
	if d.ReadString(); d.Err() == nil {
		t.Error("a string of 2^64-1 bytes decoded")
	}
	d = NewDecoder(AppendUint(nil, 1))
	d.ReadUint()
	d.Fail("first")
	d.Fail("second")
	if d.ReadUint() != 0 || d.Err() == nil || d.Err().Error() != "malformed message: first" {
		t.Errorf("after a failure: %v", d.Err())
	}
	if NewDecoder([]byte{1}).End() == nil {
		t.Error("a trailing byte is not an error")
	}
}

func TestScalars(t *testing.T) {
	b := AppendTag(nil, 'Q')
	b = AppendInt(b, -2)
	b = AppendInt(b, 1<<40)
	b = AppendBool(b, true)
	b = AppendBool(b, false)
	d := NewDecoder(b)
	d.Tag('Q')
	if a, c := d.ReadInt(), d.ReadInt(); a != -2 || c != 1<<40 {
		t.Errorf("ints %d %d", a, c)
	}
	if x, y := d.ReadBool(), d.ReadBool(); !x || y {
		t.Errorf("bools %v %v", x, y)
	}
	if err := d.End(); err != nil {
		t.Error(err)
	}
	for n := 0; n < len(b); n++ {
		d := NewDecoder(b[:n])
		d.Tag('Q')
		d.ReadInt()
		d.ReadInt()
		d.ReadBool()
		d.ReadBool()
		if d.End() == nil {
			t.Errorf("cut to %d of %d bytes: decoded", n, len(b))
		}
	}
	if d := NewDecoder([]byte{2}); d.ReadBool() || d.Err() == nil {
		t.Error("a boolean of 2 decoded")
	}
	d = NewDecoder([]byte{'A'})
	if d.Tag('Q'); d.Err() == nil {
		t.Error("the wrong tag decoded")
	}
}

// FuzzDecoder: no input makes a decoder panic, and what it accepts
// encodes back to the same bytes.
func FuzzDecoder(f *testing.F) {
	f.Add(AppendStrings(AppendBool(AppendInt(AppendTag(nil, 'Q'), -1), true), []string{"a", "\xff"}))
	f.Add([]byte{'Q'})
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder(b)
		d.Tag('Q')
		i, ok, ss := d.ReadInt(), d.ReadBool(), d.ReadStrings()
		if d.End() != nil {
			return
		}
		again := AppendStrings(AppendBool(AppendInt(AppendTag(nil, 'Q'), i), ok), ss)
		if string(again) != string(b) {
			t.Errorf("%x decoded and encoded as %x", b, again)
		}
	})
}

// TestList: a list round-trips, an empty one reads as nil, and a count
// the input cannot hold fails without reading an item.
func TestList(t *testing.T) {
	type pair struct {
		s string
		n int
	}
	add := func(b []byte, p pair) []byte { return AppendInt(AppendString(b, p.s), p.n) }
	calls := 0
	read := func(d *Decoder) pair { calls++; return pair{d.ReadString(), d.ReadInt()} }
	in := []pair{{"a", 1}, {"", -2}, {"\xff\x00", 3}}
	d := NewDecoder(AppendList(nil, in, add))
	if got := ReadList(d, 16, read); d.End() != nil || len(got) != 3 || got[0] != in[0] || got[1] != in[1] || got[2] != in[2] {
		t.Errorf("round trip: %v, %v", got, d.End())
	}
	d = NewDecoder(AppendList(nil, []pair(nil), add))
	if got := ReadList(d, 16, read); d.End() != nil || got != nil {
		t.Errorf("empty list: %#v, %v", got, d.End())
	}
	calls = 0
	d = NewDecoder(append(AppendUint(nil, 1<<40), make([]byte, 64)...))
	if got := ReadList(d, 16, read); d.Err() == nil || got != nil || calls != 0 {
		t.Errorf("a count of 2^40 in 72 bytes: %d items, %d reads, %v", len(got), calls, d.Err())
	}
}
