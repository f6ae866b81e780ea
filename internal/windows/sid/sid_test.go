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
	if st.Workspace == st.ReadOnly || !Valid(st.Workspace) || !Valid(st.ReadOnly) {
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
	if err != nil || created || st2.Workspace != st.Workspace || st2.ReadOnly != st.ReadOnly || len(st2.Paths) != 2 {
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

func TestStateDir(t *testing.T) {
	d, err := StateDir(func(string) string { return `C:\Users\u\AppData\Local\` })
	if err != nil || d != `C:\Users\u\AppData\Local\agentbox` {
		t.Errorf("StateDir = %q, %v", d, err)
	}
	if _, err := StateDir(func(string) string { return "" }); err == nil {
		t.Error("no LOCALAPPDATA accepted")
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
