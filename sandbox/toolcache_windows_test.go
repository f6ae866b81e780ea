package sandbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/internal/windows/sid"
	"github.com/agentbox/agentbox/internal/windows/unelevated"
	"github.com/agentbox/agentbox/policy"
)

// cacheTestPolicy is testPolicy with the host's Go build cache at a
// directory of the test's own, holding one file.
func cacheTestPolicy(t *testing.T) (pol *policy.Policy, hostCache string) {
	t.Helper()
	hostCache = filepath.Join(mkTemp(t, "hostcache"), "go-build")
	if err := os.MkdirAll(hostCache, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(hostCache, "README"), []byte("host cache\n"), 0o644)
	t.Setenv("GOCACHE", hostCache)
	pol, _ = testPolicy(t, policy.WorkspaceWrite)
	return pol, hostCache
}

// treeHash hashes the names, sizes and contents of everything under dir.
func treeHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v\n", p, d.Type())
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// The command's GOCACHE points into the workspace's private directory
// under the state directory, which gets a writable root's SID; cleanup
// removes it. (Runs under Wine: nothing here needs enforcement.)
func TestToolCacheEnv(t *testing.T) {
	pol, hostCache := cacheTestPolicy(t)
	c := Command(pol, exe(t), "GOCACHE")
	c.Env = helperEnv("env", "gocache="+hostCache)
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	dir, err := agentdirs.RequireState(os.Getenv, runtime.GOOS)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(agentdirs.ToolCacheRoot(dir), agentdirs.WorkspaceKey(pol.Cwd()), "private")
	want := "GOCACHE=" + filepath.Join(root, "go-build")
	if got := strings.TrimSpace(string(out)); !strings.EqualFold(got, want) {
		t.Errorf("child sees %q, want %q", got, want)
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		t.Errorf("private cache root %s: %v", root, err)
	}
	st, err := sid.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := st.LookupRoot(root); !ok || s == "" {
		t.Errorf("private cache root %s has no SID of its own: %v", root, st.Roots)
	}
	var buf bytes.Buffer
	if err := unelevated.Cleanup(dir, &buf); err != nil {
		t.Fatalf("cleanup: %v\n%s", err, buf.String())
	}
	if _, err := os.Lstat(agentdirs.ToolCacheRoot(dir)); !os.IsNotExist(err) {
		t.Errorf("cleanup left %s: %v\n%s", agentdirs.ToolCacheRoot(dir), err, buf.String())
	}
	if !strings.Contains(buf.String(), "removed tool cache layers") {
		t.Errorf("cleanup output: %s", buf.String())
	}
}

// The acceptance check on a real host: `go build` of a tiny module with
// an empty private cache succeeds in the sandbox and leaves the host's
// cache as it was; a file planted at the host cache's path fails.
func TestEnforceToolCacheGoBuild(t *testing.T) {
	requireEnforcement(t)
	goExe, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: the go build check needs a Go toolchain on the Windows host")
	}
	pol, hostCache := cacheTestPolicy(t)
	before := treeHash(t, hostCache)
	mod := filepath.Join(pol.Cwd(), "hello")
	os.MkdirAll(mod, 0o755)
	os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module hello\n\ngo 1.21\n"), 0o644)
	os.WriteFile(filepath.Join(mod, "main.go"), []byte("package main\n\nfunc main() { println(\"hi\") }\n"), 0o644)
	c := Command(pol, goExe, "build", "-o", "hello.exe", ".")
	c.Dir = mod
	c.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("go build in the sandbox: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(mod, "hello.exe")); err != nil {
		t.Errorf("no binary: %v", err)
	}
	if got := treeHash(t, hostCache); got != before {
		t.Errorf("host cache %s changed", hostCache)
	}
	planted := filepath.Join(hostCache, "planted")
	if sandboxed(t, pol, "write", planted) {
		t.Errorf("wrote %s in the host cache", planted)
	}
	if _, err := os.Lstat(planted); err == nil {
		t.Errorf("%s exists on the host", planted)
	}
	dir := stateDir()
	priv := filepath.Join(agentdirs.ToolCacheRoot(dir), agentdirs.WorkspaceKey(pol.Cwd()), "private", "go-build")
	if ents, err := os.ReadDir(priv); err != nil || len(ents) == 0 {
		t.Errorf("private cache %s not used: %v", priv, err)
	}
	unelevated.Cleanup(dir, io.Discard)
}

// doctor lists each cache and where it goes, and a private directory that
// would overlap a host cache makes it report that runs cannot start.
func TestDoctorToolCaches(t *testing.T) {
	pol, hostCache := cacheTestPolicy(t)
	r := Doctor(pol)
	c, ok := check(r, "cache go-build")
	if !ok || !strings.Contains(c.Detail, "private: GOCACHE=") || !strings.Contains(c.Detail, hostCache+" untouched") {
		t.Errorf("go-build check %+v", c)
	}
	if _, ok := check(r, "tool caches"); ok {
		t.Errorf("tool caches failure reported: %+v", r.Checks)
	}
	dir := stateDir()
	bad := policytest.Edit(pol, func(f *policytest.Fields) { f.ToolCaches[0].Named = dir })
	if c, ok := check(Doctor(bad), "tool caches"); !ok || c.OK || !strings.Contains(c.Detail, "must never be writable") {
		t.Errorf("overlap not reported: %+v", c)
	}
}
