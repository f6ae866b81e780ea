//go:build linux

package linux

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// degraded runs agentbox inside a fresh user namespace whose
// user.max_user_namespaces is 0, so agentbox cannot create the namespaces
// it builds the sandbox in, without touching the host's settings.
func degraded(t *testing.T, fx *fixture, extra []string, script string) result {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatalf("unshare(1) is needed to test the fallback: %v", err)
	}
	args := []string{"-Ur", "sh", "-c", `echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" "$@"`, binPath, "run", "-C", fx.ws}
	args = append(args, extra...)
	args = append(args, "--", "/bin/sh", "-c", script)
	return host(t, fx.u, runOpts{env: fx.env(), dir: fx.ws}, "unshare", args...)
}

// TestDegradedRefusedWithoutOptIn: without user namespaces agentbox names
// the reason and every missing guarantee, and runs nothing.
func TestDegradedRefusedWithoutOptIn(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		r := degraded(t, fx, nil, `echo ran > "$WS/ran.txt"`)
		if r.code != 125 {
			t.Errorf("exit %d, want 125: %v", r.code, r)
		}
		for _, want := range []string{"user.max_user_namespaces is 0", "protected paths", "--allow-degraded", "no network namespace", "no pid namespace"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("refusal does not mention %q: %q", want, r.stderr)
			}
		}
		assertAbsent(t, filepath.Join(fx.ws, "ran.txt"))
	})
}

// TestDegradedGuarantees: with --allow-degraded, Landlock and seccomp
// still confine writes and the network, say what is not enforced, and the
// whole tree still dies with the command.
func TestDegradedGuarantees(t *testing.T) {
	needPython(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		tok := sleepToken()
		script := `echo in > "$WS/in.txt"
echo out > "$OUT/out.txt"
echo home > "$HOME/home.txt"
echo x >> "$OUT/file.txt"
ln "$OUT/file.txt" "$WS/hl2" && echo x >> "$WS/hl2"
python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0))' 2>/dev/null && echo inet-allowed
(setsid sleep ` + tok + ` &)
nohup sleep ` + tok + ` >/dev/null 2>&1 &
echo done`
		r := degraded(t, fx, []string{"--allow-degraded"}, script)
		if r.code != 0 || !strings.Contains(r.stdout, "done") {
			t.Fatalf("degraded run failed: %v", r)
		}
		if !strings.Contains(r.stderr, "running degraded") || !strings.Contains(r.stderr, "protected paths") {
			t.Errorf("degraded run does not say what is missing: %q", r.stderr)
		}
		assertContent(t, filepath.Join(fx.ws, "in.txt"), "in\n")
		assertAbsent(t, filepath.Join(fx.out, "out.txt"))
		assertAbsent(t, filepath.Join(fx.home, "home.txt"))
		assertContent(t, filepath.Join(fx.out, "file.txt"), fx.txt)
		if strings.Contains(r.stdout, "inet-allowed") {
			t.Error("offline degraded run could create an AF_INET socket")
		}
		if left := procsWith(tok); len(left) > 0 {
			t.Errorf("host: processes outlived the degraded run: %v", left)
			killPids(left)
		}
	})
}
