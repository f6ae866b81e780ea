package pid1

import (
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/wire"
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

// Every cut of a job, a job with bytes after it, without a command, or
// with a NUL byte is refused.
func TestDecodeJobMalformed(t *testing.T) {
	good, err := (&Job{Path: "/bin/sh", Dir: "/ws", Argv: []string{"sh"}, Env: []string{"A=1"}}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	bad := []string{string(good) + "x"}
	for n := range len(good) {
		bad = append(bad, string(good[:n]))
	}
	job := func(path string, argv ...string) string {
		b := wire.AppendString(wire.AppendString(wire.AppendTag(nil, tagJob), path), "/")
		return string(wire.AppendStrings(wire.AppendStrings(b, argv), nil))
	}
	bad = append(bad, job("/bin/sh"), job("/bin/sh", "sh", "a\x00b"), job("/bin/s\x00h", "sh"))
	for _, b := range bad {
		if j, err := decodeJob([]byte(b)); err == nil {
			t.Errorf("%q decoded as %+v", b, j)
		}
	}
}
