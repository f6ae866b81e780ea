package proto

import (
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/wire"
)

func sample() []*Message {
	return []*Message{
		{Kind: KindRun, Run: &Run{
			Binary: "1:2:3:4.5:6.7", StateDir: "/s/agentbox", Umask: 0o027,
			Rlimits: [][2]uint64{{1, 2}, {^uint64(0), ^uint64(0)}},
			Dir:     "/w", Executable: "/bin/agentbox",
			// Not UTF-8, with NULs and '=' inside: byte for byte.
			Args: []string{"agentbox", "run", "--", "printf", "\xff\xfe", ""},
			Env:  []string{"A=1", "B=\x00=\x80", "EMPTY="},
		}},
		{Kind: KindReport},
		{Kind: KindSignal, Code: 15},
		{Kind: KindStopIdle},
		{Kind: KindStarted},
		{Kind: KindFallback, Text: "why"},
		{Kind: KindOpenReport, Text: "r.json"},
		{Kind: KindText, Text: "agentbox: \xff\n"},
		{Kind: KindExited, Code: 130, Text: "agentbox: x\n"},
		{Kind: KindStopped},
		{Kind: KindBusy, Busy: 2, Closed: 1},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range sample() {
		got, err := Unmarshal(m.Marshal(), Fds(m.Kind))
		if err != nil {
			t.Errorf("%c: %v", m.Kind, err)
			continue
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%c: round trip\n got %#v\nwant %#v", m.Kind, got, m)
		}
	}
}

// Every truncation, every flipped byte, a byte too many and the wrong
// number of descriptors are refused or decoded, never a panic; a decoded
// message re-encodes to the same bytes.
func TestMalformed(t *testing.T) {
	for _, m := range sample() {
		b := m.Marshal()
		fds := Fds(m.Kind)
		for n := 0; n < len(b); n++ {
			if got, err := Unmarshal(b[:n], fds); err == nil && string(got.Marshal()) != string(b[:n]) {
				t.Errorf("%c cut to %d of %d bytes: decoded to %#v", m.Kind, n, len(b), got)
			}
		}
		if m.Kind == KindRun || m.Kind == KindSignal || m.Kind == KindBusy {
			// Fixed fields: any cut is refused.
			for n := 0; n < len(b); n++ {
				if _, err := Unmarshal(b[:n], fds); err == nil {
					t.Errorf("%c cut to %d of %d bytes: decoded", m.Kind, n, len(b))
				}
			}
		}
		if m.Kind != KindFallback && m.Kind != KindOpenReport && m.Kind != KindText && m.Kind != KindExited {
			if _, err := Unmarshal(append(append([]byte{}, b...), 0), fds); err == nil || !strings.Contains(err.Error(), "trailing") {
				t.Errorf("%c with a trailing byte: %v", m.Kind, err)
			}
		}
		for _, n := range []int{0, 1, 2, 3, 4, 253} {
			if n == fds {
				continue
			}
			if _, err := Unmarshal(b, n); err == nil {
				t.Errorf("%c with %d descriptors (want %d): decoded", m.Kind, n, fds)
			}
		}
		for i := 0; i < len(b); i++ {
			for _, v := range []byte{0, 0x7f, 0xff} {
				c := append([]byte{}, b...)
				c[i] = v
				got, err := Unmarshal(c, fds)
				if err == nil && string(got.Marshal()) != string(c) {
					t.Errorf("%c, byte %d = %#x: decoded to a message that encodes differently", m.Kind, i, v)
				}
			}
		}
	}
	for tag := 0; tag < 256; tag++ {
		k := Kind(tag)
		if strings.ContainsRune("RPGISFOTEXB", rune(tag)) {
			continue
		}
		if _, err := Unmarshal([]byte{byte(k)}, 0); err == nil {
			t.Errorf("unknown tag %#x decoded", tag)
		}
	}
	huge := wire.AppendUint(wire.AppendString(wire.AppendString([]byte{byte(KindRun)}, "id"), "/s"), 0)
	huge = wire.AppendUint(huge, 1<<40) // a count of limits
	for _, b := range [][]byte{
		nil,
		huge,
		// A string length of 2^64-1.
		wire.AppendUint([]byte{byte(KindRun)}, ^uint64(0)),
		// Out of range.
		wire.AppendUint([]byte{byte(KindSignal)}, 0),
		wire.AppendUint([]byte{byte(KindSignal)}, 65),
		wire.AppendUint([]byte{byte(KindExited)}, 256),
		wire.AppendUint(wire.AppendUint([]byte{byte(KindBusy)}, 1<<40), 0),
		// The helper's JSON requests of old.
		[]byte(`{"op":"run"}`),
		make([]byte, MaxMessage+1),
	} {
		if m, err := Unmarshal(b, Fds(KindRun)); err == nil {
			t.Errorf("%q decoded as %#v", b[:min(len(b), 32)], m)
		}
		if m, err := Unmarshal(b, 0); err == nil {
			t.Errorf("%q decoded as %#v", b[:min(len(b), 32)], m)
		}
	}
}

func TestExited(t *testing.T) {
	if m := Exited(130, "agentbox: x\n"); len(m) != 1 || m[0].Kind != KindExited || m[0].Code != 130 {
		t.Errorf("Exited: %+v", m)
	}
	// Long notes: every byte, in messages that fit the client's buffer.
	long := strings.Repeat("0123456789", MaxReply/4)
	var got strings.Builder
	code := -1
	for _, m := range Exited(1, long) {
		b := m.Marshal()
		if len(b) > MaxReply {
			t.Fatalf("a reply of %d bytes, over %d", len(b), MaxReply)
		}
		r, err := Unmarshal(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		got.WriteString(r.Text)
		if r.Kind == KindExited {
			code = r.Code
		}
	}
	if code != 1 || got.String() != long {
		t.Errorf("long Exited: code %d, %d of %d bytes", code, got.Len(), len(long))
	}
}
