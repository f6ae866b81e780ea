package install

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

const testCommand = "/opt/agent box/bin/agentbox" // a space: quoting matters

// setupFiles makes a home and a project holding fixture files: each key
// is a path under "home/" or "proj/", each value a testdata file.
func setupFiles(t *testing.T, files map[string]string) (home, proj string) {
	t.Helper()
	dir := t.TempDir()
	home, proj = filepath.Join(dir, "home"), filepath.Join(dir, "proj")
	for _, d := range []string{home, proj} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for dst, src := range files {
		data, err := os.ReadFile(filepath.Join("testdata", src))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, dst)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return home, proj
}

// tree is every file under dir, path to contents.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		m[strings.TrimPrefix(p, dir)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func plan(t *testing.T, o Options, remove bool) []Change {
	t.Helper()
	c, err := Plan(o, remove, os.ReadFile)
	if err != nil {
		t.Fatalf("Plan(%s, remove=%v): %v", o.Agent, remove, err)
	}
	return c
}

// TestRoundTrip installs each agent into fixture files in its documented
// format, checks what the agent will read, installs again (nothing to do),
// uninstalls, and wants the original bytes back, backups aside.
func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		agent string
		scope Scope
		files map[string]string
		check func(t *testing.T, home, proj string)
	}{
		{"claude user", "claude", User, map[string]string{"home/.claude.json": "claude/claude.json", "home/.claude/settings.json": "claude/settings.json"}, checkClaude(".claude.json", ".claude/settings.json", true)},
		{"claude user, no files", "claude", User, nil, checkClaude(".claude.json", ".claude/settings.json", true)},
		{"claude user, settings without hooks", "claude", User, map[string]string{"home/.claude/settings.json": "claude/settings-nohooks.json"}, checkClaude(".claude.json", ".claude/settings.json", true)},
		{"claude project", "claude", Project, map[string]string{"proj/.mcp.json": "claude/mcp.json", "proj/.claude/settings.json": "claude/settings.json"}, checkClaude(".mcp.json", ".claude/settings.json", false)},
		{"claude project, empty mcpServers", "claude", Project, map[string]string{"proj/.mcp.json": "claude/mcp-empty.json"}, checkClaude(".mcp.json", ".claude/settings.json", false)},
		{"codex user", "codex", User, map[string]string{"home/.codex/config.toml": "codex/config.toml"}, checkCodex(".codex/config.toml", true)},
		{"codex user, [features] of its own", "codex", User, map[string]string{"home/.codex/config.toml": "codex/config-features.toml"}, checkCodex(".codex/config.toml", true)},
		{"codex user, no final newline", "codex", User, map[string]string{"home/.codex/config.toml": "codex/config-noeol.toml"}, checkCodex(".codex/config.toml", true)},
		{"codex user, no file", "codex", User, nil, checkCodex(".codex/config.toml", true)},
		{"codex project", "codex", Project, map[string]string{"proj/.codex/config.toml": "codex/config.toml"}, checkCodex(".codex/config.toml", false)},
		{"gemini user", "gemini", User, map[string]string{"home/.gemini/settings.json": "gemini/settings.json"}, checkGemini(".gemini/settings.json", true, "tools", "exclude")},
		{"gemini user, v1 settings", "gemini", User, map[string]string{"home/.gemini/settings.json": "gemini/settings-v1.json"}, checkGemini(".gemini/settings.json", true, "excludeTools")},
		{"gemini user, shell already excluded", "gemini", User, map[string]string{"home/.gemini/settings.json": "gemini/settings-exclude.json"}, checkGemini(".gemini/settings.json", true, "tools", "exclude")},
		{"gemini project, no file", "gemini", Project, nil, checkGemini(".gemini/settings.json", false, "tools", "exclude")},
		{"cursor user", "cursor", User, map[string]string{"home/.cursor/mcp.json": "cursor/mcp.json", "home/.cursor/hooks.json": "cursor/hooks.json"}, checkCursor(".cursor/mcp.json", true)},
		{"cursor user, no hooks.json", "cursor", User, map[string]string{"home/.cursor/mcp.json": "cursor/mcp.json"}, checkCursor(".cursor/mcp.json", true)},
		{"cursor project, no file", "cursor", Project, nil, checkCursor(".cursor/mcp.json", false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home, proj := setupFiles(t, tc.files)
			dir := filepath.Dir(home)
			before := tree(t, dir)
			o := Options{Agent: tc.agent, Scope: tc.scope, Home: home, Project: proj, Command: testCommand}

			changes := plan(t, o, false)
			if len(changes) == 0 {
				t.Fatal("install plans no change")
			}
			if err := Apply(changes); err != nil {
				t.Fatal(err)
			}
			tc.check(t, home, proj)
			for _, c := range changes {
				if c.Old == nil {
					continue
				}
				b, err := os.ReadFile(c.Path + BackupSuffix)
				if err != nil || !bytes.Equal(b, c.Old) {
					t.Errorf("backup of %s: %q, %v; want the old file", c.Path, b, err)
				}
				if fi, err := os.Stat(c.Path); runtime.GOOS != "windows" && (err != nil || fi.Mode().Perm() != 0o600) {
					t.Errorf("%s: mode %v, %v; want 0600 kept", c.Path, fi.Mode(), err)
				}
			}

			// Idempotent: a second install has nothing to do.
			if again := plan(t, o, false); len(again) != 0 {
				t.Errorf("second install plans %d changes:\n%s", len(again), Diff(again[0]))
			}

			rm := plan(t, o, true)
			if err := Apply(rm); err != nil {
				t.Fatal(err)
			}
			after := tree(t, dir)
			for p, want := range before {
				if after[p] != want {
					t.Errorf("%s after uninstall:\n%s", p, unified("want", "got", want, after[p]))
				}
			}
			for p := range after {
				if _, ok := before[p]; !ok && !strings.HasSuffix(p, BackupSuffix) {
					t.Errorf("uninstall left %s", p)
				}
			}
			if again := plan(t, o, true); len(again) != 0 {
				t.Errorf("second uninstall plans %d changes:\n%s", len(again), Diff(again[0]))
			}
		})
	}
}

func base(user bool, home, proj string) string {
	if user {
		return home
	}
	return proj
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseJSON(b, true); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	// Comments out, then the standard decoder: what the agent reads.
	clean := bytes.NewBuffer(stripComments(b))
	var m map[string]any
	if err := json.Unmarshal(clean.Bytes(), &m); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	return m
}

// stripComments removes // and /* */ comments outside strings.
func stripComments(b []byte) []byte {
	var out []byte
	in := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case in && c == '\\':
			out = append(out, c, b[i+1])
			i++
		case c == '"':
			in = !in
			out = append(out, c)
		case !in && c == '/' && i+1 < len(b) && b[i+1] == '/':
			for i+1 < len(b) && b[i+1] != '\n' {
				i++
			}
		case !in && c == '/' && i+1 < len(b) && b[i+1] == '*':
			i += 2
			for i+1 < len(b) && !(b[i] == '*' && b[i+1] == '/') {
				i++
			}
			i++ // the '/'
		default:
			out = append(out, c)
		}
	}
	return out
}

func dig(m any, path ...string) any {
	for _, k := range path {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[k]
	}
	return m
}

func wantServer(t *testing.T, m map[string]any, args ...string) {
	t.Helper()
	s := dig(m, "mcpServers", "agentbox")
	if dig(s, "command") != testCommand {
		t.Errorf("mcpServers.agentbox.command = %v", dig(s, "command"))
	}
	got, _ := json.Marshal(dig(s, "args"))
	want, _ := json.Marshal(append([]string{"mcp"}, args...))
	if !bytes.Equal(got, want) {
		t.Errorf("mcpServers.agentbox.args = %s, want %s", got, want)
	}
}

func checkClaude(mcpFile, settings string, user bool) func(t *testing.T, home, proj string) {
	return func(t *testing.T, home, proj string) {
		b := base(user, home, proj)
		wantServer(t, readJSON(t, filepath.Join(b, mcpFile)))
		s := readJSON(t, filepath.Join(b, settings))
		pre, _ := dig(s, "hooks", "PreToolUse").([]any)
		n := 0
		for _, g := range pre {
			if dig(g, "matcher") != "Bash" {
				continue
			}
			hs, _ := dig(g, "hooks").([]any)
			for _, h := range hs {
				cmd, _ := dig(h, "command").(string)
				if dig(h, "type") == "command" && cmd == "'"+testCommand+"' hook claude-pretooluse || exit 2" {
					n++
				}
			}
		}
		if n != 1 {
			t.Errorf("%d agentbox Bash hooks in %s, want 1: %v", n, settings, pre)
		}
	}
}

func checkCodex(file string, user bool) func(t *testing.T, home, proj string) {
	return func(t *testing.T, home, proj string) {
		b, err := os.ReadFile(filepath.Join(base(user, home, proj), file))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			MCP map[string]struct {
				Command string
				Args    []string
			} `toml:"mcp_servers"`
			Features map[string]any
		}
		if err := toml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%v\n%s", err, b)
		}
		if s := doc.MCP["agentbox"]; s.Command != testCommand || len(s.Args) != 1 || s.Args[0] != "mcp" {
			t.Errorf("mcp_servers.agentbox = %+v\n%s", s, b)
		}
		if doc.Features["shell_tool"] != false || doc.Features["unified_exec"] != false {
			t.Errorf("features = %v", doc.Features)
		}
	}
}

func checkGemini(file string, user bool, exclude ...string) func(t *testing.T, home, proj string) {
	return func(t *testing.T, home, proj string) {
		m := readJSON(t, filepath.Join(base(user, home, proj), file))
		wantServer(t, m)
		policy, err := os.ReadFile(filepath.Join(base(user, home, proj), filepath.Dir(file), "policies", "agentbox.toml"))
		var rules struct {
			Rule []struct {
				ToolName string
				Decision string
				Priority int
			}
		}
		if err != nil || toml.Unmarshal(policy, &rules) != nil || len(rules.Rule) != 1 || rules.Rule[0].ToolName != "run_shell_command" || rules.Rule[0].Decision != "deny" {
			t.Errorf("policies/agentbox.toml: %v\n%s", err, policy)
		}
		ex, _ := dig(m, exclude...).([]any)
		n := 0
		for _, e := range ex {
			if e == "run_shell_command" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s = %v, want run_shell_command once", strings.Join(exclude, "."), ex)
		}
	}
}

func checkCursor(file string, user bool) func(t *testing.T, home, proj string) {
	return func(t *testing.T, home, proj string) {
		wantServer(t, readJSON(t, filepath.Join(base(user, home, proj), file)), "-C", "${workspaceFolder}")
		h := readJSON(t, filepath.Join(base(user, home, proj), filepath.Dir(file), "hooks.json"))
		if h["version"] != float64(1) {
			t.Errorf("hooks.json version %v", h["version"])
		}
		pre, _ := dig(h, "hooks", "beforeShellExecution").([]any)
		n := 0
		for _, e := range pre {
			if dig(e, "command") == "'"+testCommand+"' hook cursor-beforeshell || exit 2" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("beforeShellExecution %v: want the agentbox hook once", pre)
		}
	}
}

// TestRefuse: files install cannot merge into safely are left alone with
// a message naming the file and the way out.
func TestRefuse(t *testing.T) {
	for _, tc := range []struct {
		name, agent, file, content, want string
	}{
		{"claude bad JSON", "claude", "home/.claude/settings.json", `{"hooks": {`, "cannot read it as JSON"},
		{"claude trailing comma", "claude", "home/.claude.json", "{\"a\": 1,}\n", "trailing comma"},
		{"claude comments", "claude", "home/.claude.json", "{// no\n}\n", "cannot read it as JSON"},
		{"claude hooks not an object", "claude", "home/.claude/settings.json", `{"hooks": []}`, "hooks is not an object"},
		{"claude PreToolUse not an array", "claude", "home/.claude/settings.json", `{"hooks": {"PreToolUse": {}}}`, "hooks.PreToolUse is not an array"},
		{"claude array document", "claude", "home/.claude.json", `[]`, "not a JSON object"},
		{"claude hooks disabled", "claude", "home/.claude/settings.json", `{"disableAllHooks": true}`, `"disableAllHooks": true`},
		{"gemini unterminated comment", "gemini", "home/.gemini/settings.json", "{/* x\n}", "unterminated /* comment"},
		{"gemini policy of the user's", "gemini", "home/.gemini/policies/agentbox.toml", "[[rule]]\ntoolName = \"x\"\n", "not written by agentbox install"},
		{"codex bad TOML", "codex", "home/.codex/config.toml", "model = \n", "not valid TOML"},
		{"codex shell on", "codex", "home/.codex/config.toml", "@codex/config-shell-on.toml", "features.shell_tool = true"},
		{"codex user's own agentbox", "codex", "home/.codex/config.toml", "@codex/config-mine.toml", "already has [mcp_servers.agentbox]"},
		{"codex inline mcp_servers", "codex", "home/.codex/config.toml", "mcp_servers = { x = { command = \"y\" } }\n", "would not be valid TOML"},
		{"codex dotted features", "codex", "home/.codex/config.toml", "features.web_search_request = true\n", "not set in a [features] table"},
		{"codex broken block", "codex", "home/.codex/config.toml", codexBegin + "\n[mcp_servers.agentbox]\n", "no end line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			home := filepath.Join(dir, "home")
			content := tc.content
			if f, ok := strings.CutPrefix(content, "@"); ok {
				b, err := os.ReadFile(filepath.Join("testdata", f))
				if err != nil {
					t.Fatal(err)
				}
				content = string(b)
			}
			p := filepath.Join(dir, tc.file)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			before := tree(t, dir)
			_, err := Plan(Options{Agent: tc.agent, Scope: User, Home: home, Command: testCommand}, false, os.ReadFile)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("Plan: %v; want an error naming %s and saying %q", err, p, tc.want)
			}
			if after := tree(t, dir); len(after) != len(before) || after[tc.file[len("home"):]] != before[tc.file[len("home"):]] {
				t.Errorf("files changed: %v", after)
			}
		})
	}
}

// TestUserEntryKept: an entry of the user's own named agentbox is replaced
// on install and put back, byte for byte, on uninstall.
func TestUserEntryKept(t *testing.T) {
	home, _ := setupFiles(t, nil)
	p := filepath.Join(home, ".cursor", "mcp.json")
	orig := "{\n  \"mcpServers\": {\n    \"agentbox\": {\"command\": \"agentbox\", \"args\": [\"mcp\", \"-C\", \"/src\"]}\n  }\n}\n"
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, []byte(orig), 0o644)
	o := Options{Agent: "cursor", Scope: User, Home: home, Command: testCommand}
	if err := Apply(plan(t, o, false)); err != nil {
		t.Fatal(err)
	}
	checkCursor(".cursor/mcp.json", true)(t, home, "")
	if err := Apply(plan(t, o, true)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != orig {
		t.Errorf("after uninstall:\n%s", unified("want", "got", orig, string(b)))
	}
}

// TestReinstallNewCommand: installing again with another program updates
// the entries in place and keeps the first backup.
func TestReinstallNewCommand(t *testing.T) {
	home, _ := setupFiles(t, map[string]string{"home/.claude/settings.json": "claude/settings.json", "home/.claude.json": "claude/claude.json"})
	orig, _ := os.ReadFile(filepath.Join(home, ".claude", "settings.json"))
	o := Options{Agent: "claude", Scope: User, Home: home, Command: "/old/agentbox"}
	if err := Apply(plan(t, o, false)); err != nil {
		t.Fatal(err)
	}
	o.Command = testCommand
	if err := Apply(plan(t, o, false)); err != nil {
		t.Fatal(err)
	}
	checkClaude(".claude.json", ".claude/settings.json", true)(t, home, "")
	b, _ := os.ReadFile(filepath.Join(home, ".claude", "settings.json"+BackupSuffix))
	if !bytes.Equal(b, orig) {
		t.Errorf("backup is not the file before the first install:\n%s", b)
	}
	if err := Apply(plan(t, o, true)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".claude", "settings.json")); !bytes.Equal(b, orig) {
		t.Errorf("after uninstall:\n%s", unified("want", "got", string(orig), string(b)))
	}
}

// TestSymlinkedConfig: a configuration file that is a symlink (dotfiles
// in a repository) stays one; the file it points to is updated.
func TestSymlinkedConfig(t *testing.T) {
	home, _ := setupFiles(t, map[string]string{"dotfiles/mcp.json": "cursor/mcp.json"})
	target := filepath.Join(filepath.Dir(home), "dotfiles", "mcp.json")
	link := filepath.Join(home, ".cursor", "mcp.json")
	os.MkdirAll(filepath.Dir(link), 0o755)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := Apply(plan(t, Options{Agent: "cursor", Scope: User, Home: home, Command: testCommand}, false)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("%s is no longer a symlink: %v", link, err)
	}
	checkCursor(".cursor/mcp.json", true)(t, home, "")
}

// TestDiff: the dry run's diff is a unified diff that says what changes.
func TestDiff(t *testing.T) {
	home, _ := setupFiles(t, map[string]string{"home/.cursor/mcp.json": "cursor/mcp.json"})
	c := plan(t, Options{Agent: "cursor", Scope: User, Home: home, Command: testCommand}, false)
	if len(c) != 2 {
		t.Fatalf("%d changes", len(c))
	}
	d := Diff(c[0])
	for _, want := range []string{"--- a" + c[0].Path + "\n", "+++ b" + c[0].Path + "\n", "@@ -9,6 +9,14 @@\n", "+    \"agentbox\": {\n", "+      \"command\": \"" + testCommand + "\",\n", "         \"Authorization\": \"Bearer ${env:USERJOT_API_TOKEN}\"\n"} {
		if !strings.Contains(d, want) {
			t.Errorf("diff lacks %q:\n%s", want, d)
		}
	}
	// Uninstall of a file install created: the diff removes all of it.
	home2, _ := setupFiles(t, nil)
	o := Options{Agent: "cursor", Scope: User, Home: home2, Command: testCommand}
	if err := Apply(plan(t, o, false)); err != nil {
		t.Fatal(err)
	}
	rm := plan(t, o, true)
	if len(rm) != 2 || rm[0].New != nil {
		t.Fatalf("uninstall plan: %+v", rm)
	}
	if d := Diff(rm[0]); !strings.Contains(d, "+++ /dev/null\n@@ -1,") || !strings.Contains(d, "-    \"agentbox\": {\n") {
		t.Errorf("uninstall diff:\n%s", d)
	}
	if got := unified("a", "b", "x\ny", "x\nz\n"); got != "--- a\n+++ b\n@@ -1,2 +1,2 @@\n x\n-y\n\\ No newline at end of file\n+z\n" {
		t.Errorf("no final newline: %q", got)
	}
}

func TestPlanErrors(t *testing.T) {
	for _, o := range []Options{
		{Agent: "vim", Scope: User, Command: "x"},
		{Agent: "claude", Scope: "system", Command: "x"},
		{Agent: "claude", Scope: User},
	} {
		if _, err := Plan(o, false, os.ReadFile); err == nil {
			t.Errorf("Plan(%+v) succeeded", o)
		}
	}
	// An unreadable file (here: a directory) is an error, not "missing".
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".cursor", "mcp.json"), 0o755)
	_, err := Plan(Options{Agent: "cursor", Scope: User, Home: home, Command: "x"}, false, os.ReadFile)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Plan over a directory: %v", err)
	}
}

// TestProjectSymlinks: a checkout cannot use install to write outside it:
// a symlinked configuration file that leads out is refused, and a symlink
// planted as the backup is replaced, not written through.
func TestProjectSymlinks(t *testing.T) {
	home, proj := setupFiles(t, map[string]string{"proj/.mcp.json": "claude/mcp.json", "home/victim.json": "claude/mcp-empty.json"})
	victim := filepath.Join(home, "victim.json")
	orig, _ := os.ReadFile(victim)
	o := Options{Agent: "claude", Scope: Project, Home: home, Project: proj, Command: testCommand}

	// The backup name is a symlink to the victim.
	if err := os.Symlink(victim, filepath.Join(proj, ".mcp.json"+BackupSuffix)); err != nil {
		t.Fatal(err)
	}
	changes := plan(t, o, false)
	if err := Confined(proj, changes); err == nil || !strings.Contains(err.Error(), "outside the project") {
		t.Fatalf("Confined: %v", err)
	}
	// Even written, the symlink is replaced, not followed.
	if err := Apply(changes); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); !bytes.Equal(b, orig) {
		t.Errorf("the backup was written through the symlink into %s:\n%s", victim, b)
	}
	if fi, err := os.Lstat(filepath.Join(proj, ".mcp.json"+BackupSuffix)); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("backup: %v %v", fi, err)
	}

	// .claude is a symlink out of the project.
	os.RemoveAll(filepath.Join(proj, ".claude"))
	if err := os.Symlink(home, filepath.Join(proj, ".claude")); err != nil {
		t.Fatal(err)
	}
	if err := Confined(proj, plan(t, o, false)); err == nil || !strings.Contains(err.Error(), "outside the project") {
		t.Errorf("Confined with .claude -> home: %v", err)
	}
	// A dangling symlink leading out counts as out.
	os.Remove(filepath.Join(proj, ".claude"))
	os.Symlink(filepath.Join(home, "nowhere"), filepath.Join(proj, ".claude"))
	if err := Confined(proj, plan(t, o, false)); err == nil {
		t.Errorf("Confined with a dangling .claude: nil")
	}
}
