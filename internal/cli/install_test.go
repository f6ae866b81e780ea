package cli

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// files is every file under dir with its contents.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			m[p] = string(b)
		}
		return err
	})
	return m
}

// TestInstallCLI: install, a dry run that writes nothing, uninstall, as the
// CLI does them; the agentbox written is this program's absolute path.
func TestInstallCLI(t *testing.T) {
	isolate(t)
	home := os.Getenv("HOME")
	settings := filepath.Join(home, ".claude", "settings.json")
	orig := "{\n  \"model\": \"opus\"\n}\n"
	os.MkdirAll(filepath.Dir(settings), 0o755)
	os.WriteFile(settings, []byte(orig), 0o644)
	before := files(t, home)

	code, stdout, stderr := run(t, "install", "claude", "--dry-run")
	if code != 0 {
		t.Fatalf("dry run: status %d: %s", code, stderr)
	}
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	for _, want := range []string{"--- a" + settings, "+++ b" + settings, "--- /dev/null\n+++ b" + filepath.Join(home, ".claude.json"), `+      "command": "` + exe + `"`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, stdout)
		}
	}
	if after := files(t, home); len(after) != len(before) || after[settings] != orig {
		t.Fatalf("the dry run wrote: %v", after)
	}

	if code, _, stderr := run(t, "install", "claude"); code != 0 {
		t.Fatalf("install: status %d: %s", code, stderr)
	}
	var s struct {
		Hooks map[string][]struct {
			Matcher string
			Hooks   []struct{ Type, Command string }
		}
	}
	b, _ := os.ReadFile(settings)
	if err := json.Unmarshal(b, &s); err != nil || len(s.Hooks["PreToolUse"]) != 1 || s.Hooks["PreToolUse"][0].Hooks[0].Command != exe+" hook claude-pretooluse || exit 2" {
		t.Errorf("settings after install (%v):\n%s", err, b)
	}
	if code, stdout, _ := run(t, "install", "claude"); code != 0 || !strings.Contains(stdout, "already has agentbox") {
		t.Errorf("second install: %d %q", code, stdout)
	}
	if code, _, stderr := run(t, "uninstall", "claude"); code != 0 {
		t.Fatalf("uninstall: status %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(settings); string(b) != orig {
		t.Errorf("after uninstall:\n%s", b)
	}
	if _, err := os.Stat(filepath.Join(home, ".claude.json")); err == nil {
		t.Errorf("uninstall left the .claude.json install created")
	}

	// --scope project writes in the project, --command is written as
	// given.
	proj := t.TempDir()
	if code, _, stderr := run(t, "install", "cursor", "--scope", "project", "-C", proj, "--command", "agentbox"); code != 0 {
		t.Fatalf("project install: %d %s", code, stderr)
	}
	if b, err := os.ReadFile(filepath.Join(proj, ".cursor", "mcp.json")); err != nil || !bytes.Contains(b, []byte(`"command": "agentbox"`)) {
		t.Errorf("project mcp.json: %s %v", b, err)
	}
}

func TestInstallCLIErrors(t *testing.T) {
	isolate(t)
	home := os.Getenv("HOME")
	bad := filepath.Join(home, ".cursor", "mcp.json")
	os.MkdirAll(filepath.Dir(bad), 0o755)
	os.WriteFile(bad, []byte("{oops"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"install", "vim"}, `unknown agent "vim"`},
		{[]string{"install", "claude", "--scope", "system"}, `unknown scope "system"`},
		{[]string{"install", "cursor"}, bad + ": cannot read it as JSON"},
		{[]string{"install", "claude", "-C", home}, "use it with --scope project"},
		{[]string{"install", "claude", "--command", "a\nb"}, "NUL or a newline"},
		{[]string{"install"}, "accepts 1 arg"},
	} {
		code, _, stderr := run(t, tc.args...)
		if code != 125 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: status %d, stderr %q; want 125 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if b, _ := os.ReadFile(bad); string(b) != "{oops" {
		t.Errorf("the unparsable file was changed: %q", b)
	}
}

// TestHookCLI: the hook subcommand reads Claude Code's input on stdin and
// answers on stdout, exit 0, for good input and bad.
func TestHookCLI(t *testing.T) {
	isolate(t)
	for _, in := range []string{`{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"cwd":"/srv/p"}`, "garbage"} {
		var out, errb bytes.Buffer
		code := Main([]string{"hook", "claude-pretooluse"}, strings.NewReader(in), &out, &errb)
		var a struct {
			HookSpecificOutput struct{ PermissionDecision string }
		}
		if code != 0 || json.Unmarshal(out.Bytes(), &a) != nil || a.HookSpecificOutput.PermissionDecision == "" {
			t.Errorf("%q: status %d, stdout %q, stderr %q", in, code, out.String(), errb.String())
		}
	}
}
