package lookpath

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/exitcode"
)

func TestFind(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{a, b, filepath.Join(a, "subdir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string, mode os.FileMode) {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(a, "plain"), 0o644)
	write(filepath.Join(b, "plain"), 0o755) // a later executable one wins
	write(filepath.Join(a, "onlyplain"), 0o644)
	write(filepath.Join(b, "tool"), 0o755)
	path := a + ":" + b
	for _, tc := range []struct {
		name, path, want string
		status           int
		msg              string
	}{
		{"tool", path, filepath.Join(b, "tool"), 0, ""},
		{"plain", path, filepath.Join(b, "plain"), 0, ""},
		{"onlyplain", path, "", exitcode.NotExecutable, "onlyplain: permission denied"},
		{"subdir", path, "", exitcode.NotExecutable, "subdir: permission denied"},
		{"nothere", path, "", exitcode.NotFound, "nothere: command not found"},
		{"tool", "", "", exitcode.NotFound, "command not found"},
		{filepath.Join(b, "tool"), "", filepath.Join(b, "tool"), 0, ""},
		{filepath.Join(a, "onlyplain"), path, "", exitcode.NotExecutable, "permission denied"},
		{filepath.Join(a, "missing"), path, "", exitcode.NotFound, "command not found"},
		{"", path, "", exitcode.NotFound, "command not found"},
	} {
		got, status, err := Find(tc.name, tc.path)
		if got != tc.want || status != tc.status {
			t.Errorf("Find(%q, %q) = %q, %d, %v; want %q, %d", tc.name, tc.path, got, status, err, tc.want, tc.status)
		}
		if tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg)) {
			t.Errorf("Find(%q): error %v, want %q", tc.name, err, tc.msg)
		}
	}
}

// TestFindSkipsUnsearchable: a PATH entry that cannot be searched (stat
// fails with EACCES) is skipped as the shell skips it: a later match
// runs, and no match anywhere is 127, not 126. A file found but not
// executable is still 126, and so is a name with a slash through such a
// directory (the shell's execve says "Permission denied" too).
func TestFindSkipsUnsearchable(t *testing.T) {
	dir := t.TempDir()
	locked, b := filepath.Join(dir, "locked"), filepath.Join(dir, "b")
	for _, d := range []string{locked, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(b, "tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b, "plain"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Root searches every directory: the kernel's EACCES is simulated.
	stat = func(p string) (os.FileInfo, error) {
		if strings.HasPrefix(p, locked+string(filepath.Separator)) {
			return nil, &os.PathError{Op: "stat", Path: p, Err: syscall.EACCES}
		}
		return os.Stat(p)
	}
	t.Cleanup(func() { stat = os.Stat })
	path := locked + ":" + b
	for _, tc := range []struct {
		name, want string
		status     int
		msg        string
	}{
		{"tool", filepath.Join(b, "tool"), 0, ""},
		{"nosuch", "", exitcode.NotFound, "nosuch: command not found"},
		{"plain", "", exitcode.NotExecutable, "plain: permission denied"},
		{filepath.Join(locked, "tool"), "", exitcode.NotExecutable, "permission denied"},
	} {
		got, status, err := Find(tc.name, path)
		if got != tc.want || status != tc.status {
			t.Errorf("Find(%q) = %q, %d, %v; want %q, %d", tc.name, got, status, err, tc.want, tc.status)
		}
		if tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg)) {
			t.Errorf("Find(%q): error %v, want %q", tc.name, err, tc.msg)
		}
	}
}

// An empty PATH entry is the current directory, as for the shell.
func TestFindEmptyEntryIsDot(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	if got, status, err := Find("x", "/nonexistent:"); got != "./x" || status != 0 {
		t.Errorf("Find(x, with empty entry) = %q, %d, %v; want ./x", got, status, err)
	}
}

func TestEnv(t *testing.T) {
	if got := Env([]string{"HOME=/h", "PATH=/a", "PATHX=/no", "PATH=/b"}); got != "/b" {
		t.Errorf("Env = %q, want /b", got)
	}
	if got := Env(nil); got != "" {
		t.Errorf("Env(nil) = %q", got)
	}
}

// FindIn checks relative names in the command's directory, not the caller's.
func TestFindIn(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "x"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, status, err := FindIn("bin/x", "", dir); got != "bin/x" || status != 0 {
		t.Errorf("FindIn(bin/x) = %q, %d, %v; want bin/x", got, status, err)
	}
	if got, status, err := FindIn("x", "bin", dir); got != "bin/x" || status != 0 {
		t.Errorf("FindIn(x, PATH=bin) = %q, %d, %v; want bin/x", got, status, err)
	}
	if _, status, _ := Find("bin/x", ""); status != exitcode.NotFound {
		t.Errorf("Find(bin/x) from another directory: status %d, want 127", status)
	}
}
