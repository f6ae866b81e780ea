package gitguard

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/git"
)

// Baseline is what the first allow_git_writes run of a window recorded
// of a writable root's own git directory, for the check when the window
// closes: what the user had that the command could have changed without
// changing anything git runs, so that the check can tell the user's from
// the command's. Everything else the check needs, it reads from inode
// times.
type Baseline struct {
	GitDir string
	// Hidden are the index paths marked assume-unchanged or
	// skip-worktree (a sparse checkout marks many).
	Hidden []string `json:",omitempty"`
	// Replace are the packed replace refs (name and object id).
	Replace map[string]string `json:",omitempty"`
	// Exposed: some sandboxed run of the window could write the files
	// through which git runs programs here (a run whose policy did not
	// protect this directory: a run of an overlapping root, or one that
	// may run degraded, without the read-only carve-outs). The check then
	// also looks at it as at any nested repository, and what it finds
	// changed there moves it aside: the baseline may hold that run's
	// writes. A baseline read while such a run was going is left empty
	// (and exposed): the user's own hidden entries and replace refs then
	// count as the command's when the index or packed-refs changed.
	Exposed bool `json:",omitempty"`
}

// sequencerDirs hold an interrupted rebase, cherry-pick, revert or am:
// `git rebase --continue` runs the todo list's exec lines, and the merge
// strategy named in rebase-merge/strategy or sequencer/opts is run as
// `git merge-<strategy>` (a program, when it contains a slash).
var sequencerDirs = []string{"rebase-merge", "rebase-apply", "sequencer"}

// newBaseline reads gitdir before any command of the window runs.
func newBaseline(gitdir string) Baseline {
	b := Baseline{GitDir: gitdir, Replace: map[string]string{}}
	hidden := map[string]bool{}
	for _, ix := range indexFiles(gitdir) {
		git.ReadIndexGitlinks(ix, hashLenAt(gitdir), false, func(e git.IndexEntry) {
			if e.Hidden {
				hidden[e.Path] = true
			}
		})
	}
	for p := range hidden {
		b.Hidden = append(b.Hidden, p)
	}
	slices.Sort(b.Hidden)
	if data, err := readSmallFile(filepath.Join(gitdir, "packed-refs"), maxGitFile); err == nil {
		for name, oid := range packedReplace(data) {
			b.Replace[name] = oid
		}
	}
	return b
}

// rootGit repairs a root's own git directory, which allow_git_writes let
// commands write but for the paths ReadOnlyPaths keeps read-only: git
// writes through symlinks and other odd files the command left there, so
// those are removed; a replace ref makes log, show and checkout show
// another object than the one a branch holds, so new ones are dropped;
// an interrupted rebase runs its todo list's exec lines on --continue, so
// a changed one is moved aside; and an index is checked as git would use
// it (paths outside the worktree, entries newly hidden from git status,
// entries whose files changed with their stat data recorded beside the
// old object id, which git status would not read).
func (s *scan) rootGit(b Baseline) {
	g, err := openTop(b.GitDir)
	if err != nil {
		if !isNotExist(err) {
			s.fail(fmt.Errorf("checking %s after the command: %w", b.GitDir, err))
		}
		return
	}
	defer g.close()
	top := filepath.Dir(b.GitDir)
	for _, name := range sequencerDirs {
		s.sequencer(g, name)
	}
	s.oddFiles(g, "", top, 0, s.sparse)
	s.packedRefs(g, b)
	for _, name := range []string{"index"} {
		s.rootIndex(g, name, top, b)
	}
	ents, err := g.entries()
	if err != nil {
		s.fail(err)
		return
	}
	for _, e := range ents {
		if strings.HasPrefix(e.name, "sharedindex.") && !strings.Contains(e.name, ".agentbox-") {
			s.rootIndex(g, e.name, top, b)
		}
	}
}

// oddFiles removes what git never makes in a git directory (symlinks,
// FIFOs, sockets, devices) that changed during the window, and new or
// changed loose replace refs, below d (rel inside the git directory);
// sparse, only where the watcher saw changes (as [scan.walk]).
func (s *scan) oddFiles(d *dir, rel, top string, depth int, sparse bool) {
	if s.dirs++; s.dirs > maxDirs || depth > maxDepth {
		s.fail(fmt.Errorf("%s: more directories than agentbox checks", d.path))
		return
	}
	ents, err := d.entries()
	if err != nil {
		s.fail(fmt.Errorf("checking %s for what the command left: %w", d.path, err))
		return
	}
	examine := !sparse || s.dirty[d.path]
	for _, e := range ents {
		r := path.Join(rel, e.name)
		if rel == "" && slices.Contains(sequencerDirs, e.name) {
			continue // sequencer() dealt with it
		}
		marked := s.dirty[d.child(e.name)] || s.anc[d.child(e.name)]
		if !examine && !(e.typ == fs.ModeDir && marked) {
			continue
		}
		st, err := d.stat(e.name)
		if err != nil {
			if !isNotExist(err) {
				s.fail(err)
			}
			continue
		}
		changed := st.changed(s.since)
		if changed && (git.IsDotGit(e.name) || st.mode.IsDir() && s.nestedGitDir(d, e.name, r)) {
			// A repository inside the git directory, which git's
			// discovery from a directory below finds first.
			to, err := s.q.move(d, e.name)
			if err != nil {
				s.fail(fmt.Errorf("the command made a git repository at %s, inside %s, and moving it aside failed: %w; do not run git below %s before you remove it", d.child(e.name), s.gitDirOf(d), err, d.child(e.name)))
				continue
			}
			s.note("moved the git repository the command made at %s to %s: git run below it would use its configuration and hooks", d.child(e.name), to)
			continue
		}
		switch {
		case changed && st.odd():
			if err := d.remove(e.name); err != nil {
				s.fail(fmt.Errorf("the command left %s (%s) in %s, and removing it failed: %w; do not run git in %s before you remove it", d.child(e.name), st.mode.Type(), s.gitDirOf(d), err, top))
				continue
			}
			s.note("removed %s (%s) that the command made: git would have written through it", d.child(e.name), st.mode.Type())
		case changed && st.mode.IsRegular() && strings.HasPrefix(r, "refs/replace/"):
			if err := d.remove(e.name); err != nil {
				s.fail(fmt.Errorf("the command made the replace ref %s, and removing it failed: %w; run git replace -d before you trust git log in %s", r, err, top))
				continue
			}
			s.note("removed the replace ref %s that the command made: git would have shown you another object instead of the real one", r)
		case st.mode.IsDir():
			subSparse := sparse && !st.born(s.since)
			if sparse && !marked && subSparse {
				continue
			}
			sub, restore, err := d.open(e.name)
			if err != nil {
				if !isNotExist(err) {
					s.fail(err)
				}
				continue
			}
			s.oddFiles(sub, r, top, depth+1, subSparse)
			sub.close()
			restore()
			if changed && st.mode.Perm()&0o700 != 0o700 {
				// git writes in every directory of its git directory
				// (reflogs, refs, objects): one the command made
				// read-only would fail the user's next commit.
				if err := d.chmodEntry(e.name, st.mode|0o700); err != nil {
					s.fail(fmt.Errorf("giving %s back the write permission git needs: %w", d.child(e.name), err))
				}
			}
		}
	}
}

// nestedGitDir reports whether the directory name of d (rel inside its
// git directory) is laid out as a git directory of its own. git makes
// such directories only under modules/ and worktrees/, which stay
// read-only.
func (s *scan) nestedGitDir(d *dir, name, rel string) bool {
	if strings.HasPrefix(rel, "modules/") || strings.HasPrefix(rel, "worktrees/") {
		return false
	}
	sub, err := d.openPlain(name)
	if err != nil {
		return false
	}
	defer sub.close()
	bare, err := bareShape(sub)
	return bare || err != nil
}

func (s *scan) gitDirOf(d *dir) string {
	for p := d.path; p != filepath.Dir(p); p = filepath.Dir(p) {
		if git.IsDotGit(filepath.Base(p)) {
			return p
		}
	}
	return d.path
}

// sequencer moves aside the sequencer directory name of the git
// directory g when the command made or changed anything in it: an
// interrupted operation the user had, left alone, stays.
func (s *scan) sequencer(g *dir, name string) {
	st, err := g.stat(name)
	if err != nil {
		if !isNotExist(err) {
			s.fail(err)
		}
		return
	}
	changed := st.changed(s.since)
	if !changed && st.mode.IsDir() {
		sub, restore, err := g.open(name)
		if err != nil {
			s.fail(err)
			return
		}
		changed, err = anyChanged(sub, s.since, 0)
		sub.close()
		restore()
		if err != nil {
			s.fail(err)
			return
		}
	}
	if !changed {
		return
	}
	to, err := s.q.move(g, name)
	if err != nil {
		s.fail(fmt.Errorf("the command left an interrupted rebase, cherry-pick or am in %s, and moving it aside failed: %w; do not continue it (git rebase --continue runs its exec lines): remove it", g.child(name), err))
		return
	}
	s.note("the command left an interrupted rebase, cherry-pick or am in %s; moved it to %s, because continuing it would run the exec lines and merge strategy the command wrote (HEAD may be detached: git switch back to your branch)", g.child(name), to)
}

// anyChanged reports whether anything below d was made or changed at or
// after t.
func anyChanged(d *dir, t time.Time, depth int) (bool, error) {
	if depth > maxDepth {
		return true, nil
	}
	ents, err := d.entries()
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		st, err := d.stat(e.name)
		if err != nil {
			if isNotExist(err) {
				continue
			}
			return false, err
		}
		if st.changed(t) {
			return true, nil
		}
		if st.mode.IsDir() {
			sub, restore, err := d.open(e.name)
			if err != nil {
				return false, err
			}
			c, err := anyChanged(sub, t, depth+1)
			sub.close()
			restore()
			if c || err != nil {
				return c, err
			}
		}
	}
	return false, nil
}

// packedRefs drops the replace refs the command packed into packed-refs
// (those not in the baseline, or with another object id); the user's stay.
func (s *scan) packedRefs(g *dir, b Baseline) {
	st, err := g.stat("packed-refs")
	if err != nil {
		if !isNotExist(err) {
			s.fail(err)
		}
		return
	}
	if !st.changed(s.since) || !st.mode.IsRegular() {
		return
	}
	data, ok, err := g.readFile("packed-refs", maxGitFile)
	if err != nil || !ok {
		to, merr := s.q.move(g, "packed-refs")
		if merr != nil {
			s.fail(fmt.Errorf("%s changed and agentbox cannot check it for replace refs (%v), and moving it aside failed: %w", g.child("packed-refs"), err, merr))
			return
		}
		s.note("%s changed and agentbox cannot check it for replace refs (%v); moved it to %s (inspect it before you put it back)", g.child("packed-refs"), err, to)
		return
	}
	var keep []byte
	var dropped []string
	dropping := false
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("^")) {
			if !dropping {
				keep = append(keep, line...)
			}
			continue
		}
		dropping = false
		oid, name, ok := strings.Cut(strings.TrimRight(string(line), "\n"), " ")
		if ok && strings.HasPrefix(name, "refs/replace/") && b.Replace[name] != oid {
			dropping = true
			dropped = append(dropped, name)
			continue
		}
		keep = append(keep, line...)
	}
	if len(dropped) == 0 {
		return
	}
	tmp := "packed-refs.agentbox-" + s.q.randomHex(4)
	err = g.writeNew(tmp, keep, st.mode.Perm())
	if err == nil {
		err = g.rename(tmp, g, "packed-refs")
	}
	if err != nil {
		g.remove(tmp)
		s.fail(fmt.Errorf("the command packed the replace refs %s into %s, and removing them failed: %w; run git replace -d before you trust git log there", strings.Join(dropped, ", "), g.child("packed-refs"), err))
		return
	}
	s.note("removed the replace refs %s that the command packed into %s: git would have shown you other objects instead of the real ones", strings.Join(dropped, ", "), g.child("packed-refs"))
}

// packedReplace lists the replace refs of a packed-refs file.
func packedReplace(data []byte) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if oid, name, ok := strings.Cut(line, " "); ok && strings.HasPrefix(name, "refs/replace/") {
			out[name] = oid
		}
	}
	return out
}

// rootIndex checks the index file name of the root's git directory g,
// whose worktree is top, when it changed during the window.
func (s *scan) rootIndex(g *dir, name, top string, b Baseline) {
	st, err := g.stat(name)
	if err != nil {
		if !isNotExist(err) {
			s.fail(err)
		}
		return
	}
	if !st.changed(s.since) {
		return
	}
	err = s.checkIndex(g, name, top, b)
	if err == nil {
		return
	}
	to, merr := s.q.move(g, name)
	if merr != nil {
		s.fail(fmt.Errorf("the command left a git index agentbox does not trust (%v), and moving it aside failed: %w; do not run git in %s before you inspect it", err, merr, top))
		return
	}
	s.note("the command left a git index agentbox does not trust (%v); moved it to %s (inspect it before you use it; git reset rebuilds one from HEAD)", err, to)
}

// checkIndex reads the index as git would use it. git trusts an entry
// whose recorded size, times and inode match the file without reading
// it, and a command that can write the index can record a changed file's
// new stat data beside the old object id: git status and git diff then
// show the file unchanged (a Makefile it rewrote) while the worktree holds
// the command's version. Resetting the times of every listed file that
// changed during the window makes the stat data differ, so git reads it.
// An entry newly marked assume-unchanged or skip-worktree (git never looks
// at those files) is an error.
func (s *scan) checkIndex(g *dir, name, top string, b Baseline) error {
	f, err := g.openFile(name)
	if err != nil {
		return err
	}
	var entries []git.IndexEntry
	_, err = git.ParseIndex(f, hashLenOf(g), true, func(e git.IndexEntry) { entries = append(entries, e) })
	f.Close()
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Hidden {
			if _, ok := slices.BinarySearch(b.Hidden, e.Path); !ok {
				return fmt.Errorf("%s is newly marked assume-unchanged or skip-worktree, which hides its changes from git status", e.Path)
			}
		}
	}
	w, err := openTop(top)
	if err != nil {
		return err
	}
	defer w.close()
	dirs := map[string]*dir{"": w}
	defer func() {
		for k, d := range dirs {
			if k != "" && d != nil {
				d.close()
			}
		}
	}()
	// parent opens an entry's directory the way git reaches it: no
	// symlink on the way (git does not follow one to an entry either).
	var parent func(rel string) *dir
	parent = func(rel string) *dir {
		if d, ok := dirs[rel]; ok {
			return d
		}
		up := parent(path.Dir(rel))
		if rel == "." {
			up = w
		}
		var d *dir
		if up != nil {
			if fd, err := up.openPlain(path.Base(rel)); err == nil {
				d = fd
			}
		}
		dirs[rel] = d
		return d
	}
	dirs["."] = w
	for _, e := range entries {
		if e.Mode>>12 == 0o16 { // gitlinks: the scan of the worktree saw their .git
			continue
		}
		d := parent(path.Dir(e.Path))
		if d == nil {
			continue
		}
		base := path.Base(e.Path)
		st, err := d.stat(base)
		if err != nil || !st.changed(s.since) {
			continue
		}
		if err := d.touch(base); err != nil && !isNotExist(err) {
			return fmt.Errorf("resetting the times of %s, which the command changed: %w", d.child(base), err)
		}
	}
	return nil
}

// indexFiles are [git.IndexFiles] less agentbox's own temporary files.
func indexFiles(gitdir string) []string {
	return slices.DeleteFunc(git.IndexFiles(gitdir), func(p string) bool {
		return strings.Contains(filepath.Base(p), ".agentbox-")
	})
}

// hashLenOf is the object id length of the repository whose git
// directory is d.
func hashLenOf(d *dir) int {
	data, ok, err := d.readFile("config", 1<<20)
	if err != nil || !ok {
		return 20
	}
	es, err := git.ParseConfig(data)
	if err != nil {
		return 20
	}
	return git.HashLen(es)
}

// hashLenAt is hashLenOf for a path.
func hashLenAt(gitdir string) int {
	d, err := openTop(gitdir)
	if err != nil {
		return 20
	}
	defer d.close()
	return hashLenOf(d)
}

func readSmallFile(p string, max int) ([]byte, error) {
	d, err := openTop(filepath.Dir(p))
	if err != nil {
		return nil, err
	}
	defer d.close()
	data, ok, err := d.readFile(filepath.Base(p), max)
	if err == nil && !ok {
		err = fmt.Errorf("%s: larger than agentbox reads", p)
	}
	return data, err
}
