package policy

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestWiden: a widened policy has the directory as a writable root with
// its protected names, and the domains on its allow-list; p itself is
// unchanged; what cannot be honoured is refused by name, and nothing is
// widened.
func TestWiden(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("paths of this test are Linux's")
	}
	dir := t.TempDir()
	ws, add := filepath.Join(dir, "ws"), filepath.Join(dir, "add")
	home := filepath.Join(dir, "home")
	for _, d := range []string{ws, add, home, filepath.Join(add, ".git"), filepath.Join(add, ".GIT"), filepath.Join(add, ".claude"), filepath.Join(ws, ".git")} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
	os.Symlink(home, filepath.Join(dir, "homelink"))
	env := func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}
	cfg := &Config{Network: NetworkSection{DeniedDomains: []string{"evil.test", "*.bad.test"}}}
	p, err := resolveEnv(Options{Cwd: ws, Config: cfg}, env, "linux")
	if err != nil {
		t.Fatal(err)
	}
	add, _ = filepath.EvalSymlinks(add)
	ws, _ = filepath.EvalSymlinks(ws)
	w := Widening{AddDirs: []string{add}, AllowDomains: []string{"good.test"}}
	if p.Covers(w) {
		t.Error("p covers what it does not allow")
	}
	q, err := p.Widen(w)
	if err != nil {
		t.Fatal(err)
	}
	if !q.IsWritable(filepath.Join(add, "x")) || q.IsWritable(filepath.Join(add, ".git", "config")) || !slices.Equal(q.AllowedDomains(), []string{"good.test"}) {
		t.Errorf("widened: roots %v, protected %v, domains %v", q.WritableRoots(), q.Protected(), q.AllowedDomains())
	}
	if !q.Covers(w) || p.IsWritable(filepath.Join(add, "x")) || len(p.AllowedDomains()) != 0 {
		t.Error("p changed, or q does not cover w")
	}
	// Widening again keeps the first widening.
	r, err := q.Widen(Widening{AllowDomains: []string{"other.test"}})
	if err != nil || !r.IsWritable(filepath.Join(add, "x")) || len(r.AllowedDomains()) != 2 {
		t.Errorf("widened twice: %v, %v", r, err)
	}
	for _, tc := range []struct {
		w   Widening
		why string
	}{
		{Widening{AddDirs: []string{"/"}}, "root of a file system"},
		{Widening{AddDirs: []string{home}}, "is your home"},
		{Widening{AddDirs: []string{filepath.Join(dir, "homelink")}}, "is your home"},
		{Widening{AddDirs: []string{dir}}, "contains"},
		{Widening{AddDirs: []string{"/etc"}}, "system directory"},
		{Widening{AddDirs: []string{"rel"}}, "not an absolute path"},
		{Widening{AddDirs: []string{filepath.Join(dir, "missing")}}, "does not exist"},
		{Widening{AddDirs: []string{filepath.Join(dir, "file")}}, "not a directory"},
		{Widening{AllowDomains: []string{"evil.test"}}, "denied_domains"},
		{Widening{AllowDomains: []string{"x.bad.test"}}, "denied_domains"},
		{Widening{AllowDomains: []string{"*.test"}}, "denied_domains"},
		{Widening{AllowDomains: []string{"*"}}, "not a domain pattern"},
		// Protected by the workspace's root whatever roots are added.
		{Widening{AddDirs: []string{filepath.Join(ws, ".git")}}, "lies in .git"},
		// And by the grant itself when no root protects it (add is no
		// writable root of p): --add-dir add keeps add/.git read-only,
		// so a grant of add/.git must not open it.
		{Widening{AddDirs: []string{filepath.Join(add, ".git")}}, "--allow-git-writes"},
		{Widening{AddDirs: []string{filepath.Join(add, ".GIT")}}, "lies in .git"},
		{Widening{AddDirs: []string{filepath.Join(add, ".claude")}}, "protected_subpaths"},
	} {
		if _, err := p.Widen(tc.w); err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%+v: %v, want %q", tc.w, err, tc.why)
		}
	}
	ro, err := resolveEnv(Options{Cwd: ws, Mode: ReadOnly}, env, "linux")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Widen(Widening{AddDirs: []string{add}}); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("read-only: %v", err)
	}
	raw := &Policy{f: p.f}
	if _, err := raw.Widen(w); err == nil {
		t.Error("a policy not made by Resolve was widened")
	}
}
