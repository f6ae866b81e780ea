package policy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// secretHome plants credentials under a fresh home and makes it both
// $HOME and the account's home.
func secretHome(t *testing.T) (home string, getenv func(string) string) {
	t.Helper()
	home = realTemp(t)
	for _, f := range []string{".ssh/id_ed25519", ".ssh/id_ed25519.pub", ".ssh/known_hosts", ".ssh/config",
		".aws/credentials", ".aws/config", ".gitconfig", ".config/gh/hosts.yml", ".config/gh/config.yml", ".bash_history", ".netrc"} {
		p := filepath.Join(home, f)
		mkdirs(t, filepath.Dir(p))
		if err := os.WriteFile(p, []byte("secret"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := accountHome
	accountHome = func() string { return home }
	t.Cleanup(func() { accountHome = old })
	return home, func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}
}

func hiddenPaths(p *Policy, home string) map[string]Hidden {
	out := map[string]Hidden{}
	for _, h := range p.Hidden() {
		r, err := filepath.Rel(home, h.Path)
		if err != nil || strings.HasPrefix(r, "..") {
			r = h.Path
		}
		out[filepath.ToSlash(r)] = h
	}
	return out
}

func TestHiddenDefaults(t *testing.T) {
	home, getenv := secretHome(t)
	ws := filepath.Join(home, "ws")
	mkdirs(t, ws)
	p, err := resolveEnv(Options{Cwd: ws}, getenv, "linux")
	if err != nil {
		t.Fatal(err)
	}
	h := hiddenPaths(p, home)
	for _, want := range []string{".ssh", ".aws", ".config/gh/hosts.yml", ".bash_history", ".netrc"} {
		if _, ok := h[want]; !ok {
			t.Errorf("%s not hidden; hidden: %v", want, p.Hidden())
		}
	}
	for _, no := range []string{".gitconfig", ".config/gh/config.yml", ".config/gh"} {
		if _, ok := h[no]; ok {
			t.Errorf("%s hidden", no)
		}
	}
	ssh := h[".ssh"]
	wantReopen := []string{filepath.Join(home, ".ssh/config"), filepath.Join(home, ".ssh/id_ed25519.pub"), filepath.Join(home, ".ssh/known_hosts")}
	if ssh.Kind != Dir || !slices.Equal(ssh.Reopen, wantReopen) {
		t.Errorf(".ssh = %+v, want a dir re-opening %q", ssh, wantReopen)
	}
	if h[".netrc"].Kind != File {
		t.Errorf(".netrc kind %v", h[".netrc"].Kind)
	}
	// read-only mode hides the same; danger-full-access nothing.
	ro, err := resolveEnv(Options{Cwd: ws, Mode: ReadOnly}, getenv, "linux")
	if err != nil || len(ro.Hidden()) != len(p.Hidden()) {
		t.Errorf("read-only: %v, %d hidden, want %d", err, len(ro.Hidden()), len(p.Hidden()))
	}
	full, err := resolveEnv(Options{Cwd: ws, Mode: DangerFullAccess}, getenv, "linux")
	if err != nil || len(full.Hidden()) != 0 {
		t.Errorf("danger-full-access: %v, %v", err, full.Hidden())
	}
	// Unreachable paths are nothing to hide: a file where a directory
	// is expected, a home this user cannot search.
	if err := os.WriteFile(filepath.Join(home, ".kube"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := resolveEnv(Options{Cwd: ws, DenyRead: []string{"~/.kube/config"}}, getenv, "linux"); err != nil {
		t.Errorf("a file on the way: %v", err)
	}
	// default_deny_read = false drops the list.
	cfg, err := ParseConfig("c.toml", []byte("[filesystem]\ndefault_deny_read = false\n"))
	if err != nil {
		t.Fatal(err)
	}
	off, err := resolveEnv(Options{Cwd: ws, Config: cfg}, getenv, "linux")
	if err != nil || len(off.Hidden()) != 0 {
		t.Errorf("default_deny_read=false: %v, %v", err, off.Hidden())
	}
}

func TestDenyAllowRead(t *testing.T) {
	home, getenv := secretHome(t)
	ws := filepath.Join(home, "ws")
	extra := filepath.Join(home, "extra")
	mkdirs(t, filepath.Join(ws, "sub/deep"), extra, filepath.Join(home, "work/secrets"))
	for _, f := range []string{filepath.Join(ws, "a.pem"), filepath.Join(ws, "sub/deep/.b.pem"), filepath.Join(extra, "c.pem"), filepath.Join(ws, ".env"), filepath.Join(home, "elsewhere.pem")} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := ParseConfig("c.toml", []byte(`[filesystem]
deny_read = ["~/work/secrets", "**/*.pem"]
allow_read = ["~/.aws/credentials"]
`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := resolveEnv(Options{Cwd: ws, AddDirs: []string{extra}, Config: cfg, DenyRead: []string{".env"}, AllowRead: []string{"~/.bash_history"}}, getenv, "linux")
	if err != nil {
		t.Fatal(err)
	}
	h := hiddenPaths(p, home)
	for _, want := range []string{"work/secrets", "ws/a.pem", "ws/sub/deep/.b.pem", "extra/c.pem", "ws/.env", ".aws"} {
		if _, ok := h[want]; !ok {
			t.Errorf("%s not hidden: %v", want, p.Hidden())
		}
	}
	// Relative patterns match under the roots only; allow_read re-opens.
	for _, no := range []string{"elsewhere.pem", ".bash_history"} {
		if _, ok := h[no]; ok {
			t.Errorf("%s hidden", no)
		}
	}
	if got := h[".aws"].Reopen; !slices.Equal(got, []string{filepath.Join(home, ".aws/credentials")}) {
		t.Errorf(".aws re-opens %q, want credentials alone", got)
	}
	// A file that appears later is hidden by the next expansion.
	late := filepath.Join(ws, "sub/late.pem")
	if err := os.WriteFile(late, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	now, err := p.HiddenNow()
	if err != nil || !slices.ContainsFunc(now, func(x Hidden) bool { return x.Path == late }) {
		t.Errorf("HiddenNow: %v, lacks %s", err, late)
	}
	// Past the depth bound the run fails instead of leaving a match readable.
	deepCfg, _ := ParseConfig("c.toml", []byte("[filesystem]\nglob_scan_max_depth = 1\ndeny_read = [\"**/*.pem\"]\n"))
	if _, err := resolveEnv(Options{Cwd: ws, Config: deepCfg}, getenv, "linux"); err == nil || !strings.Contains(err.Error(), "glob_scan_max_depth") {
		t.Errorf("over depth: %v", err)
	}
	// A rule that hides the workspace fails.
	if _, err := resolveEnv(Options{Cwd: ws, DenyRead: []string{"~/ws"}}, getenv, "linux"); err == nil || !strings.Contains(err.Error(), "workspace") {
		t.Errorf("hiding the workspace: %v", err)
	}
	// --add-dir ~/.config keeps hosts.yml hidden and works.
	cp, err := resolveEnv(Options{Cwd: ws, AddDirs: []string{filepath.Join(home, ".config")}}, getenv, "linux")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := hiddenPaths(cp, home)[".config/gh/hosts.yml"]; !ok {
		t.Errorf("--add-dir ~/.config: hosts.yml not hidden")
	}
}

func TestSecretsConfig(t *testing.T) {
	ok := `[filesystem]
deny_read = ["~/x", "**/*.pem"]
allow_read = ["~/.aws/credentials"]
default_deny_read = true
glob_scan_max_depth = 3
[shell_environment_policy]
inherit = "core"
exclude = ["AWS_*"]
include_only = []
set = { CI = "1" }
ignore_default_excludes = false
`
	cfg, err := ParseConfig("c.toml", []byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	_, getenv := secretHome(t)
	p, err := resolveEnv(Options{Cwd: realTemp(t), Config: cfg, PassEnv: []string{"GITHUB_TOKEN"}}, getenv, "linux")
	if err != nil {
		t.Fatal(err)
	}
	e := p.Env()
	if e.Inherit != "core" || !slices.Equal(e.Exclude, []string{"AWS_*"}) || len(e.Set) != 1 || e.Set[0] != (EnvVar{Name: "CI", Value: "1"}) || !slices.Equal(e.Pass, []string{"GITHUB_TOKEN"}) {
		t.Errorf("env policy = %+v", e)
	}
	out, wh := p.FilterEnv([]string{"PATH=/bin", "GITHUB_TOKEN=t", "OPENAI_API_KEY=k", "LANG=C"})
	if !slices.Equal(out, []string{"PATH=/bin", "CI=1", "GITHUB_TOKEN=t"}) || !slices.Equal(wh, []string{"LANG", "OPENAI_API_KEY"}) {
		t.Errorf("FilterEnv = %q, withheld %q", out, wh)
	}
	if p.GlobScanMaxDepth() != 3 {
		t.Errorf("depth %d", p.GlobScanMaxDepth())
	}
	for _, bad := range []struct{ toml, want string }{
		{"[filesystem]\ndeny_reed = []\n", "filesystem.deny_reed"},
		{"[shell_environment_policy]\ninherit = \"some\"\n", "shell_environment_policy.inherit"},
		{"[shell_environment_policy]\nexclude = [\"[\"]\n", "shell_environment_policy.exclude"},
		{"[shell_environment_policy]\nfoo = 1\n", "shell_environment_policy.foo"},
		{"[filesystem]\nallow_read = [\"~/*.x\"]\n", "filesystem.allow_read"},
		{"[filesystem]\ndeny_read = [\"~bob/x\"]\n", "filesystem.deny_read"},
		{"[filesystem]\nglob_scan_max_depth = 0\n", "glob_scan_max_depth"},
	} {
		if _, err := ParseConfig("c.toml", []byte(bad.toml)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want it to name %s", bad.toml, err, bad.want)
		}
	}
}
