package toolcache_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/internal/toolcache"
	"github.com/agentbox/agentbox/policy"
)

// TestPrivateEnv checks the paths derived from a cache's layer and the
// variable that relocates it, Maven's keeping what MAVEN_OPTS held.
func TestPrivateEnv(t *testing.T) {
	layer := filepath.Join("/state", "caches", "ws", "maven")
	mv := policy.ToolCache{Name: "maven", Env: "MAVEN_OPTS", Layer: layer}
	if got, want := toolcache.PrivateDir(mv), filepath.Join("/state", "caches", "ws", "private", "maven"); got != want {
		t.Errorf("PrivateDir = %q, want %q", got, want)
	}
	if got, want := toolcache.UpperDir(mv), filepath.Join(layer, "upper"); got != want {
		t.Errorf("UpperDir = %q, want %q", got, want)
	}
	if got, want := toolcache.PrivateEnv(mv, []string{"MAVEN_OPTS=-Xmx1g"}), "MAVEN_OPTS=-Xmx1g -Dmaven.repo.local="+toolcache.PrivateDir(mv); got != want {
		t.Errorf("PrivateEnv = %q, want %q", got, want)
	}
	gb := policy.ToolCache{Name: "go-build", Env: "GOCACHE", Layer: layer}
	if got := toolcache.PrivateEnvAt(gb, "/in/sandbox", []string{"GOCACHE=/old"}); got != "GOCACHE=/in/sandbox" {
		t.Errorf("PrivateEnvAt = %q", got)
	}
	if got := toolcache.PrivateEnv(policy.ToolCache{Name: "cargo-registry", Layer: layer}, nil); got != "" {
		t.Errorf("a cache without a variable got %q", got)
	}
}

// testPolicy is a workspace-write policy over ws with caches cs, their
// layers under /state/caches/ws.
func testPolicy(ws string, mode policy.ToolCacheMode, cs ...policy.ToolCache) *policy.Policy {
	for i := range cs {
		cs[i].Layer = filepath.Join("/state", "caches", "ws", cs[i].Name)
	}
	return policytest.New(policytest.Fields{Mode: policy.WorkspaceWrite, Cwd: ws, WritableRoots: []string{ws}, ToolCacheMode: mode, ToolCaches: cs})
}

func decisions(p *policy.Policy, overlays bool) map[string]toolcache.Decision {
	m := map[string]toolcache.Decision{}
	for _, d := range toolcache.Decide(p.ToolCacheInputs(), overlays) {
		m[d.Cache.Name] = d
	}
	return m
}

// A directory of programs is private whether or not the host has one and
// whatever overlays can do, never overlaid; inside a writable root it is
// left to the tool.
func TestDecidePrograms(t *testing.T) {
	bin := policy.ToolCache{Name: "go-bin", Env: "GOBIN", Programs: true, Host: "/h/go/bin", HostExists: true}
	cargo := policy.ToolCache{Name: "cargo-install", Env: "CARGO_INSTALL_ROOT", Programs: true, Bin: "bin", Host: "/h/.cargo/bin"}
	// Decide reads no names, and a policy holds only caches this build
	// knows: "npm" stands for a GOBIN inside the workspace.
	local := policy.ToolCache{Name: "npm", Env: "GOBIN", Programs: true, Host: "/ws/bin", HostExists: true}
	for _, mode := range []policy.ToolCacheMode{policy.CachesOverlay, policy.CachesPrivate} {
		for _, overlays := range []bool{true, false} {
			ds := decisions(testPolicy("/ws", mode, bin, cargo, local), overlays)
			if d := ds["go-bin"]; d.How != toolcache.Private {
				t.Errorf("%s overlays=%v: go-bin %s (%s), want private", mode, overlays, d.How, d.Why)
			}
			if d := ds["cargo-install"]; d.How != toolcache.Private {
				t.Errorf("%s overlays=%v: cargo-install %s, want private", mode, overlays, d.How)
			}
			if d := ds["npm"]; d.How != toolcache.Untouched || !strings.Contains(d.Why, "writable root /ws") {
				t.Errorf("%s overlays=%v: a GOBIN in the workspace: %s (%s)", mode, overlays, d.How, d.Why)
			}
		}
	}
	c := decisions(testPolicy("/ws", policy.CachesOverlay, cargo), true)["cargo-install"].Cache
	if got, want := toolcache.ProgramsDir(c), filepath.Join("/state", "caches", "ws", "private", "cargo-install", "bin"); got != want {
		t.Errorf("ProgramsDir = %q, want %q", got, want)
	}
	if got := toolcache.PrivateEnv(c, nil); got != "CARGO_INSTALL_ROOT="+filepath.Join("/state", "caches", "ws", "private", "cargo-install") {
		t.Errorf("PrivateEnv = %q", got)
	}
}

// Cargo's home is never overlaid; it is private only where that hides
// nothing the tool reads (no config.toml) and none of its caches is
// overlaid, and its caches then say they move with it.
func TestDecideCargoHome(t *testing.T) {
	reg := policy.ToolCache{Name: "cargo-registry", Host: "/h/.cargo/registry"}
	git := policy.ToolCache{Name: "cargo-git", Host: "/h/.cargo/git"}
	home := policy.ToolCache{Name: "cargo-home", Env: "CARGO_HOME", Host: "/h/.cargo", Covers: []string{"cargo-registry", "cargo-git"}}
	with := func(c policy.ToolCache, f func(*policy.ToolCache)) policy.ToolCache { f(&c); return c }
	exists := func(c *policy.ToolCache) { c.HostExists = true }
	tests := []struct {
		name           string
		reg, git, home policy.ToolCache
		overlays       bool
		want           toolcache.How
		why            string
	}{
		{"no ~/.cargo", reg, git, home, true, toolcache.Private, ""},
		{"rustup's ~/.cargo, no registry yet", reg, git, with(home, exists), true, toolcache.Private, ""},
		{"a registry to overlay", with(reg, exists), git, with(home, exists), true, toolcache.Untouched, "overlaid"},
		{"a registry, no overlays", with(reg, exists), git, with(home, exists), false, toolcache.Private, ""},
		{"a config.toml", reg, git, with(home, func(c *policy.ToolCache) { c.HostExists, c.Kept = true, "/h/.cargo/config.toml" }), false, toolcache.Untouched, "config.toml"},
	}
	for _, tt := range tests {
		ds := decisions(testPolicy("/ws", policy.CachesOverlay, tt.reg, tt.git, tt.home), tt.overlays)
		d := ds["cargo-home"]
		if d.How != tt.want || !strings.Contains(d.Why, tt.why) {
			t.Errorf("%s: cargo-home %s (%s), want %s (%q)", tt.name, d.How, d.Why, tt.want, tt.why)
		}
		for _, n := range []string{"cargo-registry", "cargo-git"} {
			if c := ds[n]; d.How == toolcache.Private && (c.How != toolcache.Untouched || !strings.Contains(c.Why, "moves with cargo-home")) {
				t.Errorf("%s: %s %s (%s), want it to move with the home", tt.name, n, c.How, c.Why)
			}
		}
		if d.How == toolcache.Overlay {
			t.Errorf("%s: a tool's home overlaid", tt.name)
		}
	}
}

// Env: a private cache's variable and its settings; an overlaid cache's
// own path where another entry moves its default (GOMODCACHE, when
// go-sumdb moves GOPATH); nothing for an untouched one.
func TestEnv(t *testing.T) {
	mod := policy.ToolCache{Name: "go-mod", Env: "GOMODCACHE", PinEnv: true, Host: "/h/go/pkg/mod", HostExists: true}
	sum := policy.ToolCache{Name: "go-sumdb", Env: "GOPATH", Host: "/h/go/pkg/sumdb"}
	yarn := policy.ToolCache{Name: "yarn", Env: "YARN_CACHE_FOLDER", Host: "/h/.cache/yarn", HostExists: true, Settings: []string{"YARN_DISABLE_SELF_UPDATE_CHECK=true"}}
	skipped := policy.ToolCache{Name: "pip", Env: "PIP_CACHE_DIR", Host: "/h/.cache/pip", Skip: "overlaps protected", Settings: []string{"A=1"}}
	got := map[string][]string{}
	for _, d := range toolcache.Decide(testPolicy("/ws", policy.CachesOverlay, mod, sum, yarn, skipped).ToolCacheInputs(), true) {
		got[d.Cache.Name] = toolcache.Env(d, "/priv/"+d.Cache.Name, []string{"GOPATH=/old"})
	}
	want := map[string][]string{
		"go-mod":   {"GOMODCACHE=/h/go/pkg/mod"},
		"go-sumdb": {"GOPATH=/priv/go-sumdb"},
		"yarn":     {"YARN_DISABLE_SELF_UPDATE_CHECK=true"},
		"pip":      nil,
	}
	for n, w := range want {
		if !slices.Equal(got[n], w) {
			t.Errorf("%s: Env = %q, want %q", n, got[n], w)
		}
	}
	for _, d := range toolcache.Decide(testPolicy("/ws", policy.CachesOverlay, yarn).ToolCacheInputs(), false) {
		if e := toolcache.Env(d, "/priv/yarn", nil); !slices.Equal(e, []string{"YARN_CACHE_FOLDER=/priv/yarn", "YARN_DISABLE_SELF_UPDATE_CHECK=true"}) {
			t.Errorf("private yarn: Env = %q", e)
		}
	}
}

// A PATH entry inside the workspace's private tool directory refuses the
// run; others, relative ones and an empty PATH do not.
func TestCheckPath(t *testing.T) {
	p := testPolicy("/ws", policy.CachesOverlay, policy.ToolCache{Name: "go-bin", Env: "GOBIN", Programs: true, Host: "/h/go/bin"})
	priv := filepath.Join("/state", "caches", "ws", "private")
	for list, refuse := range map[string]bool{
		"/usr/bin:/bin":                         false,
		"":                                      false,
		"bin:./x:/state/caches/ws/privateer":    false,
		"/usr/bin:" + priv + "/go-bin":          true,
		priv + "/cargo-install/bin/../bin:/bin": true,
		priv:                                    true,
	} {
		err := toolcache.CheckPath(p.ToolCaches(), list)
		if (err != nil) != refuse {
			t.Errorf("PATH=%q: %v, want refused=%v", list, err, refuse)
		}
		if err != nil && !strings.Contains(err.Error(), "remove it from PATH") {
			t.Errorf("PATH=%q: %v does not say how to fix it", list, err)
		}
	}
	if err := toolcache.CheckPath(nil, "/x"); err != nil {
		t.Errorf("no caches: %v", err)
	}
}
