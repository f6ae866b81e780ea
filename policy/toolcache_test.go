package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/fspath"
)

func TestToolCacheDefaults(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	tests := []struct {
		goos   string
		getenv func(string) string
		want   map[string]string
	}{
		{"linux", env("HOME", "/h"), map[string]string{
			"go-build": "/h/.cache/go-build", "go-mod": "/h/go/pkg/mod", "npm": "/h/.npm",
			"yarn": "/h/.cache/yarn", "pnpm-store": "/h/.local/share/pnpm/store", "pip": "/h/.cache/pip",
			"uv": "/h/.cache/uv", "cargo-registry": "/h/.cargo/registry", "cargo-git": "/h/.cargo/git",
			"maven": "/h/.m2/repository", "gradle-caches": "/h/.gradle/caches", "gradle-wrapper": "/h/.gradle/wrapper",
			"ccache": "/h/.cache/ccache", "sccache": "/h/.cache/sccache",
		}},
		{"linux", env("HOME", "/h", "XDG_CACHE_HOME", "/c", "GOPATH", "/gp:/other", "CARGO_HOME", "/cg",
			"GOCACHE", "/gc", "XDG_DATA_HOME", "/d", "GRADLE_USER_HOME", "/gr", "PIP_CACHE_DIR", "relative"), map[string]string{
			"go-build": "/gc", "go-mod": "/gp/pkg/mod", "pip": "/c/pip", "uv": "/c/uv", "pnpm-store": "/d/pnpm/store",
			"cargo-registry": "/cg/registry", "gradle-caches": "/gr/caches", "ccache": "/c/ccache",
		}},
		{"darwin", env("HOME", "/Users/u"), map[string]string{
			"go-build": "/Users/u/Library/Caches/go-build", "pip": "/Users/u/Library/Caches/pip",
			"uv": "/Users/u/.cache/uv", "yarn": "/Users/u/Library/Caches/Yarn", "pnpm-store": "/Users/u/Library/pnpm/store",
			"sccache": "/Users/u/Library/Caches/Mozilla.sccache",
		}},
		{"windows", env("USERPROFILE", `C:\Users\u`, "LOCALAPPDATA", `C:\Users\u\AppData\Local`), map[string]string{
			"go-build": `C:\Users\u\AppData\Local\go-build`, "npm": `C:\Users\u\AppData\Local\npm-cache`,
			"pip": `C:\Users\u\AppData\Local\pip\Cache`, "uv": `C:\Users\u\AppData\Local\uv\cache`,
			"cargo-registry": `C:\Users\u\.cargo\registry`, "go-mod": `C:\Users\u\go\pkg\mod`,
		}},
	}
	for _, tt := range tests {
		e := cacheEnv{getenv: tt.getenv, goos: tt.goos, home: tt.getenv("HOME")}
		if tt.goos == "windows" {
			e.home = tt.getenv("USERPROFILE")
		}
		got := map[string]string{}
		for _, d := range knownCaches {
			got[d.Name] = d.Path(e)
		}
		for name, want := range tt.want {
			if got[name] != want {
				t.Errorf("%s %s: got %q, want %q", tt.goos, name, got[name], want)
			}
		}
	}
}

// No cache in the table may be, contain or relocate a directory of
// programs (~/.cargo/bin, ~/go/bin, ~/.local/bin, npm's prefix).
func TestToolCacheNeverBin(t *testing.T) {
	e := cacheEnv{getenv: func(string) string { return "" }, goos: "linux", home: "/h"}
	for _, d := range knownCaches {
		p := d.Path(e)
		for _, bin := range []string{"/h/.cargo/bin", "/h/go/bin", "/h/.local/bin", "/h/.npm-global/bin"} {
			if fspath.Within(bin, p) || fspath.Within(p, bin) {
				t.Errorf("%s at %s overlaps %s", d.Name, p, bin)
			}
		}
		if d.Env == "CARGO_HOME" || d.Env == "GOPATH" || d.Env == "npm_config_prefix" {
			t.Errorf("%s relocates with %s, which moves a bin directory too", d.Name, d.Env)
		}
	}
}

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
	p, err := Resolve(Options{Cwd: ws, getenv: getenv, goos: "linux", Config: &Config{}})
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
	mv := byName["maven"]
	if got := mv.PrivateEnv([]string{"MAVEN_OPTS=-Xmx1g"}); got != "MAVEN_OPTS=-Xmx1g -Dmaven.repo.local="+mv.Private() {
		t.Errorf("maven env %q", got)
	}
	if got := byName["cargo-registry"].PrivateEnv(nil); got != "" {
		t.Errorf("cargo must not be relocated (CARGO_HOME holds bin/): %q", got)
	}

	off := "off"
	p, err = Resolve(Options{Cwd: ws, getenv: getenv, goos: "linux", Config: &Config{SandboxWorkspaceWrite: WorkspaceWriteSection{ToolCaches: &off}}})
	if err != nil || len(p.ToolCaches()) != 0 {
		t.Errorf("tool_caches = off: %v, %d caches", err, len(p.ToolCaches()))
	}
	if _, err := ParseConfig("c.toml", []byte("[sandbox_workspace_write]\ntool_caches = \"shared\"\n")); err == nil || !strings.Contains(err.Error(), "tool_caches") {
		t.Errorf("bad tool_caches accepted: %v", err)
	}
}
