package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// GitlinkGuard closes a hole allow_git_writes opens: with the index
// writable, a command can add a gitlink (a submodule entry) at a
// directory where it made a repository of its own, and the user's next
// plain `git status`, `diff` or `commit` at the top recurses into that
// repository and runs what its config names (core.fsmonitor) on the host.
// Submodules the index held before the run have their .git protected
// (gitpaths.go); the guard remembers them, and after the run renames the
// .git of every gitlink added meanwhile out of git's sight. The command's
// processes are gone by then, so nothing races the rename.
type GitlinkGuard struct {
	roots  []string
	before map[string]map[string]bool // git directory -> gitlink paths
}

// NewGitlinkGuard records the gitlinks of each git directory that
// allow_git_writes opens for writing; nil when there is none.
func NewGitlinkGuard(p *Policy) *GitlinkGuard {
	if !p.AllowGitWrites || p.Mode != WorkspaceWrite {
		return nil
	}
	g := &GitlinkGuard{roots: p.WritableRoots, before: map[string]map[string]bool{}}
	for _, pr := range p.Protected {
		if !GitWritableDir(pr) {
			continue
		}
		set := map[string]bool{}
		for _, ix := range gitIndexFiles(pr.Path) {
			links, _ := indexGitlinks(ix, gitHashLen(pr.Path))
			for _, l := range links {
				set[l] = true
			}
		}
		g.before[pr.Path] = set
	}
	if len(g.before) == 0 {
		return nil
	}
	return g
}

// Check runs after the command is gone. It returns one message per thing
// it moved aside: the .git of each new gitlink (renamed to
// .git.agentbox-quarantine), or an index agentbox cannot read (git might;
// it is renamed to index.agentbox-unreadable rather than trusted).
func (g *GitlinkGuard) Check() []string {
	if g == nil {
		return nil
	}
	var msgs []string
	for gitdir, before := range g.before {
		top := filepath.Dir(gitdir)
		for _, ix := range gitIndexFiles(gitdir) {
			links, err := indexGitlinks(ix, gitHashLen(gitdir))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				if to, rerr := quarantine(ix, ".agentbox-unreadable"); rerr == nil {
					msgs = append(msgs, fmt.Sprintf("allow_git_writes: the command left a git index agentbox cannot check for submodules (%v); moved it to %s (inspect it before you use it)", err, to))
				} else {
					msgs = append(msgs, fmt.Sprintf("allow_git_writes: the command left a git index agentbox cannot check for submodules (%v), and moving it aside failed: %v; do not run git in %s before you inspect it", err, rerr, top))
				}
				continue
			}
			for _, l := range links {
				if before[l] || !safeIndexPath(l) {
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
// l of the worktree top. git follows symlinks to it, so agentbox does too,
// but only acts inside the writable roots: anything else the command
// could not have written.
func (g *GitlinkGuard) neutralize(top, l string) string {
	dir, err := filepath.EvalSymlinks(filepath.Join(top, filepath.FromSlash(l)))
	if err != nil {
		return ""
	}
	inRoot := false
	for _, r := range g.roots {
		if Within(dir, r) {
			inRoot = true
		}
	}
	dotgit := filepath.Join(dir, ".git")
	if _, err := os.Lstat(dotgit); err != nil || !inRoot {
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
	data, err := readConfigFile(filepath.Join(gitdir, "config"))
	if err != nil {
		return 20
	}
	es, err := parseGitConfig(data)
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
