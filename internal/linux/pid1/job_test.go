package pid1

import (
	"reflect"
	"strings"
	"testing"
)

func TestJobRoundTrip(t *testing.T) {
	for _, j := range []Job{
		{Path: "/bin/sh", Dir: "/ws", Argv: []string{"sh", "-c", "echo $$"}, Env: []string{"A=1", "B="}},
		{Path: "/bin/true", Argv: []string{"true"}, Env: []string{}},
		{Path: "/x", Dir: "/", Argv: []string{"", "", "3"}, Env: []string{"=odd", ""}},
	} {
		b, err := j.Encode()
		if err != nil {
			t.Fatalf("%+v: %v", j, err)
		}
		got, err := decodeJob(b)
		if err != nil {
			t.Fatalf("%+v: decode: %v", j, err)
		}
		if !reflect.DeepEqual(*got, j) {
			t.Errorf("round trip: got %+v, want %+v", *got, j)
		}
	}
}

func TestJobRefusesNUL(t *testing.T) {
	for _, j := range []Job{
		{Path: "/bin/sh", Argv: []string{"sh", "a\x00b"}},
		{Path: "/bin/sh", Argv: []string{"sh"}, Env: []string{"A=1\x00B=2"}},
		{Path: "/bin/s\x00h", Argv: []string{"sh"}},
		{Path: "/bin/sh"},
	} {
		if _, err := j.Encode(); err == nil {
			t.Errorf("%q encoded", j)
		}
	}
	if _, err := (&Job{Path: "/x", Argv: []string{strings.Repeat("a", MaxJob)}}).Encode(); err == nil {
		t.Error("a job over MaxJob encoded")
	}
}

func TestDecodeJobMalformed(t *testing.T) {
	for _, b := range []string{"", "x", "/p\x00/d\x00", "/p\x00/d\x000\x00sh\x00", "/p\x00/d\x003\x00sh\x00", "/p\x00/d\x00x\x00sh\x00", "/p\x00/d\x001\x00sh"} {
		if j, err := decodeJob([]byte(b)); err == nil {
			t.Errorf("%q decoded as %+v", b, j)
		}
	}
}
