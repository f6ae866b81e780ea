package install

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// HookEnv is what the Claude Code hook knows besides its input.
type HookEnv struct {
	// Agentbox is the agentbox program the rewritten command runs.
	Agentbox string
	// Shell runs the command text inside the sandbox (bash, as Claude
	// Code's Bash tool writes for it).
	Shell string
	// ProjectDir is $CLAUDE_PROJECT_DIR: the workspace when the
	// command's directory is inside it.
	ProjectDir string
	// Ask makes the answer "ask" (Claude Code prompts as usual, showing
	// the rewritten command) instead of "allow".
	Ask bool
}

// hookInput is the part of Claude Code's PreToolUse input the hook reads.
type hookInput struct {
	HookEventName string                     `json:"hook_event_name"`
	ToolName      string                     `json:"tool_name"`
	ToolInput     map[string]json.RawMessage `json:"tool_input"`
	Cwd           string                     `json:"cwd"`
}

type hookOutput struct {
	HookSpecificOutput hookDecision `json:"hookSpecificOutput"`
}

type hookDecision struct {
	HookEventName            string                     `json:"hookEventName"`
	PermissionDecision       string                     `json:"permissionDecision"`
	PermissionDecisionReason string                     `json:"permissionDecisionReason,omitempty"`
	UpdatedInput             map[string]json.RawMessage `json:"updatedInput,omitempty"`
}

// ClaudePreToolUse answers one Claude Code PreToolUse hook call: for the
// Bash tool, the command rewritten to run under `agentbox run`, or a
// denial saying why it cannot be. It never answers "run it as it is" for
// a Bash command: bad input is denied. Another tool (the hook is installed
// for Bash only) gets an empty answer, which leaves the decision to
// Claude Code.
func ClaudePreToolUse(input []byte, env HookEnv) []byte {
	out, err := claudePreToolUse(input, env)
	if err != nil {
		return deny(err.Error())
	}
	return out
}

func deny(reason string) []byte {
	b, _ := marshal(hookOutput{hookDecision{
		HookEventName:            "PreToolUse",
		PermissionDecision:       "deny",
		PermissionDecisionReason: "agentbox: " + reason,
	}})
	return append(b, '\n')
}

func claudePreToolUse(input []byte, env HookEnv) ([]byte, error) {
	// The decoder would turn bad UTF-8 into U+FFFD: another command
	// than the one in the input.
	if !utf8.Valid(input) {
		return nil, fmt.Errorf("the hook input is not UTF-8, so the command does not run")
	}
	var in hookInput
	dec := json.NewDecoder(bytes.NewReader(input))
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("cannot read the hook input as JSON (%v), so the command does not run", err)
	}
	if in.HookEventName != "" && in.HookEventName != "PreToolUse" {
		return nil, fmt.Errorf("hook event %q is not PreToolUse: install the hook as PreToolUse", in.HookEventName)
	}
	if in.ToolName == "" {
		return nil, fmt.Errorf("the hook input names no tool, so the command does not run")
	}
	if in.ToolName != "Bash" {
		return []byte("{}\n"), nil
	}
	raw, ok := in.ToolInput["command"]
	if !ok {
		return nil, fmt.Errorf("the Bash call has no command")
	}
	var command string
	if err := json.Unmarshal(raw, &command); err != nil {
		return nil, fmt.Errorf("the Bash command is not a string")
	}
	if strings.TrimSpace(command) == "" {
		return nil, fmt.Errorf("the Bash command is empty")
	}
	// A shell word cannot hold NUL: the command would not be the one
	// the model wrote.
	for _, s := range []string{command, in.Cwd, env.ProjectDir, env.Agentbox, env.Shell} {
		if strings.ContainsRune(s, 0) {
			return nil, fmt.Errorf("the command or its directory holds a NUL byte, which no shell passes on")
		}
	}
	if env.Agentbox == "" || env.Shell == "" {
		return nil, fmt.Errorf("BUG(install): no agentbox or shell for the hook")
	}
	if in.Cwd == "" || !filepath.IsAbs(in.Cwd) {
		return nil, fmt.Errorf("the hook input has no absolute cwd (%q), so the sandbox has no workspace", in.Cwd)
	}
	cwd := filepath.Clean(in.Cwd)
	ws := cwd
	if p := env.ProjectDir; p != "" && filepath.IsAbs(p) {
		p = filepath.Clean(p)
		if rel, err := filepath.Rel(p, cwd); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			ws = p
		}
	}
	script := command
	if ws != cwd {
		// The workspace is the project; the command runs where the
		// model's shell is.
		script = "cd -- " + shellQuote(cwd) + " || exit 125\n" + command
	}
	rewritten := shellQuote(env.Agentbox) + " run -C " + shellQuote(ws) + " -- " + shellQuote(env.Shell) + " -c " + shellQuote(script)
	updated := make(map[string]json.RawMessage, len(in.ToolInput))
	for k, v := range in.ToolInput {
		updated[k] = v
	}
	enc, err := marshal(rewritten)
	if err != nil {
		return nil, err
	}
	updated["command"] = enc
	decision := "allow"
	if env.Ask {
		decision = "ask"
	}
	b, err := marshal(hookOutput{hookDecision{
		HookEventName:            "PreToolUse",
		PermissionDecision:       decision,
		PermissionDecisionReason: "agentbox: runs in the sandbox, workspace " + ws,
		UpdatedInput:             updated,
	}})
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// cursorAnswer is Cursor's beforeShellExecution output. Cursor has
// spelled the message keys both ways (user_message, userMessage); both
// are written, so either reader finds them.
type cursorAnswer struct {
	Permission    string `json:"permission"`
	UserMessage   string `json:"user_message"`
	AgentMessage  string `json:"agent_message"`
	UserMessage1  string `json:"userMessage"`
	AgentMessage1 string `json:"agentMessage"`
}

// CursorBeforeShell answers Cursor's beforeShellExecution hook: always
// "deny", whatever the input (Cursor's own shell would run the command
// outside the sandbox), telling the model to use agentbox's run tool.
func CursorBeforeShell(input []byte) []byte {
	var in struct {
		Command string `json:"command"`
	}
	agent := "agentbox: the shell tool is off here; run the command with the agentbox MCP server's \"run\" tool (its input: {\"command\": [argv...]}), which runs it in the sandbox"
	user := "agentbox: refused a shell command outside the sandbox (the agent is told to use agentbox's run tool)"
	if json.Unmarshal(input, &in) == nil && in.Command != "" {
		agent += "; for this one: {\"command\": [\"bash\", \"-c\", " + string(must(marshal(in.Command))) + "]}"
	}
	b, _ := marshal(cursorAnswer{"deny", user, agent, user, agent})
	return append(b, '\n')
}

func must(b []byte, err error) []byte {
	if err != nil {
		return []byte(`""`)
	}
	return b
}
