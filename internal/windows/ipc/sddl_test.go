package ipc

import (
	"strings"
	"testing"
)

func TestPipeSDDL(t *testing.T) {
	got, err := PipeSDDL("S-1-5-21-1-2-3-1001")
	if err != nil || got != "D:P(A;;GA;;;S-1-5-21-1-2-3-1001)" {
		t.Fatalf("PipeSDDL = %q, %v", got, err)
	}
	for _, bad := range []string{"", "WD", "S-1-1-0)(A;;GA;;;WD", "Everyone"} {
		if _, err := PipeSDDL(bad); err == nil {
			t.Errorf("PipeSDDL(%q) accepted", bad)
		}
	}
}

func TestPipeName(t *testing.T) {
	a, _ := PipeName()
	b, _ := PipeName()
	if a == b || !strings.HasPrefix(a, `\\.\pipe\agentbox-runner-`) || len(a) != len(`\\.\pipe\agentbox-runner-`)+32 {
		t.Fatalf("PipeName = %q, %q", a, b)
	}
}
