package inotify

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// record builds one inotify_event as the kernel lays it out: the name,
// its NUL and padding to a multiple of 16 bytes.
func record(wd int32, mask, cookie uint32, name string) []byte {
	n := 0
	if name != "" {
		n = (len(name) + 1 + 15) / 16 * 16
	}
	return rawRecord(wd, mask, cookie, uint32(n), []byte(name), n)
}

// rawRecord builds a header saying length lenField followed by body
// (padded with NULs, or cut, to size bytes).
func rawRecord(wd int32, mask, cookie, lenField uint32, body []byte, size int) []byte {
	b := make([]byte, headerSize+size)
	binary.NativeEndian.PutUint32(b[0:], uint32(wd))
	binary.NativeEndian.PutUint32(b[4:], mask)
	binary.NativeEndian.PutUint32(b[8:], cookie)
	binary.NativeEndian.PutUint32(b[12:], lenField)
	copy(b[headerSize:], body[:min(len(body), size)])
	return b
}

func parseAll(buf []byte) ([]Event, error) {
	var evs []Event
	err := Parse(buf, func(e Event) { evs = append(evs, e) })
	return evs, err
}

func TestParse(t *testing.T) {
	long := strings.Repeat("n", nameMax)
	var buf []byte
	buf = append(buf, record(1, 0x100, 0, "a")...)
	buf = append(buf, record(2, 0x20, 0, "")...)
	buf = append(buf, record(3, 0x40, 7, "exactly-fifteen")...) // 15+NUL: one block
	buf = append(buf, record(-1, 0x4000, 0, "")...)
	buf = append(buf, record(4, 0x80, 7, long)...)
	want := []Event{
		{Wd: 1, Mask: 0x100, Name: "a"},
		{Wd: 2, Mask: 0x20},
		{Wd: 3, Mask: 0x40, Cookie: 7, Name: "exactly-fifteen"},
		{Wd: -1, Mask: 0x4000},
		{Wd: 4, Mask: 0x80, Cookie: 7, Name: long},
	}
	got, err := parseAll(buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if len(record(4, 0, 0, long)) != MaxEventSize {
		t.Fatalf("a NAME_MAX name's record is %d bytes, MaxEventSize %d", len(record(4, 0, 0, long)), MaxEventSize)
	}
	if evs, err := parseAll(nil); err != nil || len(evs) != 0 {
		t.Fatalf("empty buffer: %v, %v", evs, err)
	}
}

func TestParseMalformed(t *testing.T) {
	good := record(1, 0x100, 0, "file")
	for _, tc := range []struct {
		name string
		buf  []byte
		// before is how many events come out ahead of the bad record.
		before int
	}{
		{"short header", good[:headerSize-1], 0},
		{"header alone, name promised", good[:headerSize], 0},
		{"name cut short", good[:len(good)-1], 0},
		{"good then short header", append(append([]byte{}, good...), good[:5]...), 1},
		{"good then cut name", append(append([]byte{}, good...), good[:headerSize+3]...), 1},
		{"name without NUL", rawRecord(1, 0, 0, 16, []byte(strings.Repeat("x", 16)), 16), 0},
		{"name longer than NAME_MAX", rawRecord(1, 0, 0, nameMax+17, []byte("x"), nameMax+17), 0},
		{"length past any buffer", rawRecord(1, 0, 0, ^uint32(0), nil, 0), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := parseAll(tc.buf)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
			if len(evs) != tc.before {
				t.Fatalf("%d events before the error, want %d", len(evs), tc.before)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add(record(1, 0x100, 0, "a"))
	f.Add(record(1, 0x100, 0, "a")[:20])
	f.Fuzz(func(t *testing.T, b []byte) {
		n := 0
		err := Parse(b, func(Event) { n++ })
		if err == nil && len(b) > 0 && n == 0 {
			t.Fatalf("%d bytes parsed to no events", len(b))
		}
	})
}
