package resident

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/contract"
	"github.com/agentbox/agentbox/policy"
)

// resolveForClient is the helper's parse and resolution of a client's
// run, as serveRun does them.
func resolveForClient(args []string, c policy.Caller) (*clientRun, *policy.Policy, string) {
	run, why := parseRun(args)
	if run == nil {
		return nil, nil, why
	}
	pol, why := run.resolve(c)
	if pol == nil {
		return nil, nil, why
	}
	return run, pol, ""
}

// The resident helper resolves a lean client's run (package client) in
// its own process: another working directory, another environment. For
// every way the CLI's resolution reads its process (relative -C,
// --add-dir and --config, the default config under $XDG_CONFIG_HOME,
// $TMPDIR relative to the workspace, $HOME's tool caches, argv[0] found
// in PATH or relative), the helper given the client's facts must give
// exactly the policy the client's own CLI resolves, with this process
// moved into the client's directory and environment.
func TestResolveForClientAsTheCLI(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	for _, d := range []string{"ws/sub/rel", "ws/sub/tmp", "ws/rel", "ws/tmp", "add", "home/.cache/go-build", "xdg/agentbox", "bin", "state"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(base, p), []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("xdg/agentbox/config.toml", "[sandbox_workspace_write]\nwritable_roots = [\"rel\"]\n", 0o644)
	write("my.toml", "[sandbox_workspace_write]\nexclude_slash_tmp = true\n", 0o644)
	write("bin/agentbox-fake", "#!/bin/sh\n", 0o755)
	os.Mkdir(filepath.Join(ws, "tools"), 0o755)
	write("ws/tools/sh", "#!/bin/sh\n", 0o755)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"HOME":            filepath.Join(base, "home"),
		"XDG_CONFIG_HOME": filepath.Join(base, "xdg"),
		"XDG_STATE_HOME":  filepath.Join(base, "state"),
		"TMPDIR":          "tmp", // relative: to the workspace
		// A relative entry first: from the client's directory it holds
		// no agentbox-fake, from the test's it might.
		// (From "/", where the helper runs, bin/sh is there; the
		// client finds the workspace's tools/sh, which is protected.)
		"PATH": "bin:" + filepath.Join(ws, "tools") + ":" + filepath.Join(base, "bin"),
	}
	for _, args := range [][]string{
		{"run", "--", "true"},
		{"run", "-C", "sub", "--", "true"},
		{"run", "--add-dir", "../add", "--", "true"},
		{"run", "--config", "../my.toml", "--", "true"},
		{"run", "-s", "read-only", "--network", "--", "true"},
		{"run", "--allow-degraded", "--timeout", "5s", "--", "sh", "-c", "x"},
	} {
		for _, arg0 := range []string{"agentbox-fake", "sh", "../bin/agentbox-fake", filepath.Join(base, "bin", "agentbox-fake")} {
			t.Run(strings.Join(args[1:], " ")+" as "+filepath.Base(filepath.Dir(arg0))+"/"+filepath.Base(arg0), func(t *testing.T) {
				// The helper's side: this process is elsewhere, in
				// the helper's directory.
				t.Chdir("/")
				run, pol, why := resolveForClient(args, policy.Caller{
					Getenv: func(k string) string { return env[k] }, Dir: ws,
					Executable: exe, Remote: true, Arg0: arg0,
				})
				if run == nil {
					t.Fatalf("not resolved: %s", why)
				}
				got, err := pol.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}

				// The client's side: its CLI, in its directory and
				// environment.
				t.Chdir(ws)
				for _, k := range []string{"XDG_CACHE_HOME", "GOCACHE", "GOMODCACHE", "npm_config_cache", "PIP_CACHE_DIR", "CARGO_HOME"} {
					t.Setenv(k, "")
					os.Unsetenv(k)
				}
				for k, v := range env {
					t.Setenv(k, v)
				}
				old := os.Args[0]
				os.Args[0] = arg0
				defer func() { os.Args[0] = old }()
				var f contract.Flags
				cmd := &cobra.Command{Use: "run"}
				f.RegisterRun(cmd)
				if err := cmd.ParseFlags(args[1:]); err != nil {
					t.Fatal(err)
				}
				pol, err = f.Resolve(cmd, policy.Caller{})
				if err != nil {
					t.Fatal(err)
				}
				want, err := pol.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("the helper resolves another policy than the client's CLI:\nhelper %s\nclient %s", got, want)
				}
				if strings.Join(run.argv, " ") != strings.Join(cmd.Flags().Args(), " ") || run.f.Timeout != f.Timeout {
					t.Errorf("command %q timeout %v, want %q %v", run.argv, run.f.Timeout, cmd.Flags().Args(), f.Timeout)
				}
			})
		}
	}
}

// What the full CLI must handle itself is declined, before anything runs.
func TestResolveForClientDeclines(t *testing.T) {
	ws, home := t.TempDir(), t.TempDir()
	getenv := func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}
	c := policy.Caller{Getenv: getenv, Dir: ws, Executable: "/bin/true", Remote: true, Arg0: "agentbox"}
	for _, args := range [][]string{
		{"run"},
		{"run", "--help"},
		{"run", "-h"},
		{"run", "--bogus", "--", "true"},
		{"run", "--timeout", "-1s", "--", "true"},
		{"run", "-C", "no-such-dir", "--", "true"},
		{"run", "-s", "wide-open", "--", "true"},
		{"doctor"},
	} {
		if run, _, why := resolveForClient(args, c); run != nil || why == "" {
			t.Errorf("%q: accepted (%v, %q)", args, run, why)
		}
	}
	// A relative path in a variable resolution reads names a file from
	// the client's directory: the full CLI's (as is a missing directory).
	for _, kv := range [][2]string{{"GIT_CONFIG_GLOBAL", "g.cfg"}, {"HOME", "."}, {"XDG_CONFIG_HOME", "cfg"}, {"GIT_CONFIG_SYSTEM", "sys.cfg"}} {
		rel := policy.Caller{Getenv: func(k string) string {
			if k == kv[0] {
				return kv[1]
			}
			return getenv(k)
		}, Dir: ws, Executable: "/bin/true", Remote: true, Arg0: "agentbox"}
		if run, _, _ := resolveForClient([]string{"run", "--", "true"}, rel); run != nil {
			t.Errorf("%s=%s: accepted", kv[0], kv[1])
		}
	}
	if run, _, _ := resolveForClient([]string{"run", "--", "true"}, policy.Caller{Getenv: getenv, Executable: "/bin/true", Remote: true, Arg0: "agentbox"}); run != nil {
		t.Error("no directory: accepted")
	}
	off := policy.Caller{Getenv: func(k string) string {
		if k == "AGENTBOX_RESIDENT" {
			return "Off"
		}
		return getenv(k)
	}, Dir: ws, Executable: "/bin/true", Remote: true, Arg0: "agentbox"}
	if run, _, _ := resolveForClient([]string{"run", "--", "true"}, off); run != nil {
		t.Error("AGENTBOX_RESIDENT=Off: accepted")
	}
	// The control: a plain run is accepted, and its outcome is what the
	// CLI says for it.
	run, pol, why := resolveForClient([]string{"run", "--timeout", "2s", "--", "true"}, c)
	if run == nil {
		t.Fatalf("a plain run declined: %s", why)
	}
	for _, tc := range []struct {
		res    Result
		code   int
		stderr string
	}{
		{Result{}, 0, ""},
		{Result{Code: 3, Diag: "note\n"}, 3, "note\n"},
		{Result{Signal: 9}, 137, ""},
		{Result{Signal: 9, TimedOut: true}, 137, "agentbox: command timed out after 2s and was killed with everything it started\n"},
		{Result{Failed: "wait: boom"}, 125, "agentbox: wait: boom\n"},
	} {
		stderr, code := finish(pol, run.f.Timeout, &tc.res, nil)
		if code != tc.code || stderr != tc.stderr {
			t.Errorf("%+v: status %d, stderr %q; want %d, %q", tc.res, code, stderr, tc.code, tc.stderr)
		}
	}
}

// --report is the helper's to serve: parsed, with the path as typed (the
// client opens it, from its own directory).
func TestParseRunReport(t *testing.T) {
	run, why := parseRun([]string{"run", "--report", "r.json", "--", "true", "--report", "x"})
	if run == nil {
		t.Fatalf("declined: %s", why)
	}
	if run.f.Report != "r.json" || strings.Join(run.argv, " ") != "true --report x" {
		t.Errorf("report %q, argv %q", run.f.Report, run.argv)
	}
	if run, _ := parseRun([]string{"run", "--", "true"}); run == nil || run.f.Report != "" {
		t.Errorf("no --report: %+v", run)
	}
}
