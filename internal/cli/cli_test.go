package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
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

func TestVersion(t *testing.T) {
	isolate(t)
	code, stdout, stderr := run(t, "version")
	if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "agentbox ") {
		t.Fatalf("version: status %d, stdout %q, stderr %q", code, stdout, stderr)
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
