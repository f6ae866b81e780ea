package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// run calls Main as the binary would and returns the status and output.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// isolate points the default config at an empty directory so a developer's
// own config.toml cannot change what the tests see.
func isolate(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	// Not dir itself: a workspace that is the home (or holds it)
	// confines nothing and is refused.
	t.Setenv("HOME", t.TempDir())
	return dir
}

// The 125 contract: each mistake a user can make before anything runs is
// status 125 and a message that names what was wrong.
func TestUsageErrors(t *testing.T) {
	dir := isolate(t)
	missing := filepath.Join(dir, "no-such-dir")
	badKey := filepath.Join(dir, "bad-key.toml")
	os.WriteFile(badKey, []byte("sandbox_mode = \"read-only\"\nbogus_key = 1\n"), 0o644)
	badMode := filepath.Join(dir, "bad-mode.toml")
	os.WriteFile(badMode, []byte("sandbox_mode = \"wide-open\"\n"), 0o644)
	badType := filepath.Join(dir, "bad-type.toml")
	os.WriteFile(badType, []byte("[sandbox_workspace_write]\nnetwork_access = \"yes\"\n"), 0o644)
	emptyRoot := filepath.Join(dir, "empty-root.toml")
	os.WriteFile(emptyRoot, []byte("[sandbox_workspace_write]\nwritable_roots = [\"\"]\n"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		want []string // substrings of stderr
	}{
		{"unknown subcommand", []string{"frobnicate"}, []string{"unknown command", "agentbox help"}},
		{"unknown flag", []string{"run", "--frobnicate", "--", "true"}, []string{"unknown flag: --frobnicate"}},
		{"no command", []string{"run"}, []string{"requires at least 1 arg"}},
		{"bad mode", []string{"run", "-s", "bogus", "--", "true"}, []string{`unknown sandbox mode "bogus"`, "read-only, workspace-write or danger-full-access"}},
		{"missing -C", []string{"run", "-C", missing, "--", "true"}, []string{missing, "does not exist"}},
		{"empty -C", []string{"run", "-C", "", "--", "true"}, []string{"-C/--cd: empty path"}},
		{"empty --add-dir", []string{"run", "--add-dir", "", "--", "true"}, []string{"--add-dir: empty path"}},
		{"missing --add-dir", []string{"run", "-C", dir, "--add-dir", missing, "--", "true"}, []string{"--add-dir", missing}},
		{"empty --config", []string{"run", "--config", "", "--", "true"}, []string{"--config: empty path"}},
		{"missing --config", []string{"run", "--config", filepath.Join(dir, "nope.toml"), "--", "true"}, []string{"nope.toml"}},
		{"unknown config key", []string{"run", "--config", badKey, "--", "true"}, []string{badKey, "unknown key bogus_key"}},
		{"bad config mode", []string{"run", "--config", badMode, "--", "true"}, []string{badMode, "sandbox_mode", "wide-open"}},
		{"bad config type", []string{"run", "--config", badType, "--", "true"}, []string{badType, "network_access"}},
		{"empty writable root in config", []string{"run", "-C", dir, "--config", emptyRoot, "--", "true"}, []string{emptyRoot, "writable_roots", "empty path"}},
		{"negative timeout", []string{"run", "--timeout", "-1s", "--", "true"}, []string{"--timeout -1s is negative"}},
		{"bad timeout", []string{"run", "--timeout", "soon", "--", "true"}, []string{"--timeout", "soon"}},
		{"doctor takes no args", []string{"doctor", "extra"}, []string{"unknown command"}},
		{"doctor bad config", []string{"doctor", "--config", badKey}, []string{badKey, "bogus_key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, tc.args...)
			if code != 125 {
				t.Errorf("status %d, want 125 (stderr %q)", code, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if !strings.HasPrefix(stderr, "agentbox: ") {
				t.Errorf("stderr %q does not start with \"agentbox: \"", stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not contain %q", stderr, w)
				}
			}
		})
	}
}

// TestFlagSuggestions: an unknown flag of any subcommand gets the flag it
// is near, or the subcommand it belongs to, and still status 125.
func TestFlagSuggestions(t *testing.T) {
	isolate(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--netwrok", "--", "true"}, "unknown flag: --netwrok (did you mean --network?)"},
		{[]string{"run", "--allow-git-write", "--", "true"}, "unknown flag: --allow-git-write (did you mean --allow-git-writes?)"},
		{[]string{"mcp", "--allow-domian", "x"}, "unknown flag: --allow-domian (did you mean --allow-domain?)"},
		{[]string{"doctor", "--jsn"}, "unknown flag: --jsn (did you mean --json?)"},
		{[]string{"doctor", "--report", "x"}, "unknown flag: --report (a flag of agentbox mcp, agentbox run)"},
		{[]string{"run", "--frobnicate", "--", "true"}, "unknown flag: --frobnicate\n"},
		{[]string{"run", "--netwrok=false", "--", "true"}, "unknown flag: --netwrok (did you mean --network?)"},
	} {
		code, _, stderr := run(t, tc.args...)
		if code != 125 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: status %d, stderr %q, want 125 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

func TestVersion(t *testing.T) {
	isolate(t)
	code, stdout, stderr := run(t, "version")
	// A test binary has no VCS stamp.
	want := "agentbox " + Version + " (unknown commit, " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	if code != 0 || stderr != "" || stdout != want {
		t.Fatalf("version: status %d, stdout %q, stderr %q; want %q", code, stdout, stderr, want)
	}
	if !regexp.MustCompile(`^0\.[0-9]+\.[0-9]+$`).MatchString(Version) {
		t.Errorf("Version %q is not 0.x.y", Version)
	}
}

// TestVersionCommit: the commit is the VCS stamp's, shortened, "-dirty"
// when the tree was modified; a module built from the proxy (go install
// ...@version) has its pseudo-version's; else "unknown commit".
func TestVersionCommit(t *testing.T) {
	stamp := func(main string, kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/agentbox/agentbox", Version: main}}
		for i := 0; i+1 < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	for _, tc := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{stamp("(devel)", "vcs.revision", "154ea866b2b2c0ffee0123456789abcdef012345", "vcs.modified", "false"), "154ea866b2b2"},
		{stamp("(devel)", "vcs.revision", "154ea866b2b2c0ffee0123456789abcdef012345", "vcs.modified", "true"), "154ea866b2b2-dirty"},
		{stamp("v0.0.0-20261201150642-154ea866b2b2"), "154ea866b2b2"},
		{stamp("v0.3.1-0.20261201150642-154ea866b2b2"), "154ea866b2b2"},
		{stamp("v0.3.0"), "unknown commit"},
		{stamp("(devel)"), "unknown commit"},
		{nil, "unknown commit"},
	} {
		if got := commitOf(tc.bi); got != tc.want {
			t.Errorf("commitOf(%+v) = %q, want %q", tc.bi, got, tc.want)
		}
	}
}

func TestHelpListsCommands(t *testing.T) {
	isolate(t)
	code, stdout, _ := run(t, "help")
	if code != 0 {
		t.Fatalf("help: status %d", code)
	}
	for _, c := range []string{"run", "doctor", "setup", "cleanup", "version"} {
		if !strings.Contains(stdout, "  "+c) {
			t.Errorf("help does not list %q:\n%s", c, stdout)
		}
	}
}

// Exit statuses of the command itself pass through unchanged; 126 and 127
// are agentbox's for "not executable" and "not found". danger-full-access
// runs without a sandbox, so this needs no re-exec stage in the test binary.
func TestExitStatusContract(t *testing.T) {
	dir := isolate(t)
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"sh", "-c", "exit 3"}, 3},
		{[]string{"sh", "-c", "kill -TERM $$"}, 128 + 15},
		{[]string{filepath.Join(dir, "no-such-command")}, 127},
		{[]string{"no-such-command-in-path-xyz"}, 127},
		{[]string{plain}, 126},
		{[]string{"true"}, 0},
	} {
		args := append([]string{"run", "-s", "danger-full-access", "-C", dir, "--"}, tc.args...)
		if code, _, stderr := run(t, args...); code != tc.want {
			t.Errorf("%q: status %d, want %d (stderr %q)", tc.args, code, tc.want, stderr)
		}
	}
}

// TestDoctorOneTruth: doctor's lists are JSON arrays, never null, and a
// recommendation (git's safe.bareRepository, which agentbox does not
// enforce and does not need for its guarantees) is a warning line, not a
// failure next to "every guarantee of the policy can be enforced".
func TestDoctorOneTruth(t *testing.T) {
	dir := isolate(t) // an empty home: safe.bareRepository is unset
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	code, stdout, stderr := run(t, "doctor", "--json", "-C", dir)
	var rep map[string]any
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s%s", err, stdout, stderr)
	}
	for _, k := range []string{"checks", "missing"} {
		if _, ok := rep[k].([]any); !ok {
			t.Errorf("doctor --json: %q is %v, want an array", k, rep[k])
		}
	}
	var bare map[string]any
	for _, c := range rep["checks"].([]any) {
		if c := c.(map[string]any); c["name"] == "git safe.bareRepository" {
			bare = c
		}
	}
	if bare == nil || bare["ok"] != true || bare["warning"] != true {
		t.Errorf("safe.bareRepository unset: %v, want ok with a warning", bare)
	}
	wantCode := 0
	if rep["can_sandbox"] != true {
		wantCode = 1
	}
	if code != wantCode {
		t.Errorf("doctor --json: status %d, want %d", code, wantCode)
	}
	code, stdout, _ = run(t, "doctor", "-C", dir)
	if !strings.Contains(stdout, "[warn] git safe.bareRepository") || strings.Contains(stdout, "[FAIL] git safe.bareRepository") {
		t.Errorf("doctor: the recommendation is not a warning line:\n%s", stdout)
	}
	if code == 0 && !strings.Contains(stdout, "every guarantee of the policy can be enforced") {
		t.Errorf("doctor: status 0 without saying so:\n%s", stdout)
	}
	for _, l := range strings.Split(stdout, "\n") {
		if strings.Contains(l, "[FAIL]") && code == 0 {
			t.Errorf("doctor: a failed check with status 0: %q", l)
		}
	}
}

// failingReader fails the test that reads it.
type failingReader struct{ t *testing.T }

func (r failingReader) Read([]byte) (int, error) {
	r.t.Error("stdin was read")
	return 0, io.EOF
}

// TestRefusesSlashWorkspace: started in / with no -C, `agentbox run` and
// `agentbox mcp` exit 125 before anything runs (mcp before reading its
// input), naming -C; read-only mode and danger-full-access still run.
func TestRefusesSlashWorkspace(t *testing.T) {
	isolate(t)
	t.Chdir("/")
	for _, args := range [][]string{{"run", "--", "true"}, {"mcp"}} {
		var out, errb bytes.Buffer
		code := Main(args, failingReader{t}, &out, &errb)
		if code != 125 || out.Len() != 0 {
			t.Errorf("%q: status %d, stdout %q, want 125 and nothing", args, code, out.String())
		}
		for _, w := range []string{"workspace (-C) /", "confines nothing", "-C DIR", "-s read-only"} {
			if !strings.Contains(errb.String(), w) {
				t.Errorf("%q: stderr %q does not contain %q", args, errb.String(), w)
			}
		}
		if args[0] == "mcp" && !strings.Contains(errb.String(), "server's arguments") {
			t.Errorf("mcp: stderr %q does not say where -C goes", errb.String())
		}
	}
	if code, _, stderr := run(t, "run", "-s", "danger-full-access", "--", "true"); code != 0 {
		t.Errorf("danger-full-access from /: status %d (%s)", code, stderr)
	}
}
