package linux

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/internal/toolcache"
	"github.com/agentbox/agentbox/policy"
)

func TestDecideAndPlanCaches(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	out := filepath.Join(dir, "out", "cache")
	os.MkdirAll(filepath.Join(ws, "home"), 0o755)
	os.MkdirAll(filepath.Join(out, "go-build"), 0o755)
	os.Symlink(out, filepath.Join(ws, "home", ".cache"))
	os.MkdirAll(filepath.Join(ws, "home", ".npm"), 0o755)
	// A policy holds only caches this build knows; "uv" stands for a
	// cache over the whole state, "yarn" for one skipped by policy.
	layer := func(n string) string { return filepath.Join(dir, "state", "ws", n) }
	p := policytest.New(policytest.Fields{Mode: policy.WorkspaceWrite, WritableRoots: []string{ws}, ToolCacheMode: policy.CachesOverlay,
		ToolCaches: []policy.ToolCache{
			{Name: "go-build", Named: filepath.Join(ws, "home", ".cache", "go-build"), Host: filepath.Join(out, "go-build"), HostExists: true, Env: "GOCACHE", Layer: layer("go-build")},
			{Name: "npm", Named: filepath.Join(ws, "home", ".npm"), Host: filepath.Join(ws, "home", ".npm"), HostExists: true, Env: "npm_config_cache", Layer: layer("npm")},
			{Name: "pip", Host: "/nonexistent/pip", Env: "PIP_CACHE_DIR", Layer: layer("pip")},
			{Name: "cargo-registry", Host: "/nonexistent/registry", Layer: layer("cargo")},
			{Name: "uv", Host: dir, HostExists: true, Env: "X", Layer: layer("whole")},
			{Name: "yarn", Host: "/x", Skip: "overlaps protected", Layer: layer("s")},
		}})
	want := map[string]toolcache.How{"go-build": toolcache.Overlay, "npm": toolcache.Overlay, "pip": toolcache.Private,
		"cargo-registry": toolcache.Untouched, "uv": toolcache.Untouched, "yarn": toolcache.Untouched}
	ds := toolcache.Decide(p.ToolCacheInputs(), true)
	layers := map[string]toolcache.Layer{}
	for _, d := range ds {
		if d.How != want[d.Cache.Name] {
			t.Errorf("%s: %s (%s), want %s", d.Cache.Name, d.How, d.Why, want[d.Cache.Name])
		}
		l := toolcache.Layer{Upper: toolcache.UpperDir(d.Cache), Work: toolcache.WorkDir(d.Cache)}
		if d.Cache.Env != "" {
			l.Private = toolcache.PrivateDir(d.Cache)
		}
		layers[d.Cache.Name] = l
	}
	// Without overlays (degraded), everything relocatable goes private.
	for _, d := range toolcache.Decide(p.ToolCacheInputs(), false) {
		if d.How == toolcache.Overlay {
			t.Errorf("%s overlaid without overlays", d.Cache.Name)
		}
	}
	pins, mounts, writable, err := CachePlan(p, ds, layers, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantPins := []spec.Mount{{Kind: spec.Pin, Path: filepath.Join(ws, "home")}, {Kind: spec.PinLink, Path: filepath.Join(ws, "home", ".cache")}}
	if !slices.Equal(pins, wantPins) {
		t.Errorf("pins %v, want %v", pins, wantPins)
	}
	privRoot := filepath.Dir(layers["pip"].Private)
	if len(mounts) != 3 || mounts[0].Lower != "" || mounts[0].Target != privRoot ||
		mounts[1].Lower != filepath.Join(out, "go-build") || mounts[1].Target != mounts[1].Lower || mounts[1].Fallback != layers["go-build"].Private ||
		mounts[1].FallbackEnv != "GOCACHE="+layers["go-build"].Private {
		t.Errorf("mounts %+v", mounts)
	}
	if !slices.Contains(writable, filepath.Join(out, "go-build")) || !slices.Contains(writable, privRoot) {
		t.Errorf("writable %v", writable)
	}
	if _, _, _, err := CachePlan(p, ds, nil, nil); err == nil {
		t.Error("plan without layers succeeded")
	}
}
