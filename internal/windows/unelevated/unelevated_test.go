package unelevated

import (
	"slices"

	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/internal/windows/acl"
	"github.com/agentbox/agentbox/internal/windows/sid"

	"github.com/agentbox/agentbox/internal/windows/winenv"
	"github.com/agentbox/agentbox/policy"
)

func TestWriteDenybin(t *testing.T) {
	dir := filepath.Join(tempDir(t), "denybin")
	if err := WriteDenybin(dir); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "ssh.cmd"), []byte("tampered"), 0o644)
	if err := WriteDenybin(dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range winenv.StubFiles() {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v", name, got, err)
		}
	}
}

func TestChildEnv(t *testing.T) {
	env := []string{"PATH=C:\\bin"}
	if got := ChildEnv(policytest.New(policytest.Fields{Network: true}), env, `C:\d`); len(got) != 1 {
		t.Errorf("network on changed env: %v", got)
	}
	got := ChildEnv(policytest.New(policytest.Fields{}), env, `C:\d`)
	if p, _ := winenv.Get(got, "PATH"); p != `C:\d;C:\bin` {
		t.Errorf("PATH = %q", p)
	}
}

// tempDir is t.TempDir without its failing cleanup under Wine, where Go's
// RemoveAll gets "Invalid function"; removal here is best effort.
func tempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "agentbox-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestLimits(t *testing.T) {
	ws := policytest.New(policytest.Fields{Mode: policy.WorkspaceWrite, WritableRoots: []string{`C:\w`}, Protected: []policy.Protected{
		{Path: `C:\w\.git`, Kind: policy.Dir, Root: `C:\w`},
		{Path: `C:\w\vendor\x\.git`, Kind: policy.Dir, Root: `C:\w`},
	}})
	got := Limits(ws)
	if len(got) != 2 || !strings.Contains(got[0], "Low integrity label") || !strings.Contains(got[1], `C:\w\vendor\x\.git`) {
		t.Errorf("workspace-write limits = %q", got)
	}
	if got := Limits(policytest.New(policytest.Fields{Mode: policy.ReadOnly})); len(got) != 1 || !strings.Contains(got[0], "delete or rename") {
		t.Errorf("read-only limits = %q", got)
	}
	if got := Limits(policytest.New(policytest.Fields{Mode: policy.DangerFullAccess})); got != nil {
		t.Errorf("full access limits = %q", got)
	}
	if Limits(nil) != nil {
		t.Error("nil policy has limits")
	}
}

// cachePolicy is a workspace-write policy for C:\w with Go's build cache
// and Maven's repository resolved as policy does on Windows.
func cachePolicy(mode policy.ToolCacheMode) *policy.Policy {
	layer := `C:\Users\u\AppData\Local\agentbox` + "/toolcache/0123456789abcdef/"
	return policytest.New(policytest.Fields{
		Mode: policy.WorkspaceWrite, WritableRoots: []string{`C:\w`}, ToolCacheMode: mode,
		Protected: []policy.Protected{{Path: `C:\w\.git`, Kind: policy.Dir, Root: `C:\w`}},
		ToolCaches: []policy.ToolCache{
			{Name: "go-build", Desc: "Go build cache", Env: "GOCACHE", Host: `C:\Users\u\AppData\Local\go-build`,
				Named: `C:\Users\u\AppData\Local\go-build`, HostExists: true, Layer: layer + "go-build"},
			{Name: "cargo-registry", Desc: "Cargo registry cache", Host: `C:\Users\u\.cargo\registry`,
				Named: `C:\Users\u\.cargo\registry`, Layer: layer + "cargo-registry"},
			{Name: "npm", Desc: "npm cache", Env: "npm_config_cache", Host: `C:\Users\u\AppData\Local\npm-cache`,
				Named: `C:\Users\u\AppData\Local\npm-cache`, Layer: layer + "npm", Skip: "overlaps protected x"},
		},
	})
}

const cacheRoot = `C:\Users\u\AppData\Local\agentbox\toolcache\0123456789abcdef\private`

func TestPlanCaches(t *testing.T) {
	env := []string{`PATH=C:\Users\u\go\bin;C:\Windows`, `GOCACHE=C:\elsewhere`, `NPM_CONFIG_CACHE=C:\n`}
	for _, mode := range []policy.ToolCacheMode{policy.CachesOverlay, policy.CachesPrivate} {
		cs, err := PlanCaches(cachePolicy(mode), env)
		if err != nil {
			t.Fatal(err)
		}
		// Only the Go cache goes private: cargo has no variable, npm is
		// skipped.
		if cs.Root != cacheRoot || !slices.Equal(cs.Env, []string{`GOCACHE=` + cacheRoot + `\go-build`}) {
			t.Errorf("%s: PlanCaches = %+v", mode, cs)
		}
		got := CacheEnv([]string{`gocache=C:\elsewhere`, "A=1"}, cs)
		if v, _ := winenv.Get(got, "GOCACHE"); v != cacheRoot+`\go-build` || len(got) != 2 {
			t.Errorf("CacheEnv = %q", got)
		}
	}
	for _, pol := range []*policy.Policy{cachePolicy(policy.CachesOff), policytest.New(policytest.Fields{Mode: policy.ReadOnly}), nil} {
		if cs, err := PlanCaches(pol, env); err != nil || cs.Root != "" || cs.Env != nil {
			t.Errorf("no caches expected: %+v, %v", cs, err)
		}
	}
	// Maven's old MAVEN_OPTS is kept, whatever its spelling.
	mvn := policytest.Edit(cachePolicy(policy.CachesPrivate), func(f *policytest.Fields) {
		f.ToolCaches = f.ToolCaches[:1]
		f.ToolCaches[0].Env = "MAVEN_OPTS"
	})
	if cs, _ := PlanCaches(mvn, []string{"Maven_Opts=-Xmx1g"}); len(cs.Env) != 1 || cs.Env[0] != `MAVEN_OPTS=`+cacheRoot+`\go-build` {
		// No EnvValue outside package policy: the value is the dir.
		t.Errorf("maven env = %q", cs.Env)
	}
}

// Programs (go install) go to a private GOBIN even where the host has
// its own; yarn's cache brings the setting that stops its update check
// writing ~/.yarnrc.
func TestPlanCachesProgramsAndSettings(t *testing.T) {
	pol := policytest.Edit(cachePolicy(policy.CachesOverlay), func(f *policytest.Fields) {
		layer := filepath.Dir(f.ToolCaches[0].Layer)
		f.ToolCaches = append(f.ToolCaches[:1],
			policy.ToolCache{Name: "go-bin", Desc: "programs from go install", Env: "GOBIN", Programs: true, Host: `C:\Users\u\go\bin`,
				Named: `C:\Users\u\go\bin`, HostExists: true, Layer: layer + "/go-bin"},
			policy.ToolCache{Name: "yarn", Desc: "Yarn 1 cache", Env: "YARN_CACHE_FOLDER", Host: `C:\Users\u\AppData\Local\Yarn\Cache`,
				Named: `C:\Users\u\AppData\Local\Yarn\Cache`, Layer: layer + "/yarn", Settings: []string{"YARN_DISABLE_SELF_UPDATE_CHECK=true"}})
	})
	cs, err := PlanCaches(pol, []string{`PATH=C:\Windows`})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`GOCACHE=` + cacheRoot + `\go-build`, `GOBIN=` + cacheRoot + `\go-bin`,
		`YARN_CACHE_FOLDER=` + cacheRoot + `\yarn`, "YARN_DISABLE_SELF_UPDATE_CHECK=true"}
	if !slices.Equal(cs.Env, want) {
		t.Errorf("PlanCaches env %q, want %q", cs.Env, want)
	}
}

func TestPlanCachesRefuses(t *testing.T) {
	// A host cache (even an untouched one) containing the private root,
	// or inside it, would become writable.
	for _, host := range []string{`C:\Users\u\AppData\Local`, `c:\users\U\appdata\local\agentbox\toolcache\0123456789abcdef\private\x`} {
		pol := policytest.Edit(cachePolicy(policy.CachesPrivate), func(f *policytest.Fields) { f.ToolCaches[1].Named = host })
		if _, err := PlanCaches(pol, nil); err == nil || !strings.Contains(err.Error(), "must never be writable") {
			t.Errorf("host cache %s: err = %v", host, err)
		}
	}
	// A PATH directory inside the root would let the command plant
	// programs the user runs.
	_, err := PlanCaches(cachePolicy(policy.CachesPrivate), []string{`Path=C:\Windows;"` + cacheRoot + `\go-build\bin"`})
	if err == nil || !strings.Contains(err.Error(), "on PATH") {
		t.Errorf("PATH inside the root: err = %v", err)
	}
}

// The cache root gets exactly a writable root's grants: an inheritable
// allow for a SID of its own (which the run carries), a Low label, and no
// grant on any host cache.
func TestCacheGrants(t *testing.T) {
	pol := cachePolicy(policy.CachesOverlay)
	cs, err := PlanCaches(pol, nil)
	if err != nil {
		t.Fatal(err)
	}
	run := WithCaches(pol, cs)
	if len(pol.WritableRoots()) != 1 || !slices.Equal(run.WritableRoots(), []string{`C:\w`, cacheRoot}) {
		t.Fatalf("roots: policy %q, run %q", pol.WritableRoots(), run.WritableRoots())
	}
	st := &sid.State{ReadOnly: "S-1-9-1"}
	for _, r := range run.WritableRoots() {
		if _, _, err := st.RootSID(r); err != nil {
			t.Fatal(err)
		}
	}
	wsSID, _ := st.LookupRoot(`C:\w`)
	cacheSID, _ := st.LookupRoot(cacheRoot)
	if cacheSID == "" || cacheSID == wsSID {
		t.Fatalf("cache SID %q, workspace SID %q", cacheSID, wsSID)
	}
	sb := &Sandbox{State: st}
	if sids, err := sb.RunSIDs(run); err != nil || !slices.Equal(sids, []string{wsSID, cacheSID}) {
		t.Errorf("RunSIDs = %q, %v", sids, err)
	}
	pl := acl.PlanForRoots(run, func(r string) string { s, _ := st.LookupRoot(r); return s })
	pl.Merge(acl.IntegrityPlan(run, "S-1-5-21-1"))
	var allows, labels int
	for _, e := range pl.Entries {
		if acl.Within(e.Path, cacheRoot) {
			allows++
			want := acl.ACE{Flags: acl.ObjectInherit | acl.ContainerInherit, Mask: acl.AllowWrite, SID: cacheSID}
			if e.ACE != want || !acl.SamePath(e.Path, cacheRoot) {
				t.Errorf("cache entry %+v", e)
			}
		}
		for _, c := range pol.ToolCaches() {
			if acl.Within(e.Path, c.Host) || acl.Within(c.Host, e.Path) {
				t.Errorf("entry on host cache %s: %+v", c.Host, e)
			}
		}
	}
	for _, l := range pl.Labels {
		if acl.Within(l.Path, cacheRoot) {
			labels++
			if l.Label != acl.RootLabel || !acl.SamePath(l.Path, cacheRoot) {
				t.Errorf("cache label %+v", l)
			}
		}
	}
	if allows != 1 || labels != 1 {
		t.Errorf("cache root: %d allow(s), %d label(s); want 1 and 1", allows, labels)
	}
	if WithCaches(pol, Caches{}) != pol {
		t.Error("WithCaches without a root changed the policy")
	}
}

func TestRemoveCaches(t *testing.T) {
	state := tempDir(t)
	if got, err := RemoveCaches(state); got != "" || err != nil {
		t.Errorf("nothing to remove: %q, %v", got, err)
	}
	mod := filepath.Join(agentdirs.ToolCacheRoot(state), "k", "private", "go-mod", "x@v1")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module x\n"), 0o444)
	os.Chmod(mod, 0o555) // as Go leaves its module cache
	outside := filepath.Join(state, "sids.json")
	os.WriteFile(outside, nil, 0o600)
	got, err := RemoveCaches(state)
	if err != nil || got != agentdirs.ToolCacheRoot(state) {
		t.Fatalf("RemoveCaches = %q, %v", got, err)
	}
	if _, err := os.Lstat(got); !os.IsNotExist(err) {
		t.Errorf("%s still there: %v", got, err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("removed more than the caches: %v", err)
	}
}

// tempPolicy is cachePolicy with the private temporary directory policy
// gives %TEMP% and %TMP% by default.
func tempPolicy() *policy.Policy {
	return policytest.Edit(cachePolicy(policy.CachesOff), func(f *policytest.Fields) {
		f.PrivateTemps = []policy.PrivateTemp{
			{Path: `C:\Users\u\AppData\Local\Temp`, Dir: tempRoot, Env: "TEMP"},
			{Path: `C:\Users\u\AppData\Local\Temp`, Dir: tempRoot, Env: "TMP"},
		}
	})
}

const tempRoot = `C:\Users\u\AppData\Local\agentbox\tmp\0123456789abcdef\temp`

// TestPlanTemp: %TEMP% and %TMP% point at the workspace's private
// directory, which is granted as one more writable root with a SID of its
// own; the host's %TEMP% is no root; a PATH entry inside it is refused.
func TestPlanTemp(t *testing.T) {
	pol := tempPolicy()
	tmp, err := PlanTemp(pol, []string{`Path=C:\Windows`})
	if err != nil {
		t.Fatal(err)
	}
	if tmp.Root != tempRoot || !slices.Equal(tmp.Env, []string{"TEMP=" + tempRoot, "TMP=" + tempRoot}) {
		t.Fatalf("PlanTemp = %+v", tmp)
	}
	env := TempEnv([]string{`temp=C:\Users\u\AppData\Local\Temp`, `Tmp=C:\Users\u\AppData\Local\Temp`, "A=1"}, tmp)
	for _, v := range []string{"TEMP", "TMP"} {
		if got, _ := winenv.Get(env, v); got != tempRoot {
			t.Errorf("%%%s%% = %q, want %q (env %q)", v, got, tempRoot, env)
		}
	}
	if len(env) != 3 {
		t.Errorf("TempEnv kept another spelling: %q", env)
	}
	run := WithTemp(pol, tmp)
	if !slices.Equal(run.WritableRoots(), []string{`C:\w`, tempRoot}) || slices.Contains(run.WritableRoots(), `C:\Users\u\AppData\Local\Temp`) {
		t.Errorf("run roots = %q", run.WritableRoots())
	}
	st := &sid.State{ReadOnly: "S-1-9-1"}
	for _, r := range run.WritableRoots() {
		if _, _, err := st.RootSID(r); err != nil {
			t.Fatal(err)
		}
	}
	wsSID, _ := st.LookupRoot(`C:\w`)
	tmpSID, _ := st.LookupRoot(tempRoot)
	if sids, err := (&Sandbox{State: st}).RunSIDs(run); err != nil || !slices.Equal(sids, []string{wsSID, tmpSID}) || tmpSID == wsSID {
		t.Errorf("RunSIDs = %q, %v (workspace %q, temp %q)", sids, err, wsSID, tmpSID)
	}
	if _, err := PlanTemp(pol, []string{`PATH=C:\Windows;` + tempRoot + `\bin`}); err == nil || !strings.Contains(err.Error(), "on PATH") {
		t.Errorf("PATH inside the private temp: err = %v", err)
	}
	for _, p := range []*policy.Policy{cachePolicy(policy.CachesOff), policytest.New(policytest.Fields{Mode: policy.ReadOnly}), nil} {
		if tmp, err := PlanTemp(p, nil); err != nil || tmp.Root != "" {
			t.Errorf("no private temp expected: %+v, %v", tmp, err)
		}
	}
}

func TestRemoveTemps(t *testing.T) {
	state := tempDir(t)
	d := filepath.Join(agentdirs.TempRoot(state), "0123456789abcdef", "temp", "sub")
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(d, "f"), []byte("x"), 0o400)
	if removed, err := RemoveTemps(state); err != nil || removed != agentdirs.TempRoot(state) {
		t.Fatalf("RemoveTemps = %q, %v", removed, err)
	}
	if _, err := os.Lstat(agentdirs.TempRoot(state)); !os.IsNotExist(err) {
		t.Errorf("tree left: %v", err)
	}
	if removed, err := RemoveTemps(state); err != nil || removed != "" {
		t.Errorf("second RemoveTemps = %q, %v", removed, err)
	}
}
