//go:build linux

package linux

import (
	"strings"
	"testing"
)

// TestInitThreadsDropCapabilities: every thread of the sandbox's init
// stage (PID 1 inside), not only the one the command is forked from, has
// empty capability sets and no_new_privs once the command runs; its other
// threads (the signal forwarder, the unix socket supervisor) would
// otherwise keep CAP_SYS_ADMIN and CAP_NET_ADMIN in the sandbox's user
// namespace for the whole run. Checked with and without --network.
func TestInitThreadsDropCapabilities(t *testing.T) {
	const script = `for s in /proc/1/task/*/status; do
  echo "task $(grep -E '^(Pid|CapInh|CapPrm|CapEff|CapAmb|NoNewPrivs|Seccomp):' $s | tr -s '\t\n' '  ')"
done`
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		for _, extra := range [][]string{nil, {"--network"}} {
			// The lone run's init: a run the resident helper serves
			// forks from a session's zygote, whose threads keep their
			// capabilities by design (session_test.go covers it).
			args := append(append([]string{"run", "-C", fx.ws}, extra...), "--", "/bin/sh", "-c", script)
			r := runWith(t, u, runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0"), dir: fx.ws}, args...)
			if r.code != 0 {
				t.Fatalf("%v: %v", extra, r)
			}
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if len(lines) < 2 {
				t.Errorf("%v: expected the init to have several threads, got %q", extra, r.stdout)
			}
			for _, l := range lines {
				f := strings.Fields(l)
				kv := map[string]string{}
				for i := 1; i+1 < len(f); i += 2 {
					kv[strings.TrimSuffix(f[i], ":")] = f[i+1]
				}
				for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
					if kv[k] != "0000000000000000" {
						t.Errorf("%v: init thread %s has %s %q: %s", extra, kv["Pid"], k, kv[k], l)
					}
				}
				if kv["NoNewPrivs"] != "1" || kv["Seccomp"] != "2" {
					t.Errorf("%v: init thread %s lacks no_new_privs or seccomp: %s", extra, kv["Pid"], l)
				}
			}
		}
	})
}
