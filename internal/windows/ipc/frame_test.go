package ipc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	spawn := Spawn{Path: `C:\Windows\System32\cmd.exe`, Args: []string{"cmd", "/c", "echo hi"}, Dir: `C:\w`, Env: []string{"A=1"}, SIDs: []string{"S-1-5-21-1-2-3-4"}, StdinOpen: true}
	if err := Send(&buf, TypeSpawn, spawn); err != nil {
		t.Fatal(err)
	}
	if err := Send(&buf, TypeStdout, Data{B: []byte{0, 1, 2, 0xff}}); err != nil {
		t.Fatal(err)
	}
	if err := Send(&buf, TypeCloseStdin, nil); err != nil {
		t.Fatal(err)
	}
	// The prefix is the little-endian length of the JSON body that follows.
	n := binary.LittleEndian.Uint32(buf.Bytes())
	if body := buf.Bytes()[4 : 4+n]; body[0] != '{' || body[n-1] != '}' {
		t.Fatalf("length %d does not frame one JSON object: %q", n, body)
	}

	f, err := ReadFrame(&buf)
	if err != nil || f.Type != TypeSpawn {
		t.Fatalf("ReadFrame = %+v, %v", f, err)
	}
	var gotSpawn Spawn
	if err := f.Decode(&gotSpawn); err != nil || !reflect.DeepEqual(gotSpawn, spawn) {
		t.Fatalf("spawn = %+v, %v", gotSpawn, err)
	}
	f, err = ReadFrame(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var d Data
	if err := f.Decode(&d); err != nil || !bytes.Equal(d.B, []byte{0, 1, 2, 0xff}) {
		t.Fatalf("data = %v, %v", d.B, err)
	}
	f, err = ReadFrame(&buf)
	if err != nil || f.Type != TypeCloseStdin || len(f.Payload) != 0 {
		t.Fatalf("close_stdin = %+v, %v", f, err)
	}
	if _, err := ReadFrame(&buf); err != io.EOF {
		t.Fatalf("at end: %v, want io.EOF", err)
	}
}

func frame(body string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(body)))
	return append(b, body...)
}

func TestReadFrameRejects(t *testing.T) {
	huge := binary.LittleEndian.AppendUint32(nil, MaxFrame+1)
	for name, tc := range map[string]struct {
		in   []byte
		want string
	}{
		"too large":     {huge, "too large"},
		"truncated":     {frame(`{"version":1,"type":"exit"}`)[:10], "unexpected EOF"},
		"short header":  {[]byte{1, 0}, "unexpected EOF"},
		"bad version":   {frame(`{"version":2,"type":"exit"}`), "version 2"},
		"unknown type":  {frame(`{"version":1,"type":"rm -rf"}`), "unknown frame type"},
		"unknown field": {frame(`{"version":1,"type":"exit","x":1}`), "unknown field"},
		"trailing":      {frame(`{"version":1,"type":"exit"}{}`), "trailing"},
		"not json":      {frame(`hello`), "bad frame"},
	} {
		_, err := ReadFrame(bytes.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
	_, err := ReadFrame(bytes.NewReader(huge))
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("too large: %v does not wrap ErrFrameTooLarge", err)
	}
}

func TestWriteFrameCap(t *testing.T) {
	err := Send(io.Discard, TypeStdout, Data{B: make([]byte, MaxFrame)})
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err = %v, want ErrFrameTooLarge", err)
	}
	// A full chunk fits.
	if err := Send(io.Discard, TypeStdout, Data{B: make([]byte, MaxChunk)}); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeRejectsUnknownPayloadField(t *testing.T) {
	f := &Frame{Version: Version, Type: TypeExit, Payload: []byte(`{"code":1,"evil":true}`)}
	var e Exit
	if err := f.Decode(&e); err == nil {
		t.Fatal("unknown payload field accepted")
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add(frame(`{"version":1,"type":"exit","payload":{"code":3}}`))
	f.Add(frame(`{"version":1,"type":"stdin","payload":{"b":"AAEC"}}`))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		fr, err := ReadFrame(bytes.NewReader(in))
		if err != nil {
			return
		}
		// Whatever decodes must re-encode and decode to the same frame.
		var buf bytes.Buffer
		if err := WriteFrame(&buf, fr); err != nil {
			t.Fatalf("re-encoding accepted frame: %v", err)
		}
		fr2, err := ReadFrame(&buf)
		if err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
		if fr2.Type != fr.Type || fr2.Version != fr.Version {
			t.Fatalf("round trip changed frame: %+v vs %+v", fr, fr2)
		}
	})
}
