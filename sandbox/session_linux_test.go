package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestSessionBasic(t *testing.T) {
	pol, ws := testPolicy(t)
	s, err := NewSession(pol)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	out, err := s.Command(ctx, "sh", "-c", "pwd; grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status; echo $$; ls /proc/self/fd").CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), ws+"\n") {
		t.Errorf("cwd: %q", out)
	}
	start := time.Now()
	for range 20 {
		if err := s.Command(ctx, "true").Run(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("per command: %v", time.Since(start)/20)
}
