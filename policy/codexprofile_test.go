package policy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func profileConfig(t *testing.T, src string) *Config {
	t.Helper()
	c, err := ParseConfig("/etc/codex.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeFiles(t *testing.T, root string, names ...string) {
	t.Helper()
	for _, n := range names {
		p := filepath.Join(root, n)
		mkdirs(t, filepath.Dir(p))
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// Codex's own documented example: the workspace writable, .env files
// in it hidden, the rest read as before (the default hidden list too).
func TestProfileCodexExample(t *testing.T) {
	home, getenv := secretHome(t)
	ws := filepath.Join(home, "ws")
	writeFiles(t, ws, ".env", "app/prod.env", "app/main.go", "a/b/c/deep.env", "a/b/c/d/e/deeper.env")
	cfg := profileConfig(t, `
default_permissions = "workspace"

[permissions.workspace.filesystem]
":project_roots" = { "." = "write", "**/*.env" = "none" }
glob_scan_max_depth = 3
`)
	if cfg.ProfileName() != "workspace" {
		t.Errorf("profile %q", cfg.ProfileName())
	}
	p, err := resolveEnv(Options{Cwd: ws, Config: cfg}, getenv, "linux")
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode() != WorkspaceWrite || !p.IsWritable(filepath.Join(ws, "app/main.go")) || p.Network() {
		t.Errorf("mode %s, writable %v, network %v", p.Mode(), p.IsWritable(filepath.Join(ws, "app/main.go")), p.Network())
	}
	h := hiddenPaths(p, home)
	for _, want := range []string{"ws/.env", "ws/app/prod.env", "ws/a/b/c/deep.env", "ws/a/b/c/d/e/deeper.env", ".ssh", ".aws"} {
		if _, ok := h[want]; !ok {
			t.Errorf("%s not hidden; hidden %v", want, slices.Collect(mapKeys(h)))
		}
	}
	if _, ok := h["ws/app/main.go"]; ok {
		t.Error("main.go hidden")
	}
	// glob_scan_max_depth = 3 does not make a deeper workspace fail:
	// agentbox's own bound applies, and the deeper match is hidden too.
	if p.GlobScanMaxDepth() != 0 {
		t.Errorf("depth %d", p.GlobScanMaxDepth())
	}
	// Without :tmpdir and :slash_tmp the profile writes no temp dir.
	if len(p.f.PrivateTemps) != 0 || len(p.SharedTemps()) != 0 {
		t.Errorf("temps %v %v", p.f.PrivateTemps, p.SharedTemps())
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestProfileTranslation(t *testing.T) {
	home, getenv := secretHome(t)
	ws := filepath.Join(home, "ws")
	lib := filepath.Join(home, "lib")
	cache := filepath.Join(home, ".cache/tool")
	secret := filepath.Join(home, "vault")
	writeFiles(t, ws, "lefthook.yml", ".github/workflows/ci.yml", "src/x.go")
	writeFiles(t, lib, "k.pem", "ok.txt")
	writeFiles(t, secret, "a", "public/readme")
	mkdirs(t, cache)
	cfg := profileConfig(t, `
default_permissions = "dev"

[permissions.base]
extends = ":workspace"
[permissions.base.filesystem]
"~/.cache/tool" = "write"

[permissions.dev]
extends = "base"
[permissions.dev.workspace_roots]
"~/lib" = true
[permissions.dev.filesystem]
":tmpdir" = "read"
"~/vault" = "deny"
"~/vault/public" = "read"
[permissions.dev.filesystem.":workspace_roots"]
".github/**" = "read"
"lefthook.yml" = "read"
"**/*.pem" = "none"
[permissions.dev.network]
enabled = true
domains = { "**.example.com" = "allow" }
`)
	p, err := resolveEnv(Options{Cwd: ws, Config: cfg}, getenv, "linux")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.WritableRoots(), lib) || !slices.Contains(p.WritableRoots(), cache) {
		t.Errorf("writable roots %v", p.WritableRoots())
	}
	for _, ro := range []string{"lefthook.yml", ".github/workflows/ci.yml"} {
		if p.IsWritable(filepath.Join(ws, ro)) {
			t.Errorf("%s writable", ro)
		}
	}
	if !p.IsWritable(filepath.Join(ws, "src/x.go")) {
		t.Error("src/x.go not writable")
	}
	h := hiddenPaths(p, home)
	for _, want := range []string{"lib/k.pem", "vault"} {
		if _, ok := h[want]; !ok {
			t.Errorf("%s not hidden: %v", want, p.Hidden())
		}
	}
	if v := h["vault"]; !slices.Contains(v.Reopen, filepath.Join(secret, "public")) {
		t.Errorf("vault re-opens %v", v.Reopen)
	}
	if got := p.AllowedDomains(); !slices.Equal(got, []string{"example.com", "*.example.com"}) || p.Network() {
		t.Errorf("domains %v network %v", got, p.Network())
	}
	// extends = ":workspace" keeps /tmp; the child's ":tmpdir" = "read"
	// drops $TMPDIR (unset here anyway).
	if len(p.f.PrivateTemps) == 0 {
		t.Error("no private /tmp")
	}
}

func TestProfileModes(t *testing.T) {
	_, getenv := secretHome(t)
	ws := realTemp(t)
	for _, tc := range []struct {
		src  string
		mode Mode
		net  bool
	}{
		{`default_permissions = ":read-only"`, ReadOnly, false},
		{`default_permissions = ":workspace"`, WorkspaceWrite, false},
		{`default_permissions = ":danger-full-access"`, DangerFullAccess, true},
		{"default_permissions = \"p\"\n[permissions.p.filesystem]\n\":minimal\" = \"read\"\n[permissions.p.network]\nenabled = true", ReadOnly, true},
	} {
		p, err := resolveEnv(Options{Cwd: ws, Config: profileConfig(t, tc.src)}, getenv, "linux")
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		if p.Mode() != tc.mode || p.Network() != tc.net {
			t.Errorf("%s: mode %s network %v", tc.src, p.Mode(), p.Network())
		}
	}
	// A flag still overrides the file's mode.
	p, err := resolveEnv(Options{Cwd: ws, Mode: ReadOnly, Config: profileConfig(t, `default_permissions = ":workspace"`)}, getenv, "linux")
	if err != nil || p.Mode() != ReadOnly {
		t.Errorf("%v %v", p, err)
	}
}

func TestProfileErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"sandbox_mode = \"read-only\"\ndefault_permissions = \":workspace\"", "default_permissions (Codex's permission profiles) and sandbox_mode in one file"},
		{"[sandbox_workspace_write]\nnetwork_access = true\n[permissions.p.filesystem]\n\":root\" = \"read\"", "[permissions] (Codex's permission profiles) and [sandbox_workspace_write]"},
		{"default_permissions = \"p\"\n[permissions.p.network]\nenabled = true\ndomains = { \"exa mple.com\" = \"allow\" }", "permissions.p.network.domains"},
		{"default_permissions = \"p\"\n[permissions.p.filesystem]\n\":root\" = \"none\"", "config /etc/codex.toml: key permissions.p.filesystem.\":root\""},
		{"default_permissions = 3", "default_permissions"},
	} {
		_, err := ParseConfig("/etc/codex.toml", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n error %v, want %q", tc.src, err, tc.want)
		}
	}
	// A read glob inside a writable root cannot be kept read-only.
	_, getenv := secretHome(t)
	ws := realTemp(t)
	cfg := profileConfig(t, "default_permissions = \"p\"\n[permissions.p.filesystem]\n\":project_roots\" = { \".\" = \"write\", \"**/*.lock\" = \"read\" }")
	if _, err := resolveEnv(Options{Cwd: ws, Config: cfg}, getenv, "linux"); err == nil || !strings.Contains(err.Error(), "a glob kept read-only") {
		t.Errorf("error %v", err)
	}
	// A path for another system, and a writable path that confines
	// nothing, named by the profile.
	cfg = profileConfig(t, "default_permissions = \"p\"\n[permissions.p.filesystem]\n\":project_roots\" = \"write\"\n'C:\\x' = \"write\"")
	if _, err := resolveEnv(Options{Cwd: ws, Config: cfg}, getenv, "linux"); err == nil || !strings.Contains(err.Error(), "not an absolute path on linux") {
		t.Errorf("error %v", err)
	}
	cfg = profileConfig(t, "default_permissions = \"p\"\n[permissions.p.filesystem]\n\":project_roots\" = \"write\"\n\"~\" = \"write\"")
	if _, err := resolveEnv(Options{Cwd: ws, Config: cfg}, getenv, "linux"); err == nil || !strings.Contains(err.Error(), "a writable path of profile p in /etc/codex.toml") {
		t.Errorf("error %v", err)
	}
	// A Config built in Go is checked too.
	c := &Config{DefaultPermissions: new("nope")}
	if _, err := resolveEnv(Options{Cwd: ws, Config: c}, getenv, "linux"); err == nil || !strings.Contains(err.Error(), `no profile "nope"`) {
		t.Errorf("error %v", err)
	}
}
