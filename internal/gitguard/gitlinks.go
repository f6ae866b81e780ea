package gitguard

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/internal/gitfile"
	"github.com/agentbox/agentbox/policy"
)

// Guard closes a hole allow_git_writes opens: with the index
// writable, a command can add a gitlink (a submodule entry) at a
// directory where it made a repository of its own, and the user's next
// plain `git status`, `diff` or `commit` at the top recurses into that
// repository and runs what its config names (core.fsmonitor) on the host.
// Submodules the index held before the run have their .git protected
// (policy/gitpaths.go); the guard remembers them, and after the run renames the
// .git of every gitlink added meanwhile out of git's sight. The command's
// processes are gone by then, so nothing races the rename.
//
// A gitlink can also reach the index later, through a commit the command
// made that the user merges or checks out: so the guard also lists every
// nested .git (a directory, a .git file or a symlink) in the worktree
// before the run, holding each open so that its inode cannot be reused,
// and moves aside each one that is new after the run.
type Guard struct {
	before map[string]map[string]bool // git directory -> gitlink paths
	nested map[string]map[string]nestedGit
	links  map[string]map[string]string // git directory -> its symlinks' targets
	repl   map[string]map[string]string // git directory -> replace refs (name -> value)
	seq    map[string]map[string]string // git directory -> sequencer state files (path -> content)
	hidden map[string]map[string]bool   // git directory -> index paths marked assume-unchanged or skip-worktree
	start  time.Time

	// Stamps, set by the backend, read and reset file times; without
	// them an index entry whose file the command changed cannot be made
	// untrusted, and the index is moved aside instead.
	Stamps *Stamps
}

// Stamps are the file times the policy core cannot read itself.
type Stamps struct {
	// ChangedSince reports whether path (not followed) had its inode
	// changed (ctime) at or after t, or cannot tell.
	ChangedSince func(path string, t time.Time) bool
	// Touch sets path's (not followed) access and modification times to
	// now.
	Touch func(path string) error
}

// nestedGit is a .git below a worktree's top as the run found it.
type nestedGit struct {
	fi     os.FileInfo
	f      *os.File // held against inode reuse (not for symlinks)
	target string   // a symlink's target, a .git file's content
	sum    string   // a directory's: what makes git run programs in it
}

// New records the gitlinks of each git directory that
// allow_git_writes opens for writing; nil when there is none.
func New(p *policy.Policy) *Guard {
	if !p.AllowGitWrites() || p.Mode() != policy.WorkspaceWrite {
		return nil
	}
	g := &Guard{before: map[string]map[string]bool{}, nested: map[string]map[string]nestedGit{}, links: map[string]map[string]string{}, repl: map[string]map[string]string{}, seq: map[string]map[string]string{},
		hidden: map[string]map[string]bool{}, start: time.Now().Add(-2 * time.Second)}
	for _, pr := range p.Protected() {
		if !WritableDir(pr) {
			continue
		}
		set, hidden := map[string]bool{}, map[string]bool{}
		for _, ix := range gitIndexFiles(pr.Path) {
			links, _ := gitfile.ReadIndexGitlinks(ix, gitHashLen(pr.Path), false, func(e gitfile.IndexEntry) {
				if e.Hidden {
					hidden[e.Path] = true
				}
			})
			for _, l := range links {
				set[l] = true
			}
		}
		g.before[pr.Path] = set
		g.hidden[pr.Path] = hidden
		found := map[string]nestedGit{}
		walkNestedGits(filepath.Dir(pr.Path), false, func(path string, fi os.FileInfo) {
			n := nestedGit{fi: fi, target: nestedGitTarget(path, fi), sum: nestedGitSum(path, fi)}
			if fi.Mode()&fs.ModeSymlink == 0 && len(found) < maxHeldGits {
				if f, err := os.Open(path); err == nil {
					if ffi, err := f.Stat(); err == nil && os.SameFile(fi, ffi) {
						n.f = f
					} else {
						f.Close()
					}
				}
			}
			found[path] = n
		})
		g.nested[pr.Path] = found
		links := map[string]string{}
		walkGitDirOdd(pr.Path, false, func(path string, fi os.FileInfo) {
			if fi.Mode()&fs.ModeSymlink != 0 {
				links[path], _ = os.Readlink(path)
			}
		})
		g.links[pr.Path] = links
		g.repl[pr.Path] = replaceRefs(pr.Path)
		g.seq[pr.Path] = sequencerState(pr.Path, false)
	}
	if len(g.before) == 0 {
		return nil
	}
	return g
}

// Check runs after the command is gone. It returns one message per thing
// it moved aside: each nested .git that is new, and the .git of each new
// gitlink (renamed to .git.agentbox-quarantine), or an index agentbox
// cannot read (git might; it is renamed to index.agentbox-unreadable
// rather than trusted).
func (g *Guard) Check() []string {
	if g == nil {
		return nil
	}
	var msgs []string
	for gitdir, before := range g.before {
		top := filepath.Dir(gitdir)
		old := g.nested[gitdir]
		warn := walkNestedGits(top, true, func(path string, fi os.FileInfo) {
			if n, ok := old[path]; ok && os.SameFile(n.fi, fi) && n.target == nestedGitTarget(path, fi) &&
				(n.f != nil || fi.Mode()&fs.ModeSymlink != 0) && sameSum(n.sum, nestedGitSum(path, fi)) {
				return // the one that was there (held open: not a reused inode)
			}
			to, err := quarantine(path, ".agentbox-quarantine")
			if err != nil {
				msgs = append(msgs, fmt.Sprintf("allow_git_writes: the command made a git repository at %s; moving it aside failed: %v; do not run git in %s before you remove it", path, err, top))
				return
			}
			msgs = append(msgs, fmt.Sprintf("allow_git_writes: the command made a git repository at %s, inside the worktree of %s (a commit that adds a submodule there would make your git run its configuration); moved it to %s (inspect it, and move it back only if you trust it)", path, top, to))
		})
		msgs = append(msgs, warn...)
		// Symlinks (and FIFOs, sockets, devices) the command left in the
		// git directory: git writes through them (reflogs are appended
		// to logs/HEAD, COMMIT_EDITMSG and FETCH_HEAD are rewritten), so
		// logs/HEAD pointing at ~/.bashrc would have the user's next
		// checkout append a branch name the command chose to it.
		oldLinks := g.links[gitdir]
		warn = walkGitDirOdd(gitdir, true, func(path string, fi os.FileInfo) {
			if t, ok := oldLinks[path]; ok && fi.Mode()&fs.ModeSymlink != 0 {
				if now, _ := os.Readlink(path); now == t {
					return
				}
			}
			if err := os.Remove(path); err != nil {
				msgs = append(msgs, fmt.Sprintf("allow_git_writes: the command left %s (%s) in %s, and removing it failed: %v; do not run git there before you remove it", path, fi.Mode().Type(), gitdir, err))
				return
			}
			msgs = append(msgs, fmt.Sprintf("allow_git_writes: removed %s (%s) that the command made in %s: git would have written through it", path, fi.Mode().Type(), gitdir))
		})
		msgs = append(msgs, warn...)
		msgs = append(msgs, dropNewReplaceRefs(gitdir, g.repl[gitdir])...)
		msgs = append(msgs, quarantineSequencer(gitdir, g.seq[gitdir])...)
		for _, n := range old {
			if n.f != nil {
				n.f.Close()
			}
		}
		for _, ix := range gitIndexFiles(gitdir) {
			var entries []gitfile.IndexEntry
			links, err := gitfile.CheckedIndexGitlinks(ix, gitHashLen(gitdir), func(e gitfile.IndexEntry) { entries = append(entries, e) })
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err == nil {
				err = g.distrust(top, gitdir, entries)
			}
			if err != nil {
				if to, rerr := quarantine(ix, ".agentbox-unreadable"); rerr == nil {
					msgs = append(msgs, fmt.Sprintf("allow_git_writes: the command left a git index agentbox does not trust (%v); moved it to %s (inspect it before you use it; git reset rebuilds one from HEAD)", err, to))
				} else {
					msgs = append(msgs, fmt.Sprintf("allow_git_writes: the command left a git index agentbox does not trust (%v), and moving it aside failed: %v; do not run git in %s before you inspect it", err, rerr, top))
				}
				continue
			}
			for _, l := range links {
				if before[l] || !gitfile.SafeIndexPath(l) {
					continue
				}
				if m := g.neutralize(top, l); m != "" {
					msgs = append(msgs, m)
				}
			}
		}
	}
	return msgs
}

// neutralize moves aside the .git that git would use for the new gitlink
// l of the worktree top (itself a symlink, possibly: git follows that one).
func (g *Guard) neutralize(top, l string) string {
	// git refuses a submodule path with a symlink on the way ("expected
	// submodule path not to be a symbolic link"), so agentbox does not
	// follow one either: it would rename a .git elsewhere.
	dir := top
	for _, c := range strings.Split(l, "/") {
		dir = filepath.Join(dir, c)
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			return ""
		}
	}
	dotgit := filepath.Join(dir, ".git")
	if _, err := os.Lstat(dotgit); err != nil {
		return ""
	}
	to, err := quarantine(dotgit, ".agentbox-quarantine")
	if err != nil {
		return fmt.Sprintf("allow_git_writes: the command added submodule %s to %s; moving its %s aside failed: %v; do not run git in %s before you remove it", l, top, dotgit, err, top)
	}
	return fmt.Sprintf("allow_git_writes: the command added submodule %s to %s, with a git directory of its own; moved %s to %s so that git does not run its configuration (inspect it, and move it back only if you trust it)", l, top, dotgit, to)
}

// quarantine renames path to path+suffix (numbered if taken).
func quarantine(path, suffix string) (string, error) {
	for i := 0; i < 100; i++ {
		to := path + suffix
		if i > 0 {
			to = fmt.Sprintf("%s%s.%d", path, suffix, i)
		}
		if _, err := os.Lstat(to); err == nil {
			continue
		}
		if err := os.Rename(path, to); err != nil {
			return "", err
		}
		return to, nil
	}
	return "", errors.New("too many quarantined copies already")
}

// gitIndexFiles are the index and the split index's shared files.
func gitIndexFiles(gitdir string) []string {
	out := []string{filepath.Join(gitdir, "index")}
	shared, _ := filepath.Glob(filepath.Join(gitdir, "sharedindex.*"))
	for _, s := range shared {
		if !strings.Contains(filepath.Base(s), ".agentbox-") {
			out = append(out, s)
		}
	}
	return out
}

// gitHashLen is the object id length of the repository at gitdir.
func gitHashLen(gitdir string) int {
	data, err := gitfile.ReadConfigFile(filepath.Join(gitdir, "config"))
	if err != nil {
		return 20
	}
	es, err := gitfile.ParseConfig(data)
	if err != nil {
		return 20
	}
	for _, e := range es {
		if e.Name == "extensions.objectformat" && strings.EqualFold(e.Value, "sha256") {
			return 32
		}
	}
	return 20
}

// maxHeldGits bounds the descriptors a run holds; a nested .git beyond it
// is not held, and is moved aside after the run as if it were new.
const maxHeldGits = 512

// nestedGitTarget is what a .git names besides its inode: a symlink's target, a
// .git file's content (gitdir: ...); "" for a directory.
func nestedGitTarget(path string, fi os.FileInfo) string {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, _ := os.Readlink(path)
		return t
	case fi.Mode().IsRegular():
		f, err := os.Open(path)
		if err != nil {
			return ""
		}
		defer f.Close()
		buf := make([]byte, 4096)
		n, _ := gitfile.ReadFull(f, buf)
		return string(buf[:n])
	}
	return ""
}

// walkNestedGits calls fn for each entry named .git below top (any case:
// case-insensitive file systems find .GIT for .git), not following
// symlinks and not descending into git directories; top's own .git is
// skipped. It returns a message for each directory it could not read: git,
// running as the same user, may still reach a .git beneath it by path.
func walkNestedGits(top string, after bool, fn func(path string, fi os.FileInfo)) []string {
	var warn []string
	walkTree(top, after, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path != top {
				warn = append(warn, fmt.Sprintf("allow_git_writes: could not look for git repositories the command made in %s: %v; do not run git in %s before you check it", path, err, top))
			}
			return nil
		}
		if path == top || !strings.EqualFold(d.Name(), ".git") {
			return nil
		}
		if filepath.Dir(path) != top {
			if fi, err := os.Lstat(path); err == nil {
				fn(path, fi)
			}
		}
		if d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
	return warn
}

// walkGitDirOdd calls fn for each entry below the git directory gitdir that
// is neither a regular file nor a directory (git makes neither symlinks
// nor anything else there), not following symlinks. It returns a message
// for each directory it could not read.
func walkGitDirOdd(gitdir string, after bool, fn func(path string, fi os.FileInfo)) []string {
	var warn []string
	walkTree(gitdir, after, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path != gitdir {
				warn = append(warn, fmt.Sprintf("allow_git_writes: could not check %s for symlinks the command made: %v; do not run git in %s before you check it", path, err, filepath.Dir(gitdir)))
			}
			return nil
		}
		if t := d.Type(); t != 0 && t != fs.ModeDir {
			if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
				fn(path, fi)
			}
		}
		return nil
	})
	return warn
}

// maxPackedRefs bounds the packed-refs file agentbox reads (a repository
// with a hundred thousand tags has about 10 MB).
const maxPackedRefs = 256 << 20

// replaceRefs lists the replace refs of gitdir (git-replace(1)): loose
// under refs/replace and in packed-refs, by name, with their values.
func replaceRefs(gitdir string) map[string]string {
	out := map[string]string{}
	base := filepath.Join(gitdir, "refs", "replace")
	filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if data, err := gitfile.ReadSmall(path); err == nil {
				rel, _ := filepath.Rel(base, path)
				out["refs/replace/"+filepath.ToSlash(rel)] = strings.TrimSpace(string(data))
			}
		}
		return nil
	})
	if fi, err := os.Stat(filepath.Join(gitdir, "packed-refs")); err != nil || fi.Size() > maxPackedRefs {
		return out
	}
	if data, err := os.ReadFile(filepath.Join(gitdir, "packed-refs")); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if oid, name, ok := strings.Cut(line, " "); ok && strings.HasPrefix(name, "refs/replace/") {
				out["packed:"+name] = oid
			}
		}
	}
	return out
}

// dropNewReplaceRefs removes the replace refs the command added or
// changed: git shows (and checks out) a replaced object's replacement
// instead of the object, so a command could commit one thing and have the
// user review, merge and build another, and push the first. Replace refs
// the user had stay.
func dropNewReplaceRefs(gitdir string, before map[string]string) []string {
	var msgs []string
	for name, v := range replaceRefs(gitdir) {
		if before[name] == v {
			continue
		}
		if strings.HasPrefix(name, "packed:") {
			continue // below, all at once
		}
		path := filepath.Join(gitdir, filepath.FromSlash(name))
		if err := os.Remove(path); err != nil {
			msgs = append(msgs, fmt.Sprintf("allow_git_writes: the command made the replace ref %s in %s, and removing it failed: %v; run git replace -d before you trust git log there", name, gitdir, err))
			continue
		}
		msgs = append(msgs, fmt.Sprintf("allow_git_writes: removed the replace ref %s (%s) that the command made in %s: git would have shown you that object instead of the real one", name, v, gitdir))
	}
	packed := filepath.Join(gitdir, "packed-refs")
	fi, err := os.Lstat(packed)
	if err != nil || !fi.Mode().IsRegular() {
		return msgs
	}
	if fi.Size() > maxPackedRefs {
		to, err := quarantine(packed, ".agentbox-unchecked")
		return append(msgs, fmt.Sprintf("allow_git_writes: %s is larger than agentbox checks for replace refs (%d bytes); moved it to %s (%v): inspect it before you put it back", packed, fi.Size(), to, err))
	}
	data, err := os.ReadFile(packed)
	if err != nil {
		return append(msgs, fmt.Sprintf("allow_git_writes: could not read %s to check it for replace refs: %v", packed, err))
	}
	var keep []string
	dropped, dropping := []string{}, false
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if strings.HasPrefix(line, "^") {
			if !dropping {
				keep = append(keep, line)
			}
			continue
		}
		dropping = false
		oid, name, ok := strings.Cut(strings.TrimRight(line, "\n"), " ")
		if ok && strings.HasPrefix(name, "refs/replace/") && before["packed:"+name] != oid {
			dropping = true
			dropped = append(dropped, name)
			continue
		}
		keep = append(keep, line)
	}
	if len(dropped) == 0 {
		return msgs
	}
	tmp := packed + ".agentbox-tmp"
	err = os.WriteFile(tmp, []byte(strings.Join(keep, "")), fi.Mode().Perm())
	if err == nil {
		err = os.Rename(tmp, packed)
	}
	if err != nil {
		os.Remove(tmp)
		return append(msgs, fmt.Sprintf("allow_git_writes: the command packed the replace refs %s into %s, and removing them failed: %v; run git replace -d before you trust git log there", strings.Join(dropped, ", "), packed, err))
	}
	return append(msgs, fmt.Sprintf("allow_git_writes: removed the replace refs %s that the command packed into %s: git would have shown you other objects instead of the real ones", strings.Join(dropped, ", "), packed))
}

// sequencerDirs hold an interrupted rebase, cherry-pick, revert or am:
// `git rebase --continue` runs the todo list's exec lines, and the merge
// strategy named in rebase-merge/strategy or sequencer/opts is run as
// `git merge-<strategy>` (a program, when it contains a slash).
var sequencerDirs = []string{"rebase-merge", "rebase-apply", "sequencer"}

// maxSequencerState bounds what agentbox reads of that state; more counts
// as changed.
const maxSequencerState = 16 << 20

// sequencerState reads the sequencer directories' files, by path.
func sequencerState(gitdir string, after bool) map[string]string {
	out := map[string]string{}
	total := 0
	for _, d := range sequencerDirs {
		walkTree(filepath.Join(gitdir, d), after, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			v := "dir"
			if !e.IsDir() {
				v = "?"
				if e.Type().IsRegular() && total < maxSequencerState {
					if data, err := os.ReadFile(path); err == nil && total+len(data) <= maxSequencerState {
						v = "=" + string(data)
						total += len(data)
					}
				}
			}
			out[path] = v
			return nil
		})
	}
	return out
}

// quarantineSequencer moves aside each sequencer directory the command
// made or changed, so that no continue runs a todo list it wrote. An
// interrupted operation the user had, left alone by the command, stays.
func quarantineSequencer(gitdir string, before map[string]string) []string {
	after := sequencerState(gitdir, true)
	var msgs []string
	for _, d := range sequencerDirs {
		dir := filepath.Join(gitdir, d)
		changed := false
		for p, v := range after {
			if fspath.Within(p, dir) && (before[p] != v || v == "?") {
				changed = true
			}
		}
		for p := range before {
			if fspath.Within(p, dir) {
				if _, ok := after[p]; !ok {
					changed = true
				}
			}
		}
		if _, ok := after[dir]; !ok || !changed {
			continue
		}
		to, err := quarantine(dir, ".agentbox-quarantine")
		if err != nil {
			msgs = append(msgs, fmt.Sprintf("allow_git_writes: the command left an interrupted rebase, cherry-pick or am in %s, and moving it aside failed: %v; do not continue it (git rebase --continue runs its exec lines): remove it", dir, err))
			continue
		}
		msgs = append(msgs, fmt.Sprintf("allow_git_writes: the command left an interrupted rebase, cherry-pick or am in %s; moved it to %s, because continuing it would run the exec lines and merge strategy the command wrote (HEAD may be detached: git switch back to your branch)", dir, to))
	}
	return msgs
}

// nestedGitSum digests, for a nested git directory, the files through which
// git run in it (or recursing into it as a submodule) runs programs: its
// configuration, hooks, info/ and alternates. A repository that was
// there before the run is writable to the command like any directory; once
// the command has rewritten its config, a commit making it a submodule would
// have the user's git status run it. "" for anything but a directory; a
// fixed mark when there is more than agentbox reads (then it counts as
// changed).
func nestedGitSum(path string, fi os.FileInfo) string {
	if !fi.IsDir() {
		return ""
	}
	h := sha256.New()
	total := 0
	for _, rel := range []string{"config", "config.worktree", "commondir", "hooks", "info", "objects/info/alternates", "objects/info/http-alternates"} {
		filepath.WalkDir(filepath.Join(path, filepath.FromSlash(rel)), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				fmt.Fprintf(h, "%s\x00error\x00", p)
				return nil
			}
			fmt.Fprintf(h, "%s\x00%v\x00", p, d.Type())
			if d.Type().IsRegular() && total <= maxNestedGitSum {
				if data, err := os.ReadFile(p); err == nil {
					total += len(data)
					h.Write(data)
				}
			}
			return nil
		})
	}
	if total > maxNestedGitSum {
		return nestedGitTooLarge
	}
	return hex.EncodeToString(h.Sum(nil))
}

const nestedGitTooLarge = "too large"

func sameSum(a, b string) bool { return a == b && b != nestedGitTooLarge }

// maxNestedGitSum bounds what agentbox reads of one nested repository.
const maxNestedGitSum = 8 << 20

// distrust makes git look again at every file the command changed that
// the index lists. git trusts an entry whose recorded size, times and
// inode match the file without reading it, and a command that can write
// the index can record a changed file's new stat data beside the old
// object id: git status and git diff then show the file unchanged (a
// Makefile it rewrote) while the worktree holds the command's version.
// Resetting the file's times makes the stat data differ, so git reads the
// file. An entry newly marked assume-unchanged or skip-worktree (git never
// looks at those files) is an error: the index is then moved aside.
func (g *Guard) distrust(top, gitdir string, entries []gitfile.IndexEntry) error {
	for _, e := range entries {
		if e.Hidden && !g.hidden[gitdir][e.Path] {
			return fmt.Errorf("%s is newly marked assume-unchanged or skip-worktree, which hides its changes from git status", e.Path)
		}
	}
	if g.Stamps == nil {
		if len(entries) > 0 {
			return errors.New("agentbox cannot check its entries' file times on this system")
		}
		return nil
	}
	realDir := map[string]bool{top: true}
	var isRealDir func(string) bool
	isRealDir = func(d string) bool {
		if v, ok := realDir[d]; ok {
			return v
		}
		fi, err := os.Lstat(d)
		v := err == nil && fi.IsDir() && d != filepath.Dir(d) && isRealDir(filepath.Dir(d))
		realDir[d] = v
		return v
	}
	for _, e := range entries {
		if e.Mode>>12 == 0o16 { // gitlinks: checked above
			continue
		}
		p := filepath.Join(top, filepath.FromSlash(e.Path))
		// git does not follow symlinks on the way to an entry, and
		// neither does agentbox: it only touches the worktree.
		if !isRealDir(filepath.Dir(p)) || !g.Stamps.ChangedSince(p, g.start) {
			continue
		}
		if err := g.Stamps.Touch(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("resetting the times of %s, which the command changed: %w", p, err)
		}
	}
	return nil
}

// walkTree is filepath.WalkDir; after the run (after), a directory the
// command left unreadable is made readable (u+rx) and walked: git, running
// as the same user, needs only search permission to reach what lies inside
// by path (a rebase-merge/git-rebase-todo, a sub/.git), so agentbox must
// see it too. Before the run the user's tree is walked as it is.
func walkTree(root string, after bool, fn fs.WalkDirFunc) {
	retried := map[string]bool{}
	var walk func(string)
	walk = func(r string) {
		filepath.WalkDir(r, func(path string, d fs.DirEntry, err error) error {
			if err != nil && after && d != nil && d.IsDir() && errors.Is(err, fs.ErrPermission) && !retried[path] {
				retried[path] = true
				if fi, lerr := os.Lstat(path); lerr == nil && fi.IsDir() && os.Chmod(path, fi.Mode().Perm()|0o500) == nil {
					walk(path)
					return nil
				}
			}
			return fn(path, d, err)
		})
	}
	walk(root)
}
