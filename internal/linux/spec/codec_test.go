package spec

import (
	"reflect"
	"testing"

	"github.com/agentbox/agentbox/internal/fsreport"
	"github.com/agentbox/agentbox/internal/wire"
)

var (
	testRequest = Request{Op: "start", ID: 1<<40 | 7, Path: "/bin/caf\xe9", Argv: []string{"cat", "caf\xe9", ""},
		Env: []string{"A=\xff\xfe", "B="}, Dir: "/w", Sig: -9, Held: []string{"/w/.git"},
		Hides: []Hide{{Path: "/w/.env", Reopen: []string{"/w/.env/x"}}, {Path: "/w/s", Dir: true, Pins: []string{"/w"}}}}
	testAnswer = Answer{ID: 3, Exited: true, Status: 2, Signal: -1, Error: "e", Code: 125,
		Unreachable: []Unreachable{{Addr: "192.0.2.1", Port: 65535, Count: 2, Reason: "r"}},
		Files:       []fsreport.Denied{{Op: "write", Path: "/etc/\xff", Reason: "read-only", Count: 4}}, FilesUnavailable: "u"}
)

func TestRequestRoundTrip(t *testing.T) {
	for _, r := range []Request{testRequest, {Op: "kill", ID: 2}} {
		var got Request
		if err := got.Decode(r.Append(nil)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Append(nil), r.Append(nil)) || got.Path != r.Path || len(got.Hides) != len(r.Hides) {
			t.Errorf("round trip: got %+v, want %+v", got, r)
		}
	}
	var got Request
	got.Decode(testRequest.Append(nil))
	if !reflect.DeepEqual(got.Argv, testRequest.Argv) || !reflect.DeepEqual(got.Env, testRequest.Env) || got.Sig != -9 || !got.Hides[1].Dir {
		t.Errorf("round trip: got %+v, want %+v", got, testRequest)
	}
}

func TestAnswerRoundTrip(t *testing.T) {
	for _, a := range []Answer{testAnswer, {ID: 1, Started: true}} {
		var got Answer
		if err := got.Decode(a.Append(nil)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, a) {
			t.Errorf("round trip: got %+v, want %+v", got, a)
		}
	}
}

// Every cut, a trailing byte, the other message's tag and a count the
// input cannot hold are refused.
func TestContractMalformed(t *testing.T) {
	req, ans := testRequest.Append(nil), testAnswer.Append(nil)
	for n := range len(req) {
		if err := new(Request).Decode(req[:n]); err == nil {
			t.Errorf("request cut to %d of %d bytes: decoded", n, len(req))
		}
	}
	for n := range len(ans) {
		if err := new(Answer).Decode(ans[:n]); err == nil {
			t.Errorf("answer cut to %d of %d bytes: decoded", n, len(ans))
		}
	}
	for name, err := range map[string]error{
		"trailing request":  new(Request).Decode(append(req, 0)),
		"trailing answer":   new(Answer).Decode(append(ans, 0)),
		"answer as request": new(Request).Decode(ans),
		"request as answer": new(Answer).Decode(req),
		"huge hides count": new(Request).Decode(wire.AppendUint(
			(&Request{Op: "start"}).Append(nil)[:len((&Request{Op: "start"}).Append(nil))-8], 1<<60)),
		"port over 65535": new(Answer).Decode(append(wire.AppendUint(wire.AppendString(wire.AppendUint(
			(&Answer{}).Append(nil)[:1+8+1+1+8+8+8+8], 1), "a"), 1<<16), make([]byte, 8+8+8+8)...)),
	} {
		if err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestSpecEncoding(t *testing.T) {
	s := &Spec{Command: Command{Path: "/bin/sh", Argv: []string{"sh", "caf\xe9"}, Env: []string{"A=\xff"}, Cwd: "/w"},
		Walls: Walls{WritableRoots: []string{"/w"}}, FS: FS{Hides: []Hide{{Path: "/w/.env"}}}}
	b, err := s.Encode()
	got, derr := DecodeSpec(b)
	if err != nil || derr != nil {
		t.Fatal(err, derr)
	}
	if !reflect.DeepEqual(got, s) {
		t.Errorf("round trip: got %+v, want %+v", got, s)
	}
	for n := range 8 + 8 + 2 + 8 + 6 + 8 {
		if _, err := DecodeSpec(b[:n]); err == nil {
			t.Errorf("cut to %d bytes: decoded", n)
		}
	}
}

// FuzzContract: no input makes a decoder panic, and what one accepts
// encodes back to the same bytes.
func FuzzContract(f *testing.F) {
	f.Add(testRequest.Append(nil))
	f.Add(testAnswer.Append(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Request
		var a Answer
		if r.Decode(b) == nil && string(r.Append(nil)) != string(b) ||
			a.Decode(b) == nil && string(a.Append(nil)) != string(b) {
			t.Errorf("%x decoded and encoded again differs", b)
		}
	})
}

func BenchmarkAnswer(b *testing.B) {
	buf := make([]byte, 0, 4096)
	for b.Loop() {
		var a Answer
		if err := a.Decode(testAnswer.Append(buf[:0])); err != nil {
			b.Fatal(err)
		}
	}
}

// size, by which Append grows its buffer once, is exact.
func TestEncodingSize(t *testing.T) {
	for _, r := range []Request{testRequest, {}} {
		if n, want := r.size(), len(r.Append(nil)); n != want {
			t.Errorf("request size %d, encoding %d", n, want)
		}
	}
	for _, a := range []Answer{testAnswer, {}} {
		if n, want := a.size(), len(a.Append(nil)); n != want {
			t.Errorf("answer size %d, encoding %d", n, want)
		}
	}
}
