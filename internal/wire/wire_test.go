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
