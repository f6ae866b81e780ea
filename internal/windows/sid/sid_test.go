package sid

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestNew(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		s, err := New()
		if err != nil {
			t.Fatal(err)
		}
		if !Valid(s) {
			t.Fatalf("New() = %q, not valid", s)
		}
		if seen[s] {
			t.Fatalf("New() repeated %q", s)
		}
		seen[s] = true
	}
	for _, bad := range []string{"S-1-5-21-1-2-3", "S-1-5-32-544", "S-1-5-21-1-2-3-4294967296", "S-1-5-21-1-2-3-4 "} {
		if Valid(bad) {
			t.Errorf("Valid(%q)", bad)
		}
	}
}

func TestLoadOrCreate(t *testing.T) {
	dir := filepath.Join(tempDir(t), "state")
	if _, err := Load(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of nothing: %v", err)
	}
	st, created, err := LoadOrCreate(dir)
	if err != nil || !created {
		t.Fatalf("LoadOrCreate = %v, %v", created, err)
	}
	if st.Workspace != "" || !Valid(st.ReadOnly) || len(st.Roots) != 0 {
		t.Fatalf("state %+v", st)
	}
	st.AddPaths(`C:\w`, `c:\W`, `C:\x`)
	if len(st.Paths) != 2 {
		t.Errorf("AddPaths dedup: %v", st.Paths)
	}
	if err := Save(dir, st); err != nil {
		t.Fatal(err)
	}
	st2, created, err := LoadOrCreate(dir)
	if err != nil || created || st2.ReadOnly != st.ReadOnly || len(st2.Paths) != 2 {
		t.Fatalf("reload = %+v, %v, %v", st2, created, err)
	}
	os.WriteFile(filepath.Join(dir, FileName), []byte(`{"version":9,"workspace":"S-1-5-21-1-2-3-4","readonly":"S-1-5-21-1-2-3-5"}`), 0o600)
	if _, _, err := LoadOrCreate(dir); err == nil {
		t.Error("future version accepted")
	}
	os.WriteFile(filepath.Join(dir, FileName), []byte(`{"version":1,"workspace":"S-1-1-0","readonly":"S-1-5-21-1-2-3-5"}`), 0o600)
	if _, _, err := LoadOrCreate(dir); err == nil {
		t.Error("invalid SID accepted")
	}
}

// One SID per writable root, stable across loads, distinct from each
// other: a run carries only its own roots' SIDs, so the ACEs another
// workspace got last week grant it nothing.
func TestRootSIDs(t *testing.T) {
	dir := filepath.Join(tempDir(t), "state")
	st, _, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, added, err := st.RootSID(`C:\work\a\`)
	if err != nil || !added || !Valid(a) {
		t.Fatalf("RootSID(a) = %q, %v, %v", a, added, err)
	}
	b, _, _ := st.RootSID(`C:\work\b`)
	if a == b || a == st.ReadOnly || b == st.ReadOnly {
		t.Fatalf("SIDs not distinct: a %s, b %s, read-only %s", a, b, st.ReadOnly)
	}
	if again, added, _ := st.RootSID(`c:/WORK/a`); again != a || added {
		t.Errorf("same root, other spelling: %s (added %v), want %s", again, added, a)
	}
	if err := Save(dir, st); err != nil {
		t.Fatal(err)
	}
	st2, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := st2.LookupRoot(`C:\work\b`); !ok || s != b {
		t.Errorf("reloaded b = %q, %v, want %s", s, ok, b)
	}
	if _, ok := st2.LookupRoot(`C:\work\c`); ok {
		t.Error("unknown root has a SID")
	}
	if got := st2.SIDs(); len(got) != 3 {
		t.Errorf("SIDs() = %v, want read-only and two roots", got)
	}
	// Two roots sharing a SID would let one's grants serve the other.
	os.WriteFile(filepath.Join(dir, FileName), []byte(`{"version":2,"readonly":"S-1-5-21-1-2-3-5","roots":{"C:\\A":"S-1-5-21-1-2-3-4","C:\\B":"S-1-5-21-1-2-3-4"}}`), 0o600)
	if _, err := Load(dir); err == nil {
		t.Error("shared root SID accepted")
	}
}

// A version 1 file (one SID for every workspace) still loads, keeps its
// SID for cleanup, and gives new roots their own SIDs.
func TestLoadVersion1(t *testing.T) {
	dir := tempDir(t)
	os.WriteFile(filepath.Join(dir, FileName), []byte(`{"version":1,"workspace":"S-1-5-21-1-2-3-4","readonly":"S-1-5-21-1-2-3-5","paths":["C:\\w"]}`), 0o600)
	st, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Version != Version || st.Workspace != "S-1-5-21-1-2-3-4" || len(st.Paths) != 1 {
		t.Fatalf("v1 state read as %+v", st)
	}
	s, _, _ := st.RootSID(`C:\w`)
	if s == st.Workspace {
		t.Error("a root reuses the version 1 shared SID")
	}
	if got := st.SIDs(); len(got) != 3 || got[0] != st.Workspace {
		t.Errorf("SIDs() = %v, want the v1 SID kept for cleanup", got)
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
