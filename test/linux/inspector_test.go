//go:build linux

package linux

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The official MCP inspector, from the npm registry, as a user would run
// it. Two versions: inspectorCall is the last whose CLI converts a
// --tool-arg by the property's type in the tool's schema alone (an
// "array" is parsed as JSON, anything else stays a string), the stricter
// reading a client may make; inspectorLint checks tool schemas for
// portability (tools/list --strict).
const (
	inspectorCall = "0.15.0"
	inspectorLint = "2.12.0"
)

var (
	inspectorMu   sync.Mutex
	inspectorDirs = map[string]string{}
)

// inspectorCache is where the inspector's npm packages are installed once
// and kept between runs: somewhere every test user may read (the
// unprivileged user runs the inspector too) and only we may write.
func inspectorCache(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("AGENTBOX_TEST_NPM_CACHE"); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/var/cache/agentbox-test/npm"
	}
	d, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(d, "agentbox-test", "npm")
}

// inspector returns the directory the inspector's version is installed
// in (its node_modules), installing it from the npm registry on first
// use. It skips only when npm is not installed (scripts/test.sh installs
// it); an install that fails fails the test.
func inspector(t *testing.T, version string) string {
	t.Helper()
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("npm (npx) is not installed: the MCP inspector tests need node and npm; scripts/test.sh installs them")
	}
	inspectorMu.Lock()
	defer inspectorMu.Unlock()
	if d, ok := inspectorDirs[version]; ok {
		return d
	}
	cache := inspectorCache(t)
	dir := filepath.Join(cache, "inspector-"+version)
	bin := filepath.Join(dir, "node_modules", ".bin", "mcp-inspector")
	if _, err := os.Stat(bin); err != nil {
		if err := os.MkdirAll(cache, 0o755); err != nil {
			t.Fatal(err)
		}
		// Installed beside, then renamed into place: a run interrupted
		// half-way, or another suite installing at the same time,
		// leaves no half-installed package behind for the next.
		tmp, err := os.MkdirTemp(cache, "installing-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--no-save", "--prefix", tmp, "@modelcontextprotocol/inspector@"+version)
		cmd.Dir = tmp
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("npm install @modelcontextprotocol/inspector@%s: %v\n%s", version, err, out)
		}
		if err := os.Chmod(tmp, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, dir); err != nil {
			if _, err2 := os.Stat(bin); err2 != nil {
				t.Fatalf("installing the inspector in %s: %v", dir, err)
			}
		}
	}
	inspectorDirs[version] = dir
	return dir
}

// runInspector runs the inspector's CLI as u, exactly as a user would:
// `npx @modelcontextprotocol/inspector --cli agentbox mcp -C WS ARGS...`,
// with agentbox found in PATH, from the directory the package is
// installed in and with npm offline, so that nothing is fetched now.
func runInspector(t *testing.T, u *testUser, fx *fixture, version string, args ...string) result {
	t.Helper()
	needBin(t)
	dir := inspector(t, version)
	argv := append([]string{"@modelcontextprotocol/inspector", "--cli", "agentbox", "mcp", "-C", fx.ws}, args...)
	return host(t, u, runOpts{
		dir:     dir,
		timeout: 60 * time.Second,
		env: append(fx.env(),
			"PATH="+filepath.Dir(binPath)+":"+hostPATH,
			"npm_config_offline=true",
			"npm_config_update_notifier=false",
			"npm_config_cache="+filepath.Join(fx.home, ".npm"),
		),
	}, "npx", argv...)
}

// inspectorResult is what the inspector's CLI prints for tools/call.
type inspectorResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError           bool       `json:"isError"`
	StructuredContent *mcpResult `json:"structuredContent"`
}

func parseInspector(t *testing.T, r result) inspectorResult {
	t.Helper()
	var res inspectorResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("inspector output: %v\n%v", err, r)
	}
	return res
}

// TestMCPInspectorCallsRun: the official MCP inspector's CLI calls the
// run tool with arguments it builds from the tool's schema: command as an
// array, cwd, stdin, timeout_seconds; a cwd outside the workspace is the
// tool's error and runs nothing. With command's schema type
// ["null","array"] the inspector sent the array as a string.
func TestMCPInspectorCallsRun(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, noCodex)
		for _, v := range []string{inspectorCall, inspectorLint} {
			r := runInspector(t, u, fx, v, "--method", "tools/call", "--tool-name", "run", "--tool-arg", `command=["echo","hi"]`)
			res := parseInspector(t, r)
			if r.code != 0 || res.IsError || res.StructuredContent == nil || res.StructuredContent.ExitCode != 0 || res.StructuredContent.Stdout != "hi\n" {
				t.Errorf("inspector %s: echo hi: %v", v, r)
			}
		}
		r := runInspector(t, u, fx, inspectorCall, "--method", "tools/call", "--tool-name", "run",
			"--tool-arg", `command=["sh","-c","pwd -P; cat; echo x > made"]`, "cwd=sub", "stdin=from the inspector", "timeout_seconds=20")
		res := parseInspector(t, r)
		if res.IsError || res.StructuredContent == nil || res.StructuredContent.Stdout != fx.ws+"/sub\nfrom the inspector" {
			t.Errorf("cwd and stdin: %v", r)
		}
		assertContent(t, filepath.Join(fx.ws, "sub", "made"), "x\n")
		marker := filepath.Join(fx.ws, "ran")
		for _, cwd := range []string{fx.out, "..", "link"} {
			r = runInspector(t, u, fx, inspectorCall, "--method", "tools/call", "--tool-name", "run",
				"--tool-arg", fmt.Sprintf(`command=["touch",%q]`, marker), "cwd="+cwd)
			res = parseInspector(t, r)
			if !res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, "outside the workspace") {
				t.Errorf("cwd %s: %v", cwd, r)
			}
			if _, err := os.Lstat(marker); err == nil {
				t.Errorf("cwd %s: the command ran", cwd)
			}
		}
	})
}

// TestMCPInspectorListsTools: tools/list through the inspector shows the
// run tool with a plain input schema, and the inspector's portability
// check finds nothing to warn about in either schema.
func TestMCPInspectorListsTools(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, noCodex)
		r := runInspector(t, u, fx, inspectorLint, "--method", "tools/list", "--strict")
		var list struct {
			Tools []struct {
				Name        string `json:"name"`
				InputSchema struct {
					Properties map[string]struct {
						Type any `json:"type"`
					} `json:"properties"`
					Required []string `json:"required"`
				} `json:"inputSchema"`
			} `json:"tools"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || r.code != 0 || len(list.Tools) != 1 || list.Tools[0].Name != "run" {
			t.Fatalf("tools/list: %v (%v)", r, err)
		}
		props := list.Tools[0].InputSchema.Properties
		for name, typ := range map[string]string{"command": "array", "cwd": "string", "stdin": "string", "timeout_seconds": "number", "request_permissions": "object"} {
			if props[name].Type != typ {
				t.Errorf("%s: type %v, want %q", name, props[name].Type, typ)
			}
		}
		if len(props) != 5 || strings.Join(list.Tools[0].InputSchema.Required, ",") != "command" {
			t.Errorf("input schema: %s", r.stdout)
		}
		if strings.Contains(r.stderr, "Warning:") || strings.Contains(r.stderr, "Error:") {
			t.Errorf("the inspector finds the schemas unportable:\n%s", r.stderr)
		}
	})
}
