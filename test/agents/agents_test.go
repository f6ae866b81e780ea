//go:build agents

// Package agents checks `agentbox install` against the agents themselves:
// Claude Code, Codex and Gemini CLI, each run with a local stand-in for
// its model API. Run it with the agents' programs in a directory:
//
//	npm install --prefix /tmp/agents @anthropic-ai/claude-code @openai/codex @google/gemini-cli
//	AGENTBOX_AGENTS=/tmp/agents/node_modules/.bin go test -tags agents -count=1 ./test/agents/
//
// Without AGENTBOX_AGENTS it fails: asked for, it must not pass by
// skipping. It runs as the current user, on the host.
package agents

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var agentboxBin string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "agentbox-agents-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		agentboxBin = filepath.Join(dir, "agentbox")
		build := exec.Command("go", "build", "-o", agentboxBin, "github.com/agentbox/agentbox/cmd/agentbox")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build agentbox:", err)
			return 1
		}
		return m.Run()
	}())
}

// agent is the path of an agent's program.
func agent(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("AGENTBOX_AGENTS")
	if dir == "" {
		t.Fatal("AGENTBOX_AGENTS is not set: name the directory holding claude, codex and gemini")
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// env is a home and a project (a git checkout) of their own.
type env struct {
	home, proj string
}

func newEnv(t *testing.T) env {
	t.Helper()
	// Not under /tmp: the sandbox has a private /tmp, and the point is
	// the host's files.
	base := "/var/tmp"
	if _, err := os.Stat(base); err != nil {
		base = ""
	}
	dir, err := os.MkdirTemp(base, "agentbox-agents-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := env{home: filepath.Join(dir, "home"), proj: filepath.Join(dir, "proj")}
	for _, d := range []string{e.home, filepath.Join(e.proj, ".git")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// run runs prog in the project with HOME set to the env's home.
func (e env) run(t *testing.T, extraEnv []string, prog string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Dir = e.proj
	cmd.Env = append(os.Environ(), append([]string{"HOME=" + e.home}, extraEnv...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s %q did not finish:\n%s", prog, args, out.String())
		return "", nil
	}
}

func (e env) install(t *testing.T, args ...string) {
	t.Helper()
	if out, err := e.run(t, nil, agentboxBin, append([]string{"install"}, args...)...); err != nil {
		t.Fatalf("agentbox install %v: %v\n%s", args, err, out)
	}
}

// capture is a stand-in model API that records each request body and
// answers with answer.
type capture struct {
	mu     sync.Mutex
	bodies [][]byte
	srv    *httptest.Server
}

func newCapture(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, body []byte)) *capture {
	c := &capture{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.bodies = append(c.bodies, body)
		c.mu.Unlock()
		answer(w, r, body)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func refuse(w http.ResponseWriter, _ *http.Request, _ []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(400)
	io.WriteString(w, `{"error": {"code": 400, "message": "capture only", "status": "INVALID_ARGUMENT", "type": "invalid_request_error"}}`)
}

// TestClaudeCode: Claude Code, told by its (stand-in) model to run a Bash
// command that writes outside the project and inside it, runs it through
// the hook `agentbox install claude` wrote: the outside file stays as it
// was, the inside one is written.
func TestClaudeCode(t *testing.T) {
	claude := agent(t, "claude")
	for _, scope := range []string{"user", "project"} {
		t.Run(scope, func(t *testing.T) {
			e := newEnv(t)
			e.install(t, "claude", "--scope", scope)
			outside := filepath.Join(filepath.Dir(e.home), "outside.txt")
			os.WriteFile(outside, []byte("orig\n"), 0o644)
			command := fmt.Sprintf("echo pwned > %s; echo \"it's $(echo in)\" > inside.txt", outside)
			api := newCapture(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
				if !strings.HasPrefix(r.URL.Path, "/v1/messages") || strings.Contains(r.URL.Path, "count_tokens") {
					io.WriteString(w, `{"input_tokens": 10}`)
					return
				}
				var req struct {
					Stream   bool `json:"stream"`
					Messages []struct {
						Content json.RawMessage `json:"content"`
					} `json:"messages"`
					Tools []struct{ Name string } `json:"tools"`
				}
				json.Unmarshal(body, &req)
				answered := bytes.Contains(body, []byte(`"tool_result"`))
				hasBash := slices.ContainsFunc(req.Tools, func(x struct{ Name string }) bool { return x.Name == "Bash" })
				var block map[string]any
				stop := "end_turn"
				if !answered && hasBash {
					block = map[string]any{"type": "tool_use", "id": "toolu_e2e", "name": "Bash", "input": map[string]any{"command": command, "description": "e2e"}}
					stop = "tool_use"
				} else {
					block = map[string]any{"type": "text", "text": "done"}
				}
				anthropicAnswer(w, req.Stream, block, stop)
			})
			out, err := e.run(t, []string{
				"ANTHROPIC_BASE_URL=" + api.srv.URL, "ANTHROPIC_API_KEY=sk-ant-e2e",
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1",
			}, claude, "-p", "go", "--output-format", "stream-json", "--verbose")
			if err != nil {
				t.Fatalf("claude: %v\n%s", err, out)
			}
			if !strings.Contains(out, `"source":"hook"`) {
				t.Errorf("the hook did not decide the call:\n%s", out)
			}
			if b, _ := os.ReadFile(outside); string(b) != "orig\n" {
				t.Errorf("the write outside the project happened: %q\n%s", b, out)
			}
			if b, err := os.ReadFile(filepath.Join(e.proj, "inside.txt")); string(b) != "it's in\n" {
				t.Errorf("the write inside: %q, %v\n%s", b, err, out)
			}
			if !strings.Contains(out, "Read-only file system") {
				t.Errorf("no refusal in the tool result:\n%s", out)
			}
		})
	}
}

// anthropicAnswer writes one assistant message, streamed (server-sent
// events) or whole.
func anthropicAnswer(w http.ResponseWriter, stream bool, block map[string]any, stop string) {
	msg := map[string]any{"id": "msg_e2e", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 5}}
	if !stream {
		msg["content"], msg["stop_reason"] = []any{block}, stop
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(msg)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(name string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	msg["content"], msg["stop_reason"] = []any{}, nil
	ev("message_start", map[string]any{"type": "message_start", "message": msg})
	if block["type"] == "tool_use" {
		input, _ := json.Marshal(block["input"])
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}})
		ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": block["text"]}})
	}
	ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	ev("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	ev("message_stop", map[string]any{"type": "message_stop"})
}

// tools is the tool names in the captured requests: Responses API
// (name), Gemini (functionDeclarations).
func (c *capture) tools(t *testing.T) []string {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for _, b := range c.bodies {
		var req struct {
			Tools []struct {
				Name  string `json:"name"`
				Funcs []struct {
					Name string `json:"name"`
				} `json:"functionDeclarations"`
			} `json:"tools"`
		}
		if json.Unmarshal(b, &req) != nil {
			continue
		}
		for _, tl := range req.Tools {
			if tl.Name != "" {
				names = append(names, tl.Name)
			}
			for _, f := range tl.Funcs {
				names = append(names, f.Name)
			}
		}
	}
	if len(names) == 0 {
		t.Fatalf("no request with tools reached the stand-in API (%d requests)", len(c.bodies))
	}
	return names
}

// TestCodex: after `agentbox install codex`, the tools Codex offers its
// model hold agentbox's MCP server and no shell; with shell_tool back on,
// the shell is back (the control).
func TestCodex(t *testing.T) {
	codex := agent(t, "codex")
	for _, scope := range []string{"user", "project"} {
		t.Run(scope, func(t *testing.T) { testCodex(t, codex, scope) })
	}
}

func testCodex(t *testing.T, codex, scope string) {
	e := newEnv(t)
	if scope == "project" {
		// Codex reads a project's .codex/config.toml only in a
		// project it trusts.
		os.MkdirAll(filepath.Join(e.home, ".codex"), 0o755)
		os.WriteFile(filepath.Join(e.home, ".codex", "config.toml"), []byte(fmt.Sprintf("[projects.%q]\ntrust_level = \"trusted\"\n", e.proj)), 0o644)
	}
	e.install(t, "codex", "--scope", scope)
	tools := func(t *testing.T, extra ...string) []string {
		api := newCapture(t, refuse)
		args := append([]string{"exec", "--skip-git-repo-check",
			"-c", "model_provider=e2e",
			"-c", `model_providers.e2e={name="e2e",base_url="` + api.srv.URL + `/v1",env_key="E2E_KEY",wire_api="responses",request_max_retries=0,stream_max_retries=0}`,
			"-c", "model=gpt-5-codex"}, extra...)
		e.run(t, []string{"E2E_KEY=x"}, codex, append(args, "go")...)
		return api.tools(t)
	}
	got := tools(t)
	if !slices.Contains(got, "mcp__agentbox") || slices.Contains(got, "exec_command") || slices.Contains(got, "shell") {
		t.Errorf("tools after install: %v; want mcp__agentbox and no shell", got)
	}
	if ctl := tools(t, "-c", "features.shell_tool=true"); !slices.Contains(ctl, "exec_command") {
		t.Errorf("control: with shell_tool on, tools %v have no exec_command", ctl)
	}
}

// TestGemini: after `agentbox install gemini`, Gemini CLI offers its model
// agentbox's run tool and not its shell (in yolo mode, which holds no
// tool back); a home without the install has the shell (the control).
func TestGemini(t *testing.T) {
	gemini := agent(t, "gemini")
	tools := func(t *testing.T, install bool, scope string) []string {
		e := newEnv(t)
		os.MkdirAll(filepath.Join(e.home, ".gemini"), 0o755)
		os.WriteFile(filepath.Join(e.home, ".gemini", "trustedFolders.json"), []byte(`{"`+e.proj+`": "TRUST_FOLDER"}`), 0o644)
		os.WriteFile(filepath.Join(e.home, ".gemini", "settings.json"), []byte("{\n  // the user's own\n  \"security\": {\"auth\": {\"selectedType\": \"gemini-api-key\"}}\n}\n"), 0o644)
		if install {
			e.install(t, "gemini", "--scope", scope)
		}
		api := newCapture(t, refuse)
		e.run(t, []string{"GEMINI_API_KEY=x", "GOOGLE_GEMINI_BASE_URL=" + api.srv.URL}, gemini, "--approval-mode", "yolo", "-p", "go")
		return api.tools(t)
	}
	for _, scope := range []string{"user", "project"} {
		if got := tools(t, true, scope); !slices.Contains(got, "mcp_agentbox_run") || slices.Contains(got, "run_shell_command") {
			t.Errorf("tools after install --scope %s: %v; want mcp_agentbox_run and no run_shell_command", scope, got)
		}
	}
	if ctl := tools(t, false, ""); !slices.Contains(ctl, "run_shell_command") {
		t.Errorf("control: without install, tools %v have no run_shell_command", ctl)
	}
}
