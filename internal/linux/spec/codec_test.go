package spec

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

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
	testMessage = Message{Error: "e\xff", Code: 126, Started: true, StdinReopened: true, Exited: true, Status: 3, Signal: -2,
		Unreachable: testAnswer.Unreachable, Files: testAnswer.Files, FilesUnavailable: "u", NoUserns: true}
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

func TestMessageRoundTrip(t *testing.T) {
	for _, m := range []Message{testMessage, {Started: true}, {Exited: true, Signal: 9}} {
		got, err := ReadMessage(bytes.NewReader(m.AppendFrame(nil)))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("round trip: got %+v, want %+v", got, m)
		}
	}
}

// A status pipe carries frames one after the other; its end between two
// is io.EOF, inside one (the stage died writing it) io.ErrUnexpectedEOF,
// and a frame that is malformed or too long is refused before its body
// is read.
func TestStatusStream(t *testing.T) {
	first, second := Message{Started: true}, Message{Exited: true, Status: 1}
	stream := second.AppendFrame(first.AppendFrame(nil))
	r := bytes.NewReader(stream)
	if m, err := ReadMessage(r); err != nil || !m.Started {
		t.Fatalf("first: %+v, %v", m, err)
	}
	if m, err := ReadMessage(r); err != nil || !m.Exited || m.Status != 1 {
		t.Fatalf("second: %+v, %v", m, err)
	}
	if _, err := ReadMessage(r); err != io.EOF {
		t.Errorf("at the end: %v, want io.EOF", err)
	}
	one := testMessage.AppendFrame(nil)
	for n := 1; n < len(one); n++ {
		if _, err := ReadMessage(bytes.NewReader(one[:n])); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut to %d of %d bytes: %v", n, len(one), err)
		}
	}
	long := wire.AppendUint(nil, MaxMessage+1)
	if _, err := ReadMessage(io.MultiReader(bytes.NewReader(long), neverRead{t})); err == nil {
		t.Error("a frame over MaxMessage read")
	}
	trailing := wire.AppendUint(nil, uint64(len(one)-frameHead+1))
	trailing = append(append(trailing, one[frameHead:]...), 0)
	if _, err := ReadMessage(bytes.NewReader(trailing)); err == nil {
		t.Error("a frame with a trailing byte read")
	}
	ans := testAnswer.Append(nil)
	if _, err := ReadMessage(bytes.NewReader(append(wire.AppendUint(nil, uint64(len(ans))), ans...))); err == nil {
		t.Error("an answer read as a status message")
	}
}

// neverRead fails the test if anything reads it.
type neverRead struct{ t *testing.T }

func (n neverRead) Read([]byte) (int, error) {
	n.t.Error("read past an oversized frame's length")
	return 0, io.EOF
}

// A failure's text too long for a frame is cut to fit, not lost.
func TestFrameCutsLongError(t *testing.T) {
	m := Message{Error: strings.Repeat("x", MaxMessage), Code: 125}
	b := m.AppendFrame(nil)
	if len(b) != frameHead+MaxMessage {
		t.Errorf("frame of %d bytes, want %d", len(b), frameHead+MaxMessage)
	}
	got, err := ReadMessage(bytes.NewReader(b))
	if err != nil || got.Code != 125 || !strings.HasSuffix(got.Error, cut) || !strings.HasPrefix(got.Error, "xxx") {
		t.Errorf("got %.20q…, %v", got.Error, err)
	}
	if len(m.Error) != MaxMessage {
		t.Error("AppendFrame changed its message")
	}
}

// So is a session start error too long for one packet (it quotes
// argv[0], which may be 128 KiB), cut at a rune's start.
func TestAnswerCutsLongError(t *testing.T) {
	a := Answer{ID: 7, Error: "starting " + strings.Repeat("é", MaxPacket), Code: 126}
	b := a.Append(nil)
	if len(b) > MaxPacket {
		t.Errorf("answer of %d bytes, over %d", len(b), MaxPacket)
	}
	var got Answer
	if err := got.Decode(b); err != nil || got.ID != 7 || got.Code != 126 ||
		!strings.HasPrefix(got.Error, "starting éé") || !strings.HasSuffix(got.Error, cut) || !utf8.ValidString(got.Error) {
		t.Errorf("got %.20q… (valid UTF-8 %v), %v", got.Error, utf8.ValidString(got.Error), err)
	}
	if short := (Answer{ID: 1, Error: "no such file"}); string(short.Append(nil)) == "" {
		t.Fatal("empty encoding")
	} else if err := got.Decode(short.Append(nil)); err != nil || got.Error != "no such file" {
		t.Errorf("a short error changed: %q, %v", got.Error, err)
	}
}

// Every cut, a trailing byte, the other message's tag and a count the
// input cannot hold are refused.
func TestContractMalformed(t *testing.T) {
	req, ans, msg := testRequest.Append(nil), testAnswer.Append(nil), testMessage.AppendFrame(nil)[frameHead:]
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
	for n := range len(msg) {
		if err := new(Message).Decode(msg[:n]); err == nil {
			t.Errorf("message cut to %d of %d bytes: decoded", n, len(msg))
		}
	}
	for name, err := range map[string]error{
		"trailing message":  new(Message).Decode(append(msg, 0)),
		"answer as message": new(Message).Decode(ans),
		"message as answer": new(Answer).Decode(msg),
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
	f.Add(testMessage.AppendFrame(nil)[frameHead:])
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Request
		var a Answer
		var m Message
		if r.Decode(b) == nil && string(r.Append(nil)) != string(b) ||
			a.Decode(b) == nil && string(a.Append(nil)) != string(b) ||
			m.Decode(b) == nil && string(m.AppendFrame(nil)[frameHead:]) != string(b) {
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
	for _, m := range []Message{testMessage, {}} {
		if n, want := frameHead+m.size(), len(m.AppendFrame(nil)); n != want {
			t.Errorf("message frame size %d, encoding %d", n, want)
		}
	}
}

// FuzzStatus: no stream makes ReadMessage panic or read past a frame, and
// a frame it accepts encodes back to the same bytes.
func FuzzStatus(f *testing.F) {
	f.Add(testMessage.AppendFrame(nil))
	f.Add((&Message{Started: true}).AppendFrame(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		m, err := ReadMessage(r)
		if err != nil {
			return
		}
		if read := b[:len(b)-r.Len()]; string(m.AppendFrame(nil)) != string(read) {
			t.Errorf("%x read and encoded again differs", read)
		}
	})
}
