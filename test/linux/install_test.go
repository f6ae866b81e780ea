//go:build linux

package linux

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClaudeHookEndToEnd is the Claude Code route from end to end: the
// hook `agentbox install claude` writes is fed Claude Code's documented
// PreToolUse input, and the command it answers with is run the way Claude
// Code's Bash tool runs one (bash, in the session's directory). A write
// outside the workspace must leave the host unchanged, one inside must
// land, through a lone run and through the resident helper.
func TestClaudeHookEndToEnd(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		re := newResidentEnv(t, fx)
		env := append(re.env(), "CLAUDE_PROJECT_DIR="+fx.ws)

		// hook answers one Bash call made in cwd, and returns the
		// rewritten command.
		hook := func(t *testing.T, command, cwd string) string {
			t.Helper()
			in, _ := json.Marshal(map[string]any{
				"session_id": "e2e", "transcript_path": filepath.Join(fx.home, "t.jsonl"),
				"cwd": cwd, "permission_mode": "default", "hook_event_name": "PreToolUse",
				"tool_name": "Bash", "tool_input": map[string]any{"command": command, "description": "e2e"},
				"tool_use_id": "toolu_e2e",
			})
			r := runWith(t, u, runOpts{env: env, dir: cwd, stdin: bytes.NewReader(in)}, "hook", "claude-pretooluse")
			var a struct {
				HookSpecificOutput struct {
					HookEventName      string
					PermissionDecision string
					UpdatedInput       struct{ Command, Description string }
				}
			}
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &a) != nil {
				t.Fatalf("hook: %v", r)
			}
			h := a.HookSpecificOutput
			if h.HookEventName != "PreToolUse" || h.PermissionDecision != "allow" || h.UpdatedInput.Description != "e2e" || !strings.HasPrefix(h.UpdatedInput.Command, binPath+" run -C ") {
				t.Fatalf("hook answered %+v", h)
			}
			return h.UpdatedInput.Command
		}
		// bash runs a command as Claude Code's Bash tool would; lone
		// sends agentbox's stderr to a regular file, which makes it
		// run on its own instead of through the resident helper.
		errFile := filepath.Join(fx.dir, "stderr")
		bash := func(t *testing.T, command, cwd string, lone bool) result {
			t.Helper()
			if lone {
				command = "exec 2>" + shq(errFile) + "\n" + command
			}
			r := host(t, u, runOpts{env: env, dir: cwd}, "/bin/bash", "-c", command)
			if lone {
				b, _ := os.ReadFile(errFile)
				r.stderr += string(b)
			}
			return r
		}
		re.warm(t)

		for _, path := range []struct {
			name string
			lone bool
		}{{"lone", true}, {"resident", false}} {
			t.Run(path.name, func(t *testing.T) {
				// Outside: refused, the host file as it was.
				evil := `echo pwned > "$OUT/file.txt"; echo "it's $(echo x)" > "$OUT/new-` + path.name + `"`
				r := bash(t, hook(t, servedProbe+"\n"+evil, fx.ws), fx.ws, path.lone)
				first, _, _ := strings.Cut(r.stdout, "\n")
				if served := first == "agentbox-resident-init"; served == path.lone {
					t.Errorf("served by the helper: %v, want %v (%v)", served, !path.lone, r)
				}
				if r.code == 0 {
					t.Errorf("a write outside the workspace succeeded: %v", r)
				}
				assertContent(t, filepath.Join(fx.out, "file.txt"), fx.txt)
				assertAbsent(t, filepath.Join(fx.out, "new-"+path.name))

				// Inside, with the quotes, $() and newlines a model
				// writes, from a subdirectory: lands on the host.
				good := "printf '%s\\n' \"it's $(echo in)\" > 'new file " + path.name + "'\npwd > pwd.txt"
				r = bash(t, hook(t, good, filepath.Join(fx.ws, "sub")), filepath.Join(fx.ws, "sub"), path.lone)
				if r.code != 0 {
					t.Fatalf("a write inside the workspace failed: %v", r)
				}
				assertContent(t, filepath.Join(fx.ws, "sub", "new file "+path.name), "it's in\n")
				assertContent(t, filepath.Join(fx.ws, "sub", "pwd.txt"), filepath.Join(fx.ws, "sub")+"\n")
			})
		}

		// The control: the same command straight on the host does
		// write outside, so the refusal above is the sandbox's.
		ctl := filepath.Join(fx.dir, "control")
		if err := os.Mkdir(ctl, 0o755); err != nil {
			t.Fatal(err)
		}
		chownR(t, ctl, u)
		r := host(t, u, runOpts{env: append(fx.env(), "OUT="+ctl)}, "/bin/bash", "-c", `echo pwned > "$OUT/file.txt"`)
		if r.code != 0 {
			t.Fatalf("control: %v", r)
		}
		assertContent(t, filepath.Join(ctl, "file.txt"), "pwned\n")
	})
}

// shq quotes s for a POSIX shell.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
