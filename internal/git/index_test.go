package git

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// gitRepoWithGitlinks makes a repository with git itself whose index has
// files and the gitlinks want, in index format version, and returns its
// gitdir.
func gitRepoWithGitlinks(t testing.TB, git string, version int, format string, want []string) string {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(git, args...)
		cmd.Dir = dir
		cmd.Env = []string{"HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "PATH=/usr/bin:/bin"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q", "--object-format="+format)
	for _, f := range []string{"a", "dir/b", "dir/sub/c", "dir/sub/longer-name-d", "z"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644)
		run("add", f)
	}
	oid := "1234567890123456789012345678901234567890"
	if format == "sha256" {
		oid += "123456789012345678901234"
	}
	for _, l := range want {
		run("update-index", "--add", "--cacheinfo", "160000,"+oid+","+l)
	}
	// An intent-to-add entry sets the extended flags (a version 3 index).
	os.WriteFile(filepath.Join(dir, "ita"), []byte("x"), 0o644)
	run("add", "-N", "ita")
	run("update-index", "--index-version", string(rune('0'+version)))
	return filepath.Join(dir, ".git")
}

func TestIndexGitlinks(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed")
	}
	want := []string{"dir/sub/lib", "dir/sub/lib2", "vendor/x"}
	for _, format := range []string{"sha1", "sha256"} {
		for _, v := range []int{2, 3, 4} {
			if v == 2 {
				continue // intent-to-add forces version 3; version 2 is covered below
			}
			gd := gitRepoWithGitlinks(t, git, v, format, want)
			hl := 20
			if format == "sha256" {
				hl = 32
			}
			got, err := IndexGitlinks(filepath.Join(gd, "index"), hl)
			if err != nil {
				t.Fatalf("%s v%d: %v", format, v, err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s v%d: gitlinks %q, want %q", format, v, got, want)
			}
		}
	}
	// Version 2: no extended entries.
	dir := t.TempDir()
	cmd := exec.Command(git, "init", "-q", dir)
	cmd.Env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"update-index", "--add", "--cacheinfo", "160000,1234567890123456789012345678901234567890,lib"},
		{"update-index", "--add", "--cacheinfo", "100644,e69de29bb2d1d6434b8b29ae775ad8c2e48c5391,file"},
		{"update-index", "--index-version", "2"},
	} {
		cmd := exec.Command(git, args...)
		cmd.Dir = dir
		cmd.Env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	got, err := IndexGitlinks(filepath.Join(dir, ".git", "index"), 20)
	if err != nil || !slices.Equal(got, []string{"lib"}) {
		t.Errorf("v2: %q, %v", got, err)
	}
	if _, err := IndexGitlinks(filepath.Join(dir, "missing"), 20); !os.IsNotExist(err) {
		t.Errorf("missing index: %v", err)
	}
}

func TestIndexGitlinksCorrupt(t *testing.T) {
	for name, in := range map[string][]byte{
		"empty":        nil,
		"signature":    []byte("DIRX\x00\x00\x00\x02\x00\x00\x00\x00"),
		"version":      []byte("DIRC\x00\x00\x00\x05\x00\x00\x00\x00"),
		"huge count":   []byte("DIRC\x00\x00\x00\x02\xff\xff\xff\xff"),
		"truncated":    append([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x01"), make([]byte, 30)...),
		"v4 overstrip": append(append([]byte("DIRC\x00\x00\x00\x04\x00\x00\x00\x01"), make([]byte, 62)...), 5, 'a', 0),
	} {
		if _, err := parseIndexGitlinks(bufio.NewReader(bytes.NewReader(in)), 20); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzIndexGitlinks(f *testing.F) {
	if git, err := exec.LookPath("git"); err == nil {
		for _, v := range []int{3, 4} {
			gd := gitRepoWithGitlinks(f, git, v, "sha1", []string{"lib", "x/b"})
			b, _ := os.ReadFile(filepath.Join(gd, "index"))
			f.Add(b)
		}
	}
	f.Add([]byte("DIRC\x00\x00\x00\x04\x00\x00\x00\x02"))
	f.Fuzz(func(t *testing.T, in []byte) {
		links, err := parseIndexGitlinks(bufio.NewReader(bytes.NewReader(in)), 20)
		if err == nil && len(links) > maxGitlinks {
			t.Fatalf("%d gitlinks", len(links))
		}
		for _, l := range links {
			if len(l) > maxIndexPath {
				t.Fatalf("path of %d bytes", len(l))
			}
		}
	})
}
