package git

import (
	"errors"
	"io/fs"
	"testing"
)

func TestIsDotGit(t *testing.T) {
	for name, want := range map[string]bool{
		".git": true, ".GIT": true, ".g\u200cit": true, "\ufeff.git": true, ".git\u200d": true,
		".git.": true, ".git ": true, ".gitignore": false, ".gi": false, "git": false, "x.git": false,
	} {
		if got := IsDotGit(name); got != want {
			t.Errorf("IsDotGit(%q) = %v, want %v", name, got, want)
		}
	}
}

// fakeDir is a directory of named contents; a nil content is a file that
// cannot be read.
type fakeDir map[string][]byte

func (d fakeDir) ReadFile(name string, max int) ([]byte, bool, bool, error) {
	data, ok := d[name]
	switch {
	case !ok:
		return nil, false, false, nil
	case data == nil:
		return nil, true, false, fs.ErrPermission
	case len(data) > max:
		return nil, true, false, nil
	}
	return data, true, true, nil
}

func (d fakeDir) Exists(name string) (bool, error) {
	if name == "broken" {
		return false, errors.New("broken")
	}
	_, ok := d[name]
	return ok, nil
}

func TestIsGitDir(t *testing.T) {
	ref := []byte("ref: refs/heads/main\n")
	oid := []byte("0123456789abcdef0123456789ABCDEF01234567\n")
	for _, c := range []struct {
		name string
		d    fakeDir
		want bool
	}{
		{"bare", fakeDir{"HEAD": ref, "objects": {}, "refs": {}}, true},
		{"detached", fakeDir{"HEAD": oid, "objects": {}, "refs": {}}, true},
		{"ref with blanks", fakeDir{"HEAD": []byte("ref:\t refs/x"), "objects": {}, "refs": {}}, true},
		{"no HEAD", fakeDir{"objects": {}, "refs": {}}, false},
		{"HEAD not a ref", fakeDir{"HEAD": []byte("hello"), "objects": {}, "refs": {}}, false},
		{"unreadable HEAD counts", fakeDir{"HEAD": nil, "objects": {}, "refs": {}}, true},
		{"no refs", fakeDir{"HEAD": ref, "objects": {}}, false},
		{"commondir", fakeDir{"HEAD": ref, "commondir": {}}, true},
	} {
		if got, err := IsGitDir(c.d); err != nil || got != c.want {
			t.Errorf("%s: IsGitDir = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

func TestHashLen(t *testing.T) {
	if n := HashLen(nil); n != 20 {
		t.Errorf("no config: %d", n)
	}
	if n := HashLen([]ConfigEntry{{Name: "extensions.objectformat", Value: "SHA256"}}); n != 32 {
		t.Errorf("sha256: %d", n)
	}
}
