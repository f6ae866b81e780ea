package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The allow-list's 125 contract: conflicts and malformed patterns name the
// flag or key and the value, and --report records the failure.
func TestEgressUsageErrors(t *testing.T) {
	dir := isolate(t)
	both := filepath.Join(dir, "both.toml")
	os.WriteFile(both, []byte("[sandbox_workspace_write]\nnetwork_access = true\n[network]\nallowed_domains = [\"a.test\"]\n"), 0o644)
	badPat := filepath.Join(dir, "bad-pattern.toml")
	os.WriteFile(badPat, []byte("[network]\nallowed_domains = [\"*.\"]\n"), 0o644)
	report := filepath.Join(dir, "report.json")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"--network with --allow-domain", []string{"--network", "--allow-domain", "a.test"}, []string{"--network", "--allow-domain"}},
		{"network_access with allowed_domains", []string{"--config", both}, []string{"network_access = true in " + both, "network.allowed_domains"}},
		{"danger-full-access with --allow-domain", []string{"-s", "danger-full-access", "--allow-domain", "a.test"}, []string{"danger-full-access", "--allow-domain"}},
		{"bad pattern in config", []string{"--config", badPat}, []string{badPat, "network.allowed_domains", `"*."`}},
		{"star alone", []string{"--allow-domain", "*"}, []string{"--allow-domain", `"*"`}},
		{"double star", []string{"--allow-domain", "**.x"}, []string{"--allow-domain", `"**.x"`}},
		{"space", []string{"--allow-domain", "a .test"}, []string{"--allow-domain", "white space"}},
		{"empty", []string{"--allow-domain", ""}, []string{"--allow-domain", "empty"}},
		{"port", []string{"--allow-domain", "a.test:0"}, []string{"--allow-domain", "out of range"}},
		{"host bits", []string{"--allow-domain", "10.1.0.0/8"}, []string{"--allow-domain", "host bits"}},
		{"scheme", []string{"--allow-domain", "https://a.test"}, []string{"--allow-domain", "scheme"}},
		{"path", []string{"--allow-domain", "a.test/x"}, []string{"--allow-domain", "path"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(report)
			args := append([]string{"run", "-C", dir, "--report", report}, tc.args...)
			code, _, stderr := run(t, append(args, "--", "true")...)
			if code != 125 {
				t.Errorf("status %d, want 125 (stderr %q)", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not contain %q", stderr, w)
				}
			}
			b, err := os.ReadFile(report)
			if err != nil {
				t.Fatalf("no report: %v", err)
			}
			var rep struct {
				ExitCode int `json:"exit_code"`
				Network  struct {
					Allowed []any `json:"allowed"`
					Denied  []any `json:"denied"`
				} `json:"network"`
			}
			if err := json.Unmarshal(b, &rep); err != nil || rep.ExitCode != 125 || rep.Network.Allowed == nil || rep.Network.Denied == nil {
				t.Errorf("report %s: %+v %v", b, rep, err)
			}
		})
	}
}

func TestReportUnwritable(t *testing.T) {
	dir := isolate(t)
	code, _, stderr := run(t, "run", "-C", dir, "--report", filepath.Join(dir, "no", "such", "r.json"), "--", "true")
	if code != 125 || !strings.Contains(stderr, "--report") {
		t.Errorf("status %d, stderr %q; want 125 naming --report", code, stderr)
	}
}
