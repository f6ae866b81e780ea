//go:build linux

package linux

import (
	"os"
	"os/exec"
	"testing"
)

// benchRun times one full `agentbox run` of argv per iteration, as the
// current user, against a fresh workspace.
func benchRun(b *testing.B, extra []string, argv ...string) {
	needBin(b)
	ws, err := os.MkdirTemp(baseDir, "bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(ws)
	os.Mkdir(ws+"/.git", 0o755)
	args := append(append([]string{"run", "-C", ws}, extra...), "--")
	args = append(args, argv...)
	b.ResetTimer()
	for b.Loop() {
		cmd := exec.Command(binPath, args...)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("agentbox %v: %v\n%s", args, err, out)
		}
	}
}

// BenchmarkBareTrue is the baseline: /bin/true without a sandbox.
func BenchmarkBareTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunTrue: `agentbox run -- true`, network off (workspace-write).
func BenchmarkRunTrue(b *testing.B) { benchRun(b, nil, "true") }

// BenchmarkRunTrueNetwork: with --network (no network namespace).
func BenchmarkRunTrueNetwork(b *testing.B) { benchRun(b, []string{"--network"}, "true") }

// BenchmarkRunTrueReadOnly: -s read-only.
func BenchmarkRunTrueReadOnly(b *testing.B) { benchRun(b, []string{"-s", "read-only"}, "true") }

// BenchmarkRunShell: a small shell pipeline, closer to an agent's command.
func BenchmarkRunShell(b *testing.B) {
	benchRun(b, nil, "/bin/sh", "-c", "ls -la . >/dev/null && echo x | wc -c >/dev/null")
}
