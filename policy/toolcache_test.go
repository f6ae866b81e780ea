package policy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/agentdirs"
)

func TestToolCacheResolve(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	ws := filepath.Join(dir, "ws")
	real := filepath.Join(dir, "realcache")
	for _, d := range []string{home, ws, filepath.Join(real, "go-build")} {
		os.MkdirAll(d, 0o755)
	}
	os.Symlink(real, filepath.Join(home, ".cache"))
	getenv := func(k string) string {
		switch k {
		case "HOME":
			return home
		case "MAVEN_OPTS":
			return "-Xmx1g"
		}
		return ""
	}
	p, err := resolveEnv(Options{Cwd: ws, Config: &Config{}}, getenv, "linux")
	if err != nil {
		t.Fatal(err)
	}
	if p.ToolCacheMode() != CachesOverlay {
		t.Errorf("default mode %q, want overlay", p.ToolCacheMode())
	}
	byName := map[string]ToolCache{}
	for _, c := range p.ToolCaches() {
		byName[c.Name] = c
	}
	gb := byName["go-build"]
	realGB, _ := filepath.EvalSymlinks(filepath.Join(real, "go-build"))
	if !gb.HostExists || gb.Host != realGB || gb.Named != filepath.Join(home, ".cache", "go-build") {
		t.Errorf("go-build resolved to %+v, want host %s", gb, realGB)
	}
	state := agentdirs.State(getenv, "linux")
	if !strings.HasPrefix(gb.Layer, agentdirs.ToolCacheRoot(state)+"/") {
		t.Errorf("layer %s not under %s", gb.Layer, agentdirs.ToolCacheRoot(state))
	}
	if byName["npm"].HostExists {
		t.Errorf("npm cache does not exist but HostExists is set")
	}
	if got := (ToolCache{Name: "maven"}).EnvValue("/p/maven", "-Xmx1g"); got != "-Xmx1g -Dmaven.repo.local=/p/maven" {
		t.Errorf("maven env %q", got)
	}
	if got := (ToolCache{Name: "go-build"}).EnvValue("/p/go-build", "/old"); got != "/p/go-build" {
		t.Errorf("go-build env %q", got)
	}
	if env := byName["cargo-registry"].Env; env != "" {
		t.Errorf("cargo's registry must not be relocated alone (only CARGO_HOME moves it): %q", env)
	}
	if c := byName["cargo-home"]; c.HostExists || c.Kept != "" || !slices.Equal(c.Covers, []string{"cargo-registry", "cargo-git"}) {
		t.Errorf("cargo-home %+v", c)
	}
	if c := byName["go-bin"]; !c.Programs || c.Env != "GOBIN" || c.Host != filepath.Join(home, "go", "bin") {
		t.Errorf("go-bin %+v", c)
	}
	if c := byName["yarn"]; !slices.Equal(c.Settings, []string{"YARN_DISABLE_SELF_UPDATE_CHECK=true"}) {
		t.Errorf("yarn settings %v", c.Settings)
	}
	// A configuration file in the host's Cargo home is what a private one
	// would lose: it is recorded.
	os.MkdirAll(filepath.Join(home, ".cargo"), 0o755)
	os.WriteFile(filepath.Join(home, ".cargo", "config.toml"), nil, 0o644)
	p2, err := resolveEnv(Options{Cwd: ws, Config: &Config{}}, getenv, "linux")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p2.ToolCaches() {
		if c.Name == "cargo-home" && (!c.HostExists || c.Kept != filepath.Join(home, ".cargo", "config.toml")) {
			t.Errorf("cargo-home with a config.toml: %+v", c)
		}
	}
	// The policy's caches are its own: changing a copy changes nothing.
	cs := p2.ToolCaches()
	for i := range cs {
		if len(cs[i].Settings) > 0 {
			cs[i].Settings[0] = "X=1"
		}
	}
	for _, c := range p2.ToolCaches() {
		if c.Name == "yarn" && c.Settings[0] != "YARN_DISABLE_SELF_UPDATE_CHECK=true" {
			t.Errorf("ToolCaches shares its slices: %v", c.Settings)
		}
	}

	off := "off"
	p, err = resolveEnv(Options{Cwd: ws, Config: &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{ToolCaches: &off}}}, getenv, "linux")
	if err != nil || len(p.ToolCaches()) != 0 {
		t.Errorf("tool_caches = off: %v, %d caches", err, len(p.ToolCaches()))
	}
	if _, err := ParseConfig("c.toml", []byte("[sandbox_workspace_write]\ntool_caches = \"shared\"\n")); err == nil || !strings.Contains(err.Error(), "tool_caches") {
		t.Errorf("bad tool_caches accepted: %v", err)
	}
}
