package gitguard

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/policy"
)

// fakeRepo lays out a git directory at dir: what git's discovery and the
// guard look for.
func fakeRepo(t *testing.T, dir string) {
	t.Helper()
	for _, d := range []string{"objects/info", "refs/heads", "hooks", "logs"} {
		must(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	must(t, os.WriteFile(filepath.Join(dir, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "config"), []byte("[core]\n\tbare = false\n"), 0o644))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testPolicy is a workspace-write policy over root alone, with root's own
// .git protected (and opened, with gitWrites).
func testPolicy(root string, gitWrites bool) *policy.Policy {
	return policytest.New(policytest.Fields{
		Mode: policy.WorkspaceWrite, Cwd: root, WritableRoots: []string{root},
		Protected:      []policy.Protected{{Path: filepath.Join(root, ".git"), Kind: policy.Dir, Root: root, Why: ".git in " + root}},
		ProtectedNames: []string{".git"}, AllowGitWrites: gitWrites,
	})
}

// TestGuardScenarios runs each scenario as one window (Begin, the
// "command", End), once with every check a walk (a lone run) and once
// with a watcher (a session), and checks what is left.
func TestGuardScenarios(t *testing.T) {
	type scenario struct {
		name   string
		before func(t *testing.T, ws string) // the user's, before the window
		during func(t *testing.T, ws string) // the command's
		absent []string
		kept   []string
		full   bool // with a watcher, the check must still walk everything
	}
	scenarios := []scenario{
		{name: "new nested repo", during: func(t *testing.T, ws string) { fakeRepo(t, filepath.Join(ws, "a/b/.git")) },
			absent: []string{"a/b/.git"}},
		{name: "gitdir file", during: func(t *testing.T, ws string) {
			fakeRepo(t, filepath.Join(ws, "elsewhere"))
			must(t, os.MkdirAll(filepath.Join(ws, "c"), 0o755))
			must(t, os.WriteFile(filepath.Join(ws, "c/.git"), []byte("gitdir: ../elsewhere\n"), 0o644))
		}, absent: []string{"c/.git", "elsewhere/HEAD"}},
		{name: "git symlink", before: func(t *testing.T, ws string) { fakeRepo(t, filepath.Join(ws, "theirs/.git")) },
			during: func(t *testing.T, ws string) {
				must(t, os.MkdirAll(filepath.Join(ws, "d"), 0o755))
				must(t, os.Symlink("../theirs/.git", filepath.Join(ws, "d/.git")))
			}, absent: []string{"d/.git"}, kept: []string{"theirs/.git/HEAD"}},
		{name: "user's repo used", before: func(t *testing.T, ws string) { fakeRepo(t, filepath.Join(ws, "mine/.git")) },
			during: func(t *testing.T, ws string) {
				// what git status, add and commit write
				g := filepath.Join(ws, "mine/.git")
				must(t, os.WriteFile(filepath.Join(g, "index.lock"), []byte("DIRC"), 0o644))
				must(t, os.Remove(filepath.Join(g, "index.lock")))
				must(t, os.WriteFile(filepath.Join(g, "refs/heads/main"), []byte(strings.Repeat("a", 40)+"\n"), 0o644))
				must(t, os.WriteFile(filepath.Join(g, "logs/HEAD"), []byte("x\n"), 0o644))
			}, kept: []string{"mine/.git/HEAD"}},
		{name: "user's repo config rewritten", before: func(t *testing.T, ws string) { fakeRepo(t, filepath.Join(ws, "mine/.git")) },
			during: func(t *testing.T, ws string) {
				f, err := os.OpenFile(filepath.Join(ws, "mine/.git/config"), os.O_WRONLY|os.O_APPEND, 0)
				must(t, err)
				f.WriteString("\tfsmonitor = /tmp/evil\n")
				f.Close()
			}, absent: []string{"mine/.git"}},
		{name: "user's repo hook", before: func(t *testing.T, ws string) { fakeRepo(t, filepath.Join(ws, "mine/.git")) },
			during: func(t *testing.T, ws string) {
				must(t, os.WriteFile(filepath.Join(ws, "mine/.git/hooks/pre-commit"), []byte("#!/bin/sh\n"), 0o755))
			}, absent: []string{"mine/.git"}},
		{name: "user's repo reflog symlink", before: func(t *testing.T, ws string) { fakeRepo(t, filepath.Join(ws, "mine/.git")) },
			during: func(t *testing.T, ws string) {
				must(t, os.Remove(filepath.Join(ws, "mine/.git/logs")))
				must(t, os.MkdirAll(filepath.Join(ws, "mine/.git/logs"), 0o755))
				must(t, os.Symlink("/etc/passwd", filepath.Join(ws, "mine/.git/logs/HEAD")))
			}, absent: []string{"mine/.git"}},
		{name: "hard link to config, written", before: func(t *testing.T, ws string) {
			fakeRepo(t, filepath.Join(ws, "mine/.git"))
			must(t, os.Link(filepath.Join(ws, "mine/.git/config"), filepath.Join(ws, "alias")))
		}, during: func(t *testing.T, ws string) {
			f, err := os.OpenFile(filepath.Join(ws, "alias"), os.O_WRONLY|os.O_APPEND, 0)
			must(t, err)
			f.WriteString("\tfsmonitor = /tmp/evil\n")
			f.Close()
		}, absent: []string{"mine/.git"}, full: true},
		{name: "bare repo deep", during: func(t *testing.T, ws string) { fakeRepo(t, filepath.Join(ws, "x/y/z")) },
			absent: []string{"x/y/z/HEAD"}, kept: []string{"x/y/z/config"}},
		{name: "directory renamed onto a repo", during: func(t *testing.T, ws string) {
			fakeRepo(t, filepath.Join(ws, "tmpdir/inner/.git"))
			must(t, os.Rename(filepath.Join(ws, "tmpdir"), filepath.Join(ws, "moved")))
		}, absent: []string{"moved/inner/.git"}, full: true},
		{name: "unreadable parent", during: func(t *testing.T, ws string) {
			fakeRepo(t, filepath.Join(ws, "locked/sub/.git"))
			must(t, os.Chmod(filepath.Join(ws, "locked"), 0o311))
		}, absent: []string{"locked/sub/.git"}},
		{name: "read-only parent", during: func(t *testing.T, ws string) {
			fakeRepo(t, filepath.Join(ws, "ro/.git"))
			must(t, os.Chmod(filepath.Join(ws, "ro"), 0o555))
		}, absent: []string{"ro/.git"}},
		{name: "nothing", during: func(t *testing.T, ws string) {
			must(t, os.WriteFile(filepath.Join(ws, "file"), []byte("x"), 0o644))
		}, kept: []string{"file"}},
	}
	for _, watched := range []bool{false, true} {
		for _, sc := range scenarios {
			t.Run(sc.name+map[bool]string{false: "/walk", true: "/watcher"}[watched], func(t *testing.T) {
				ws, state, pol := guarded(t, watched, false, sc.before)
				sparse := false
				scanTrace = func(root string, sp bool, dirs int) { sparse = sp }
				defer func() { scanTrace = nil }()
				g, err := Begin(pol, state)
				must(t, err)
				sc.during(t, ws)
				notes, err := g.End()
				if err != nil {
					t.Fatalf("End: %v (notes %q)", err, notes)
				}
				if watched && !sparse && !sc.full {
					t.Error("the check walked the whole root although a watcher saw what changed")
				}
				for _, p := range sc.absent {
					if _, err := os.Lstat(filepath.Join(ws, p)); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("%s is still there (%v); notes %q", p, err, notes)
					}
				}
				for _, p := range sc.kept {
					if _, err := os.Lstat(filepath.Join(ws, p)); err != nil {
						t.Errorf("%s was moved: %v; notes %q", p, err, notes)
					}
				}
				if len(sc.absent) > 0 && len(notes) == 0 {
					t.Error("no note says what was moved")
				}
				if len(sc.absent) == 0 && len(notes) > 0 {
					t.Errorf("notes for a window with nothing to move: %q", notes)
				}
				if _, err := os.Stat(filepath.Join(ws, ".git/HEAD")); err != nil {
					t.Errorf("the root's own .git was touched: %v", err)
				}
			})
		}
	}
}

// TestGuardWindowShared: run B joins run A's window; A's end does not
// check (B still runs), and B cannot launder what A planted by putting
// it back after A ended; B's end moves it, from A's start.
func TestGuardWindowShared(t *testing.T) {
	ws, state, pol := guarded(t, false, false, nil)
	a, err := Begin(pol, state)
	must(t, err)
	fakeRepo(t, filepath.Join(ws, "sub/.git"))
	time.Sleep(30 * time.Millisecond) // B starts clearly after the plant
	b, err := Begin(pol, state)
	must(t, err)
	notes, err := a.End()
	if err != nil || len(notes) != 0 {
		t.Fatalf("A's end checked while B runs: %q %v", notes, err)
	}
	notes, err = b.End()
	must(t, err)
	if _, err := os.Lstat(filepath.Join(ws, "sub/.git")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("A's plant survived B's end: %v; notes %q", err, notes)
	}
}

// TestGuardKilledRun: a run that never ends its window (killed) leaves
// its record; the next run of the root checks it before it starts.
func TestGuardKilledRun(t *testing.T) {
	ws, state, pol := guarded(t, false, false, nil)
	a, err := Begin(pol, state)
	must(t, err)
	fakeRepo(t, filepath.Join(ws, "sub/.git"))
	a.release() // what the kernel does when A is killed
	b, err := Begin(pol, state)
	must(t, err)
	if _, err := os.Lstat(filepath.Join(ws, "sub/.git")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a killed run's plant survived the next run's start: %v", err)
	}
	if len(b.Notes()) == 0 {
		t.Error("no note says what was moved")
	}
	_, err = b.End()
	must(t, err)
}

var errXDev = syscall.EXDEV

// TestGuardInPlace: where the quarantine is on another file system, a
// planted repository is renamed beside itself, made unreadable and
// remembered; putting it back, under any name, moves it again.
func TestGuardInPlace(t *testing.T) {
	ws, state, pol := guarded(t, false, false, nil)
	exdev := func(from *dir, name string, to *dir, toName string) error {
		if to != from {
			return &os.LinkError{Op: "rename", Err: errXDev}
		}
		return from.rename(name, to, toName)
	}
	testRename = exdev
	defer func() { testRename = nil }()
	g, err := Begin(pol, state)
	must(t, err)
	fakeRepo(t, filepath.Join(ws, "sub/.git"))
	notes, err := g.End()
	must(t, err)
	ents, _ := os.ReadDir(filepath.Join(ws, "sub"))
	if len(ents) != 1 || !strings.HasPrefix(ents[0].Name(), ".git.agentbox-quarantine-") {
		t.Fatalf("sub holds %v, want one quarantined entry; notes %q", ents, notes)
	}
	q := filepath.Join(ws, "sub", ents[0].Name())
	if fi, _ := os.Lstat(q); fi.Mode().Perm() != 0 {
		t.Errorf("quarantined repository mode %v, want unreadable", fi.Mode())
	}
	// A later run puts it back as .git, and another as a bare-looking
	// directory elsewhere.
	for _, back := range []string{"sub/.git", "other"} {
		time.Sleep(30 * time.Millisecond)
		g, err := Begin(pol, state)
		must(t, err)
		must(t, os.Chmod(q, 0o755))
		must(t, os.Rename(q, filepath.Join(ws, back)))
		notes, err := g.End()
		must(t, err)
		if _, err := os.Lstat(filepath.Join(ws, back)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("put back at %s and not moved again: %v; notes %q", back, err, notes)
		}
		ents, _ := os.ReadDir(filepath.Dir(filepath.Join(ws, back)))
		found := ""
		for _, e := range ents {
			if strings.Contains(e.Name(), ".agentbox-quarantine-") {
				found = filepath.Join(filepath.Dir(filepath.Join(ws, back)), e.Name())
			}
		}
		if found == "" {
			t.Fatalf("no quarantined entry beside %s", back)
		}
		q = found
	}
}

// TestGuardFailsClosed: a plant that cannot be moved is an error, and the
// window stays for the next run to check again.
func TestGuardFailsClosed(t *testing.T) {
	ws, state, pol := guarded(t, false, false, nil)
	must(t, os.MkdirAll(state, 0o700))
	must(t, os.WriteFile(filepath.Join(state, "quarantine"), nil, 0o400))
	g, err := Begin(pol, state)
	must(t, err)
	fakeRepo(t, filepath.Join(ws, "sub/.git"))
	if _, err := g.End(); err == nil {
		t.Fatal("End succeeded with nowhere to move the plant")
	}
	if _, err := Begin(pol, state); err == nil {
		t.Fatal("the next run started with the plant still there")
	}
	must(t, os.Remove(filepath.Join(state, "quarantine")))
	g, err = Begin(pol, state)
	must(t, err)
	if _, err := os.Lstat(filepath.Join(ws, "sub/.git")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the plant is still there once the quarantine works: %v", err)
	}
	g.End()
}

// guarded makes a workspace with a repository (and what before adds), its
// state directory and policy, and with watched the watcher a session
// would hold on its root. The pauses pass the coarse clock's tick, so
// that what was made before, and the watcher's start, are older than the
// window the test then begins.
func guarded(t *testing.T, watched, gitWrites bool, before func(t *testing.T, ws string)) (ws, state string, pol *policy.Policy) {
	t.Helper()
	ws, state = t.TempDir(), t.TempDir()
	fakeRepo(t, filepath.Join(ws, ".git"))
	if before != nil {
		before(t, ws)
	}
	time.Sleep(30 * time.Millisecond)
	pol = testPolicy(ws, gitWrites)
	if watched {
		t.Cleanup(Watch(Roots(pol)))
		time.Sleep(30 * time.Millisecond)
	}
	return ws, state, pol
}
