package gitguard

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/policy"
)

func TestGitCarveouts(t *testing.T) {
	gd := filepath.Join(t.TempDir(), ".git")
	for _, d := range []string{"hooks", "objects/info", "refs/heads"} {
		os.MkdirAll(filepath.Join(gd, d), 0o755)
	}
	os.WriteFile(filepath.Join(gd, "config"), nil, 0o644)
	os.WriteFile(filepath.Join(gd, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	cs, err := Carveouts(gd)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Carveout{}
	for _, c := range cs {
		rel, _ := filepath.Rel(gd, c.Path)
		got[filepath.ToSlash(rel)] = c
	}
	for rel, want := range map[string]struct{ exists, dir bool }{
		"config": {true, false}, "hooks": {true, true}, "objects/info": {true, true},
		"commondir": {false, false}, "config.worktree": {false, false}, "info": {false, true}, "modules": {false, true},
	} {
		c, ok := got[rel]
		if !ok || c.Exists != want.exists || c.Dir != want.dir {
			t.Errorf("%s: %+v (present %v), want exists=%v dir=%v", rel, c, ok, want.exists, want.dir)
		}
	}
	if got["commondir"].Placeholder != "." {
		t.Errorf("commondir placeholder %q, want \".\" (git reads it as this directory)", got["commondir"].Placeholder)
	}
	if !WritableDir(policy.Protected{Path: gd, Kind: policy.Dir, Root: filepath.Dir(gd)}) {
		t.Error("a .git with HEAD is not opened")
	}
	empty := filepath.Join(t.TempDir(), ".git")
	os.Mkdir(empty, 0o755)
	if WritableDir(policy.Protected{Path: empty, Kind: policy.Dir, Root: filepath.Dir(empty)}) {
		t.Error("an empty (placeholder) .git is opened")
	}

	// A missing objects/ guards the first missing component whole.
	gd2 := filepath.Join(t.TempDir(), ".git")
	os.MkdirAll(gd2, 0o755)
	cs, _ = Carveouts(gd2)
	found := false
	for _, c := range cs {
		if c.Path == filepath.Join(gd2, "objects") && c.Dir && !c.Exists {
			found = true
		}
	}
	if !found {
		t.Errorf("missing objects/ not guarded: %+v", cs)
	}

	// A symlinked hooks directory is refused: a bind would follow it.
	os.Symlink(filepath.Join(gd, "hooks"), filepath.Join(gd2, "hooks"))
	if _, err := Carveouts(gd2); !errors.Is(err, ErrSymlink) {
		t.Errorf("symlinked hooks: %v, want ErrGitSymlink", err)
	}
}
