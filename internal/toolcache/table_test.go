package toolcache

import (
	"slices"
	"testing"

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
			"go-sumdb": "/h/go/pkg/sumdb", "go-bin": "/h/go/bin", "pnpm-cache": "/h/.cache/pnpm",
			"pnpm-state": "/h/.local/state/pnpm", "cargo-home": "/h/.cargo", "cargo-install": "/h/.cargo/bin",
		}},
		{"linux", env("HOME", "/h", "XDG_CACHE_HOME", "/c", "GOPATH", "/gp:/other", "CARGO_HOME", "/cg",
			"GOCACHE", "/gc", "XDG_DATA_HOME", "/d", "GRADLE_USER_HOME", "/gr", "PIP_CACHE_DIR", "relative"), map[string]string{
			"go-build": "/gc", "go-mod": "/gp/pkg/mod", "pip": "/c/pip", "uv": "/c/uv", "pnpm-store": "/d/pnpm/store",
			"cargo-registry": "/cg/registry", "gradle-caches": "/gr/caches", "ccache": "/c/ccache",
			"go-sumdb": "/gp/pkg/sumdb", "go-bin": "/gp/bin", "pnpm-cache": "/c/pnpm", "cargo-home": "/cg", "cargo-install": "/cg/bin",
		}},
		{"linux", env("HOME", "/h", "GOBIN", "/gb", "CARGO_INSTALL_ROOT", "/ci", "XDG_STATE_HOME", "/s", "GOMODCACHE", "/m"), map[string]string{
			"go-bin": "/gb", "cargo-install": "/ci/bin", "pnpm-state": "/s/pnpm", "go-mod": "/m", "go-sumdb": "/h/go/pkg/sumdb",
		}},
		{"darwin", env("HOME", "/Users/u"), map[string]string{
			"go-build": "/Users/u/Library/Caches/go-build", "pip": "/Users/u/Library/Caches/pip",
			"uv": "/Users/u/.cache/uv", "yarn": "/Users/u/Library/Caches/Yarn", "pnpm-store": "/Users/u/Library/pnpm/store",
			"sccache":    "/Users/u/Library/Caches/Mozilla.sccache",
			"pnpm-cache": "/Users/u/Library/Caches/pnpm", "pnpm-state": "/Users/u/.pnpm-state",
		}},
		{"windows", env("USERPROFILE", `C:\Users\u`, "LOCALAPPDATA", `C:\Users\u\AppData\Local`), map[string]string{
			"go-build": `C:\Users\u\AppData\Local\go-build`, "npm": `C:\Users\u\AppData\Local\npm-cache`,
			"pip": `C:\Users\u\AppData\Local\pip\Cache`, "uv": `C:\Users\u\AppData\Local\uv\cache`,
			"cargo-registry": `C:\Users\u\.cargo\registry`, "go-mod": `C:\Users\u\go\pkg\mod`,
			"go-sumdb": `C:\Users\u\go\pkg\sumdb`, "go-bin": `C:\Users\u\go\bin`, "cargo-install": `C:\Users\u\.cargo\bin`,
			"pnpm-cache": `C:\Users\u\AppData\Local\pnpm-cache`, "pnpm-state": `C:\Users\u\AppData\Local\pnpm-state`,
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

// No entry that may be overlaid is, contains or lies in a directory of
// programs (~/.cargo/bin, ~/go/bin, ~/.local/bin, npm's prefix): those
// are the programs entries, each exactly such a directory and always
// private, and the tools' homes (CARGO_HOME), never overlaid. A variable
// that also moves a tool's default directory of programs (GOPATH,
// CARGO_HOME) is used only beside the tool's programs entry, which sets
// that directory explicitly.
func TestToolCacheNeverBin(t *testing.T) {
	e := cacheEnv{getenv: func(string) string { return "" }, goos: "linux", home: "/h"}
	bins := []string{"/h/.cargo/bin", "/h/go/bin", "/h/.local/bin", "/h/.npm-global/bin"}
	programs := map[string]bool{}
	for _, d := range knownCaches {
		if d.Programs {
			programs[d.Env] = true
			if !slices.Contains(bins, d.Path(e)) {
				t.Errorf("programs entry %s at %s is not a directory of programs", d.Name, d.Path(e))
			}
		}
	}
	movesBin := map[string]string{"GOPATH": "GOBIN", "CARGO_HOME": "CARGO_INSTALL_ROOT"}
	for _, d := range knownCaches {
		if d.Programs {
			continue
		}
		if explicit, ok := movesBin[d.Env]; ok && !programs[explicit] {
			t.Errorf("%s relocates with %s, which moves a bin directory too, and no programs entry sets %s", d.Name, d.Env, explicit)
		}
		if d.Env == "npm_config_prefix" {
			t.Errorf("%s relocates npm's prefix", d.Name)
		}
		if len(d.Covers) > 0 {
			continue // never overlaid
		}
		p := d.Path(e)
		for _, bin := range bins {
			if fspath.Within(bin, p) || fspath.Within(p, bin) {
				t.Errorf("%s at %s overlaps %s", d.Name, p, bin)
			}
		}
	}
}
