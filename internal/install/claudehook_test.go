package install

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// hookIn is Claude Code's documented PreToolUse input for a Bash call.
func hookIn(command, cwd string) []byte {
	b, _ := json.Marshal(map[string]any{
		"session_id":      "abc123",
		"transcript_path": "/home/me/.claude/projects/x/abc123.jsonl",
		"cwd":             cwd,
		"permission_mode": "default",
		"hook_event_name": "PreToolUse",
		"tool_name":       "Bash",
		"tool_input": map[string]any{
			"command":     command,
			"description": "Run the tests",
			"timeout":     120000,
		},
		"tool_use_id": "toolu_01ABC123",
	})
	return b
}

type hookAnswer struct {
	HookSpecificOutput struct {
		HookEventName            string         `json:"hookEventName"`
		PermissionDecision       string         `json:"permissionDecision"`
		PermissionDecisionReason string         `json:"permissionDecisionReason"`
		UpdatedInput             map[string]any `json:"updatedInput"`
	} `json:"hookSpecificOutput"`
}

func answer(t *testing.T, out []byte) hookAnswer {
	t.Helper()
	var a hookAnswer
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		t.Fatalf("answer is not the documented JSON: %v\n%s", err, out)
	}
	return a
}

var testEnv = HookEnv{Agentbox: "/usr/local/bin/agentbox", Shell: "/bin/bash", ProjectDir: "/home/me/src/app"}

func TestClaudeHookRewrites(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the cases are written with Unix paths")
	}
	a := answer(t, ClaudePreToolUse(hookIn("npm test", "/home/me/src/app"), testEnv))
	h := a.HookSpecificOutput
	if h.HookEventName != "PreToolUse" || h.PermissionDecision != "allow" {
		t.Fatalf("answer %+v", h)
	}
	want := "/usr/local/bin/agentbox run -C /home/me/src/app -- /bin/bash -c 'npm test'"
	if h.UpdatedInput["command"] != want {
		t.Errorf("command %q, want %q", h.UpdatedInput["command"], want)
	}
	// The rest of the tool input is handed back as it came.
	if h.UpdatedInput["description"] != "Run the tests" || h.UpdatedInput["timeout"] != float64(120000) {
		t.Errorf("updatedInput lost fields: %v", h.UpdatedInput)
	}

	// In a subdirectory the project stays the workspace.
	a = answer(t, ClaudePreToolUse(hookIn("make", "/home/me/src/app/sub dir"), testEnv))
	want = "/usr/local/bin/agentbox run -C /home/me/src/app -- /bin/bash -c 'cd -- '\\''/home/me/src/app/sub dir'\\'' || exit 125\nmake'"
	if got := a.HookSpecificOutput.UpdatedInput["command"]; got != want {
		t.Errorf("command %q, want %q", got, want)
	}
	// Outside the project, the directory itself is the workspace (and
	// agentbox refuses one that confines nothing, such as the home).
	a = answer(t, ClaudePreToolUse(hookIn("ls", "/home/me/src/app2"), testEnv))
	if got := a.HookSpecificOutput.UpdatedInput["command"]; got != "/usr/local/bin/agentbox run -C /home/me/src/app2 -- /bin/bash -c ls" {
		t.Errorf("command %q", got)
	}
	ask := testEnv
	ask.Ask = true
	if a := answer(t, ClaudePreToolUse(hookIn("ls", "/home/me/src/app"), ask)); a.HookSpecificOutput.PermissionDecision != "ask" {
		t.Errorf("--ask answered %q", a.HookSpecificOutput.PermissionDecision)
	}
}

// TestClaudeHookDenies: whatever the hook cannot sandbox it denies, with a
// reason; it never answers with an unchanged command.
func TestClaudeHookDenies(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the cases are written with Unix paths")
	}
	withNUL := bytes.Replace(hookIn("echo aXb", "/home/me/src/app"), []byte("aXb"), []byte(`a\u0000b`), 1)
	for name, in := range map[string][]byte{
		"empty input":     nil,
		"not JSON":        []byte("rm -rf /"),
		"truncated":       hookIn("ls", "/w")[:40],
		"array":           []byte(`[{"tool_name": "Bash"}]`),
		"no command":      []byte(`{"tool_name": "Bash", "tool_input": {}, "cwd": "/w"}`),
		"command number":  []byte(`{"tool_name": "Bash", "tool_input": {"command": 5}, "cwd": "/w"}`),
		"tool_input list": []byte(`{"tool_name": "Bash", "tool_input": ["ls"], "cwd": "/w"}`),
		"empty command":   hookIn("  \n", "/w"),
		"NUL":             withNUL,
		"relative cwd":    hookIn("ls", "w"),
		"no cwd":          []byte(`{"tool_name": "Bash", "tool_input": {"command": "ls"}}`),
		"no tool_name":    []byte(`{"tool_input": {"command": "ls"}, "cwd": "/w"}`),
		"bad UTF-8":       bytes.Replace(hookIn("echo aXb", "/w"), []byte("X"), []byte{0xff}, 1),
		"other event":     []byte(`{"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}, "cwd": "/w"}`),
	} {
		t.Run(name, func(t *testing.T) {
			a := answer(t, ClaudePreToolUse(in, testEnv))
			h := a.HookSpecificOutput
			if h.PermissionDecision != "deny" || !strings.HasPrefix(h.PermissionDecisionReason, "agentbox: ") || h.UpdatedInput != nil {
				t.Errorf("answer %+v, want a denial with a reason", h)
			}
		})
	}
	// Another tool: no opinion (the hook is installed for Bash only).
	out := ClaudePreToolUse([]byte(`{"hook_event_name": "PreToolUse", "tool_name": "Write", "tool_input": {"file_path": "/etc/x"}, "cwd": "/w"}`), testEnv)
	if string(out) != "{}\n" {
		t.Errorf("Write: %s", out)
	}
}

// posixShell is the path of sh; the test is skipped where there is none.
func posixShell(t *testing.T) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("needs a POSIX shell")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	return sh
}

// TestClaudeHookQuoting runs the rewritten command through a real shell
// with a stand-in agentbox that prints the arguments it got: each must be
// exactly what the hook meant, whatever the model's command holds.
func TestClaudeHookQuoting(t *testing.T) {
	sh := posixShell(t)
	dir := t.TempDir()
	fake := filepath.Join(dir, "agent'box $(x)")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nprintf '%s\\0' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	proj := filepath.Join(dir, "pro'ject \"x\" $HOME")
	cwd := filepath.Join(proj, "sub`id`\ndir")
	env := HookEnv{Agentbox: fake, Shell: "/bin/bash", ProjectDir: proj}
	for _, command := range []string{
		"ls",
		"echo 'single' \"double\" `back` $(sub) ${VAR} $HOME \\ \\\\",
		"a'b'\\''c",
		"line one\nline two\r\n\ttab",
		"'; rm -rf / #",
		"\"; touch /tmp/pwned; \"",
		"$(touch /tmp/pwned)",
		"echo '",
		"printf '%s\\n' \"$@\" -- -x --",
		"é ünïcödé \u202e \U0001F600",
		strings.Repeat("'\"$`\\", 200),
	} {
		for _, wd := range []string{proj, cwd} {
			a := answer(t, ClaudePreToolUse(hookIn(command, wd), env))
			rewritten, _ := a.HookSpecificOutput.UpdatedInput["command"].(string)
			if a.HookSpecificOutput.PermissionDecision != "allow" || rewritten == "" {
				t.Fatalf("%q: %+v", command, a.HookSpecificOutput)
			}
			out, err := exec.Command(sh, "-c", rewritten).Output()
			if err != nil {
				t.Fatalf("%q: the rewritten command failed in sh: %v\n%s", command, err, rewritten)
			}
			got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
			script := command
			if wd != proj {
				script = "cd -- " + shellQuote(wd) + " || exit 125\n" + command
			}
			want := []string{"run", "-C", proj, "--", "/bin/bash", "-c", script}
			if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
				t.Errorf("%q in %q:\ngot  %q\nwant %q", command, wd, got, want)
			}
		}
	}
	// The cd line itself, run by a shell, lands in the directory.
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sh, "-c", "cd -- "+shellQuote(cwd)+" || exit 125\npwd").Output()
	if err != nil || strings.TrimSuffix(string(out), "\n") != cwd {
		t.Errorf("cd line: %q, %v", out, err)
	}
}

// TestCursorHook: Cursor's beforeShellExecution hook refuses every
// command, good input or bad, and tells the model what to use instead.
func TestCursorHook(t *testing.T) {
	for _, in := range []string{
		`{"hook_event_name": "beforeShellExecution", "conversation_id": "c", "generation_id": "g", "workspace_roots": ["/p"], "command": "npm install \"x\"", "cwd": "/p"}`,
		"", "garbage", `{"command": 5}`,
	} {
		var a struct {
			Permission   string `json:"permission"`
			UserMessage  string `json:"user_message"`
			AgentMessage string `json:"agent_message"`
		}
		out := CursorBeforeShell([]byte(in))
		if err := json.Unmarshal(out, &a); err != nil || a.Permission != "deny" || !strings.Contains(a.AgentMessage, `"run" tool`) || a.UserMessage == "" {
			t.Errorf("%q: %s (%v)", in, out, err)
		}
		if strings.Contains(in, "npm") && !strings.Contains(a.AgentMessage, `["bash", "-c", "npm install \"x\""]`) {
			t.Errorf("the message does not show the call to make: %s", a.AgentMessage)
		}
	}
}

// TestHookLineFailsClosed: the hook line install writes exits 2 (Claude
// Code's "block") when the hook cannot run at all or fails, and passes
// the hook's answer through when it works.
func TestHookLineFailsClosed(t *testing.T) {
	sh := posixShell(t)
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	bad := filepath.Join(dir, "bad")
	os.WriteFile(ok, []byte("#!/bin/sh\necho '{}'\n"), 0o755)
	os.WriteFile(bad, []byte("#!/bin/sh\nexit 125\n"), 0o755)
	for prog, want := range map[string]int{ok: 0, bad: 2, filepath.Join(dir, "moved"): 2} {
		home, _ := setupFiles(t, nil)
		changes, err := Plan(Options{Agent: "claude", Scope: User, Home: home, Command: prog}, false, os.ReadFile)
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Hooks map[string][]struct{ Hooks []struct{ Command string } }
		}
		json.Unmarshal(changes[1].New, &s)
		line := s.Hooks["PreToolUse"][0].Hooks[0].Command
		err = exec.Command(sh, "-c", line).Run()
		code := 0
		if ee, isExit := err.(*exec.ExitError); isExit {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != want {
			t.Errorf("%q: exit %d, want %d", line, code, want)
		}
	}
}
