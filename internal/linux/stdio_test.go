package linux

import (
	"github.com/agentbox/agentbox/internal/linux/spec"
	"testing"
)

func TestClassifyStdio(t *testing.T) {
	mkdev := func(major, minor uint64) uint64 {
		return (major&0xfff)<<8 | (major&^0xfff)<<32 | minor&0xff | (minor&^0xff)<<12
	}
	for _, c := range []struct {
		name  string
		facts stdioFacts
		want  stdioKind
	}{
		{"anonymous pipe", stdioFacts{mode: sIFIFO, pipefs: true}, stdioPass},
		{"named FIFO", stdioFacts{mode: sIFIFO}, stdioCopy},
		{"regular file", stdioFacts{mode: 0o100000}, stdioCopy},
		{"directory", stdioFacts{mode: 0o040000}, stdioCopy},
		{"block device", stdioFacts{mode: 0o060000, rdev: mkdev(1, 3)}, stdioCopy},
		{"socketpair", stdioFacts{mode: sIFSOCK, connectedUnixStream: true}, stdioPass},
		{"other socket", stdioFacts{mode: sIFSOCK}, stdioCopy},
		{"/dev/null", stdioFacts{mode: sIFCHR, rdev: mkdev(1, 3)}, stdioPass},
		{"/dev/urandom", stdioFacts{mode: sIFCHR, rdev: mkdev(1, 9)}, stdioPass},
		{"/dev/mem", stdioFacts{mode: sIFCHR, rdev: mkdev(1, 1)}, stdioCopy},
		{"terminal", stdioFacts{mode: sIFCHR, tty: true, rdev: mkdev(136, 300)}, stdioTTY},
		{"a big device number", stdioFacts{mode: sIFCHR, rdev: mkdev(4097, 3)}, stdioCopy},
	} {
		if got := classifyStdio(c.facts); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	if got := spec.DevNumber(mkdev(136, 300)); got != [2]uint32{136, 300} {
		t.Errorf("devNumber: got %v", got)
	}
}
