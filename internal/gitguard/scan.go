package gitguard

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/git"
)

// A scan looks at one writable root after a window closed, for what git
// run on the host would find there and trust although a sandboxed command
// made or changed it during the window: a .git at any depth (a directory,
// a "gitdir:" file or a symlink), a directory shaped like a bare
// repository, and in a repository that was there before, the files
// through which git runs programs. What it finds is moved aside
// (quarantine.go); what it cannot look at or move is an error, and the run
// fails.
//
// Nothing is taken on trust from the tree itself: whether an inode is new
// comes from its birth and change times, which the kernel sets and no
// unprivileged process can set back (info.go).
type scan struct {
	since time.Time
	// skip are absolute paths not entered: read-only carve-outs no
	// command of the window could write, agentbox's own directories, and
	// the roots of other windows still open inside this root (checked
	// when those close, from a start no later than this one's).
	skip map[string]bool
	// own are the git directories [rootGit] checks: a root's own .git,
	// which the command may write under allow_git_writes and which is
	// not moved aside but repaired.
	own map[string]bool
	// sparse: a watcher saw which directories changed (dirty), so the
	// walk goes only down to them (through anc, their ancestors) and
	// into directories made during the window. needFull is set when
	// what it finds means the watcher may have missed a change.
	sparse   bool
	dirty    map[string]bool
	anc      map[string]bool
	needFull bool

	q     *quarantine
	notes []string
	errs  []error
	dirs  int // directories looked at, against maxDirs
}

// Bounds on what one scan reads; beyond them it fails closed.
const (
	maxDepth = 256
	maxDirs  = 4 << 20
	// maxGitFile bounds the git files the guard reads (an index, a
	// packed-refs); a larger one counts as changed.
	maxGitFile = 256 << 20
)

func (s *scan) fail(err error) { s.errs = append(s.errs, err) }

func (s *scan) note(format string, args ...any) {
	s.notes = append(s.notes, fmt.Sprintf(format, args...))
}

// root scans the tree at top.
func (s *scan) root(top string) {
	d, err := openTop(top)
	if err != nil {
		if !isNotExist(err) {
			s.fail(fmt.Errorf("checking %s for git repositories the command made: %w", top, err))
		}
		return
	}
	defer d.close()
	// A root that holds no repository of its own could itself be made
	// to look like a bare one.
	if bare, err := bareShape(d); err != nil {
		s.fail(err)
	} else if bare {
		s.bare(d, nil, "")
	}
	s.walk(d, 0, s.sparse)
}

// walk looks at the entries of d and below it: all of them, or in a
// sparse scan those the watcher marked and what is new beneath them.
func (s *scan) walk(d *dir, depth int, sparse bool) {
	if s.dirs++; s.dirs > maxDirs || depth > maxDepth {
		s.fail(fmt.Errorf("%s: more directories than agentbox checks (%d deep, %d in all): it cannot tell whether the command planted a git repository there; remove or flatten that tree (every run of this workspace fails until then)", d.path, depth, s.dirs))
		return
	}
	ents, err := d.entries()
	if err != nil {
		s.fail(fmt.Errorf("listing %s to check for git repositories the command made: %w", d.path, err))
		return
	}
	if depth > 0 && slices.ContainsFunc(ents, func(e entry) bool { return strings.EqualFold(e.name, "HEAD") }) {
		// Without a HEAD nothing is a git directory: the listing
		// answers for most directories without another call (by any
		// case, as a case-insensitive file system finds it).
		bare, err := bareShape(d)
		if err != nil {
			s.fail(err)
			return
		}
		if bare {
			// A git directory: checked as one, not walked as a
			// worktree (git does not look for .git inside it).
			s.bare(d, nil, "")
			return
		}
	}
	examine := !sparse || s.dirty[d.path]
	if examine {
		s.partsOfRepo(d, ents)
	}
	for _, e := range ents {
		p := d.child(e.name)
		if s.skip[p] {
			continue
		}
		marked := s.dirty[p] || s.anc[p]
		if git.IsDotGit(e.name) {
			if !s.own[p] && (examine || marked) {
				s.dotGit(d, e.name)
			}
			continue
		}
		if e.typ != fs.ModeDir {
			if examine && sparse && (e.typ == 0 || e.typ == fs.ModeIrregular) {
				// A file written through another link is a change the
				// watcher reported elsewhere (or not at all).
				if st, err := d.stat(e.name); err == nil && st.mode.IsRegular() && st.nlink > 1 && st.changed(s.since) {
					s.needFull = true
				}
			}
			continue
		}
		subSparse := sparse
		if sparse {
			switch {
			case marked:
			case examine:
				st, err := d.stat(e.name)
				if err != nil || !st.born(s.since) {
					continue
				}
				subSparse = false // made during the window: all of it is new
			default:
				continue
			}
		}
		if len(s.q.known) > 0 {
			if done := s.remembered(d, e.name); done {
				continue
			}
		}
		sub, restore, err := d.open(e.name)
		if err != nil {
			if !isNotExist(err) {
				s.fail(fmt.Errorf("checking %s for git repositories the command made: %w", p, err))
			}
			continue
		}
		s.walk(sub, depth+1, subSparse)
		sub.close()
		restore()
	}
}

// partsOfRepo stops a repository from being assembled over several
// windows, each check seeing only part of it: a directory (not a git
// directory: walk does not enter those) that holds two or more of
// [git.DirEntries], one of them made during this window, loses those made
// during it to the quarantine. Otherwise a command could lay out
// objects, refs and a config in one run, which git does not take for a
// repository, and in a later one add a HEAD and rename the directory to
// a .git that then looks older than that window. (A .git that was there
// before the window and gains objects or refs during it is moved aside
// whole: see gitDirChange.)
func (s *scan) partsOfRepo(d *dir, ents []entry) {
	var have []string
	for _, e := range ents {
		// By any case: on a case-insensitive file system git's
		// lookups find them so.
		if slices.ContainsFunc(git.DirEntries, func(p string) bool { return strings.EqualFold(p, e.name) }) {
			have = append(have, e.name)
		}
	}
	if len(have) < 2 {
		return
	}
	for _, n := range have {
		st, err := d.stat(n)
		if err != nil {
			if !isNotExist(err) {
				s.fail(err)
			}
			continue
		}
		if !st.born(s.since) {
			continue
		}
		to, err := s.q.move(d, n)
		if err != nil {
			s.fail(fmt.Errorf("%s holds parts of a git repository (%s) the command made during this run, and moving %s aside failed: %w; remove it before you run git there", d.path, strings.Join(have, ", "), n, err))
			continue
		}
		s.note("%s holds parts of a git repository (%s), and the command made %s during this run; moved it to %s, so that no later run can complete the repository out of sight (inspect it; move it back only if you trust it)", d.path, strings.Join(have, ", "), n, to)
	}
}

// remembered handles a directory agentbox moved aside in place before:
// where it put it, it stays (unreadable); anywhere else, under any name, a
// command moved it, and it is moved aside again. It reports whether the
// entry was dealt with.
func (s *scan) remembered(d *dir, name string) bool {
	st, err := d.stat(name)
	if err != nil || !s.q.remembers(st) {
		return false
	}
	p := d.child(name)
	if s.q.atHome(st, p) {
		if st.mode.Perm() != 0 {
			if err := d.chmodEntry(name, 0); err != nil {
				s.fail(fmt.Errorf("making %s, which agentbox moved aside, unreadable again: %w", p, err))
			}
		}
		return true
	}
	to, err := s.q.move(d, name)
	if err != nil {
		s.fail(fmt.Errorf("%s is a git repository agentbox moved aside before, and moving it aside again failed: %w; do not run git in it", p, err))
		return true
	}
	s.note("%s is a git repository agentbox moved aside before, and it was moved back; moved it to %s", p, to)
	return true
}

// dotGit decides about the .git entry name of d, and moves it aside when
// the command made or changed what git would run through it.
func (s *scan) dotGit(d *dir, name string) {
	p := d.child(name)
	st, err := d.stat(name)
	if err != nil {
		if !isNotExist(err) {
			s.fail(err)
		}
		return
	}
	why := ""
	switch {
	case s.q.remembers(st):
		why = "agentbox moved it aside before, and it was put back"
	case !st.mode.IsDir():
		// A "gitdir:" file or a symlink names a git directory elsewhere:
		// a new or rewritten one is the command's choice of repository.
		if st.changed(s.since) {
			why = "the command made or changed it"
		}
	case st.born(s.since):
		if !emptyDir(d, name) {
			why = "the command made it"
		}
	default:
		g, restore, err := d.open(name)
		if err != nil {
			s.fail(fmt.Errorf("checking the git repository at %s: %w", p, err))
			return
		}
		why, err = s.gitDirChange(g)
		g.close()
		restore()
		if err != nil {
			s.fail(err)
			return
		}
	}
	if why == "" {
		return
	}
	to, err := s.q.move(d, name)
	if err != nil {
		s.fail(fmt.Errorf("the git repository at %s cannot be trusted (%s), and moving it aside failed: %w; do not run git in %s before you remove it", p, why, err, d.path))
		return
	}
	s.note("moved the git repository at %s to %s: %s, and git run there on the host would use its configuration and hooks (it is unreadable there, mode 0: chmod -R u+rwX it to inspect it; move it back only if you trust it)", p, to, why)
}

// bare decides about g, a directory shaped like a bare repository (HEAD,
// objects/, refs/), in parent as name (nil for a writable root itself),
// which git uses as a repository when run anywhere beneath it unless
// safe.bareRepository is "explicit". The HEAD is what makes it one: that
// is what is moved aside, and whatever else the directory holds (it may
// be the user's own) stays.
func (s *scan) bare(g *dir, parent *dir, name string) {
	head, err := g.stat("HEAD")
	if err != nil {
		if !isNotExist(err) {
			s.fail(err)
		}
		return
	}
	why := ""
	if head.changed(s.since) {
		why = "the command made it one"
	} else if why, err = s.gitDirChange(g); err != nil {
		s.fail(err)
		return
	}
	if why == "" {
		return
	}
	to, err := s.q.move(g, "HEAD")
	if err != nil {
		s.fail(fmt.Errorf("%s is laid out as a bare git repository that cannot be trusted (%s), and moving its HEAD aside failed: %w; do not run git in it before you remove it", g.path, why, err))
		return
	}
	s.note("%s was laid out as a bare git repository (%s): git run there on the host would use its configuration; moved its HEAD to %s, so git no longer takes it for one (inspect it; move it back only if you trust it)", g.path, why, to)
}

// bareShape is [git.IsGitDir] for d.
func bareShape(d *dir) (bool, error) { return git.IsGitDir(gitDir{d}) }

// gitDir is d as [git.IsGitDir] reads it.
type gitDir struct{ d *dir }

func (g gitDir) ReadFile(name string, max int) (data []byte, found, complete bool, err error) {
	data, complete, err = g.d.readFile(name, max)
	if isNotExist(err) {
		return nil, false, false, nil
	}
	return data, true, complete, err
}

func (g gitDir) Exists(name string) (bool, error) {
	_, err := g.d.stat(name)
	if isNotExist(err) {
		return false, nil
	}
	return err == nil, err
}

// sensitive are the paths of a git directory, relative to it, through
// which git runs programs, reads another repository or continues an
// operation a command prepared. In a repository that was there before
// the window, a change to any of them during it moves the repository
// aside. The list is ReadOnlyPaths plus what allow_git_writes leaves
// writable but checks after the run (sequencer state, replace refs).
var sensitive = []string{
	"config", "config.worktree", "commondir", "gitdir",
	"hooks", "info", "objects/info", "modules", "worktrees", "remotes", "branches",
	"rebase-merge", "rebase-apply", "sequencer", "refs/replace",
}

func isSensitive(rel string) bool {
	for _, s := range sensitive {
		if rel == s || strings.HasPrefix(rel, s+"/") {
			return true
		}
	}
	return false
}

// gitDirChange looks through the git directory g, which existed before
// the window, and says what the command changed there that git would
// act on ("" for nothing): a sensitive path, a symlink or other odd
// file (git writes through those: logs/HEAD pointing at ~/.bashrc), an
// index git would write files outside the worktree from, or packed
// replace refs.
func (s *scan) gitDirChange(g *dir) (string, error) {
	why := ""
	var visit func(d *dir, rel string, depth int) error
	visit = func(d *dir, rel string, depth int) error {
		if s.dirs++; s.dirs > maxDirs || depth > maxDepth {
			return fmt.Errorf("%s: more directories than agentbox checks: it cannot tell what the command changed there", d.path)
		}
		ents, err := d.entries()
		if err != nil {
			return fmt.Errorf("checking the git directory %s: %w", d.path, err)
		}
		for _, e := range ents {
			r := path.Join(rel, e.name)
			st, err := d.stat(e.name)
			if err != nil {
				if isNotExist(err) {
					continue
				}
				return err
			}
			changed := st.changed(s.since)
			switch {
			case rel == "" && (e.name == "objects" || e.name == "refs") && st.born(s.since):
				// git never makes these again in a repository: the
				// repository was assembled (and renamed into place) now.
				why = fmt.Sprintf("the command made %s in it", r)
			case changed && git.IsDotGit(e.name):
				// git's discovery from a directory inside this one finds
				// it before this one (a repository inside a git directory).
				why = fmt.Sprintf("the command made %s in it, a repository of its own", r)
			case changed && st.odd():
				why = fmt.Sprintf("the command left %s (%s) in it, which git would write through", r, st.mode.Type())
			case changed && isSensitive(r):
				why = fmt.Sprintf("the command changed %s in it", r)
			case changed && r == "packed-refs":
				if data, ok, err := d.readFile(e.name, maxGitFile); err != nil || !ok || bytes.Contains(data, []byte("refs/replace/")) {
					why = "the command packed replace refs into it"
				}
			case changed && git.IsIndexName(r):
				if err := s.indexSafe(d, e.name); err != nil {
					why = fmt.Sprintf("the command left an index git would act on wrongly (%v)", err)
				}
			}
			if why != "" {
				return nil
			}
			if st.mode.IsDir() {
				sub, restore, err := d.open(e.name)
				if err != nil {
					if isNotExist(err) {
						continue
					}
					return err
				}
				if changed {
					if bare, berr := bareShape(sub); berr != nil || bare {
						why = fmt.Sprintf("the command laid %s out as a git directory of its own in it", r)
					}
				}
				if why == "" {
					err = visit(sub, r, depth+1)
				}
				sub.close()
				restore()
				if err != nil || why != "" {
					return err
				}
			}
		}
		return nil
	}
	err := visit(g, "", 0)
	return why, err
}

// indexSafe checks an index as git would use it for the worktree: its
// paths (an empty, ".", ".." or ".git" component makes checkout write
// outside the worktree or into a git directory).
func (s *scan) indexSafe(d *dir, name string) error {
	f, err := d.openFile(name)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = git.ParseIndex(f, hashLenOf(d), true, nil)
	return err
}

// emptyDir reports whether name in d is a directory with nothing in it.
// Git finds nothing there to obey (it is no git directory, and git looks
// further up), and it is what agentbox itself puts at a missing .git: a
// session being prepared, or a neighbour run, makes one while this
// window is open, and may take it away again at any moment. A command
// that fills it later does so in a window of its own, which sees a git
// directory changed.
func emptyDir(d *dir, name string) bool {
	g, restore, err := d.open(name)
	if err != nil {
		return false
	}
	defer restore()
	defer g.close()
	ents, err := g.entries()
	return err == nil && len(ents) == 0
}
