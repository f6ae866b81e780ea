package fastpath

import (
	"reflect"
	"strings"
	"testing"
)

func TestRequestRoundTrip(t *testing.T) {
	r := &Request{
		Binary: "1:2:3:4.5:6.7", StateDir: "/s/agentbox", Umask: 0o027,
		Rlimits: [][2]uint64{{1, 2}, {^uint64(0), ^uint64(0)}},
		Dir:     "/w", Executable: "/bin/agentbox",
		// Not UTF-8, with NULs and '=' inside: byte for byte.
		Args: []string{"agentbox", "run", "--", "printf", "\xff\xfe", ""},
		Env:  []string{"A=1", "B=\x00=\x80", "EMPTY="},
	}
	b := Encode(r)
	if !IsRequest(b) {
		t.Fatal("an encoded request is not recognised")
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", got, r)
	}
}

// Every truncation and every flipped byte of a request is refused or
// decoded, never a panic, and a decoded one re-encodes to the same bytes.
func TestDecodeMalformed(t *testing.T) {
	b := Encode(&Request{Binary: "id", StateDir: "/s", Rlimits: [][2]uint64{{1, 2}}, Args: []string{"a", "run", "x"}, Env: []string{"K=V"}})
	for n := 0; n < len(b); n++ {
		if _, err := Decode(b[:n]); err == nil {
			t.Errorf("a request cut to %d of %d bytes decoded", n, len(b))
		}
	}
	if _, err := Decode(append(append([]byte{}, b...), 0)); err == nil || !strings.Contains(err.Error(), "trailing") {
		t.Errorf("trailing byte: %v", err)
	}
	for i := len(magic); i < len(b); i++ {
		for _, v := range []byte{0, 0x7f, 0xff} {
			c := append([]byte{}, b...)
			c[i] = v
			r, err := Decode(c)
			if err == nil && string(Encode(r)) != string(c) {
				t.Errorf("byte %d = %#x: decoded to a request that encodes differently", i, v)
			}
		}
	}
	// A count that claims more items than bytes left is refused before
	// anything is allocated for it.
	huge := append([]byte(magic), putUint(putUint(nil, 0), 0)...)
	huge = putUint(huge, 0)     // umask
	huge = putUint(huge, 1<<40) // rlimits count
	if _, err := Decode(huge); err == nil {
		t.Error("a request with 2^40 limits decoded")
	}
	if _, err := Decode([]byte(`{"op":"run"}`)); err == nil {
		t.Error("a JSON request decoded as a fastpath one")
	}
}

func TestReplies(t *testing.T) {
	if r := parseReply(Started()); r.failed || r.kind != replyStarted {
		t.Errorf("Started: %+v", r)
	}
	if r := parseReply(Fallback("why")); r.failed || r.kind != replyFallback || r.text != "why" {
		t.Errorf("Fallback: %+v", r)
	}
	if m := Exited(130, "agentbox: x\n"); len(m) != 1 {
		t.Errorf("Exited: %d messages", len(m))
	} else if r := parseReply(m[0]); r.failed || r.kind != replyExited || r.code != 130 || r.text != "agentbox: x\n" {
		t.Errorf("Exited: %+v", r)
	}
	// Long notes: every byte, in messages that fit the client's buffer.
	long := strings.Repeat("0123456789", maxReply/4)
	var got strings.Builder
	code := -1
	for _, m := range Exited(1, long) {
		if len(m) > maxReply {
			t.Fatalf("a reply of %d bytes, over %d", len(m), maxReply)
		}
		r := parseReply(m)
		switch {
		case r.failed:
			t.Fatalf("reply %q failed", m[:1])
		case r.kind == replyText:
			got.WriteString(r.text)
		case r.kind == replyExited:
			got.WriteString(r.text)
			code = r.code
		}
	}
	if code != 1 || got.String() != long {
		t.Errorf("long Exited: code %d, %d of %d bytes", code, got.Len(), len(long))
	}
	for _, b := range [][]byte{nil, {'S', 0}, {'E', 1}, {'?'}, Exited(-1, "")[0], Exited(256, "")[0]} {
		if r := parseReply(b); !r.failed {
			t.Errorf("reply %q parsed as %+v", b, r)
		}
	}
}
