package acl

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/gitguard"
	"github.com/agentbox/agentbox/policy"
)

// This file is allow_git_writes for the Windows plans. ACEs and labels are
// per object, not per name, so "open .git but keep config read-only"
// becomes: .git loses its Medium label and its deny (it inherits the
// writable root's allow and Low label like any directory there), and each
// of [gitguard.ReadOnlyPaths] becomes a protected path of its own: an
// explicit Medium label and a deny of every write for the run's SIDs. A
// missing one cannot be guarded as a name, so it gets a placeholder (an
// empty directory, or a file git reads as absent) that stays on disk.
//
// Renames: git replaces files in .git by renaming a lock file over them
// (index.lock -> index), which needs DELETE on both. Those files inherit
// the root's allow (DELETE included) and Low label, so the guards below,
// which are not inherited, do not touch them. What must not move is .git
// itself and the directories between it and a read-only path (objects for
// objects/info): moved aside, they take the read-only path with them and
// the command could put its own config or hooks in their place. So those
// directories get, besides the usual FILE_DELETE_CHILD guards, a deny of
// DELETE for the user's own SID ([GitDirGuard]): a Low label no longer
// protects them, and the restricted pass of a write-restricted token may
// not check DELETE (see IntegrityPlan).

// PathInfo is what [ResolveGitWrites] needs to know about a path.
type PathInfo struct {
	Exists, Dir, Link bool
}

// FilePlaceholder is a file agentbox creates for a missing read-only git
// file, with content git reads as if the file were absent.
type FilePlaceholder struct {
	Path    string
	Content string
}

// GitPlan is what allow_git_writes changes in a policy's plans.
type GitPlan struct {
	// GitDirs are the .git directories opened for writing.
	GitDirs []string
	// Carveouts are the read-only paths inside them, as protected paths.
	Carveouts []policy.Protected
	// Files are the placeholders for missing read-only files.
	Files []FilePlaceholder
	// Guarded are the directories that get [GitDirGuard]: each opened
	// .git and every directory between it and a read-only path.
	Guarded []string
}

// ResolveGitWrites finds the .git directories of pol that allow_git_writes
// opens (a protected directory named .git inside a writable root that
// holds a regular HEAD file, as [gitguard.WritableDir] decides on the
// host) and resolves [gitguard.ReadOnlyPaths] in each. stat describes a
// path without following links. A read-only path that is a link is
// refused: its DACL and label would be the link's, not what git reads.
func ResolveGitWrites(pol *policy.Policy, stat func(string) (PathInfo, error)) (GitPlan, error) {
	var g GitPlan
	if pol == nil || !pol.AllowGitWrites() || pol.Mode() != policy.WorkspaceWrite {
		return g, nil
	}
	for _, pr := range pol.Protected() {
		p := Clean(pr.Path)
		if pr.Kind != policy.Dir || pr.Root == "" || !strings.EqualFold(base(p), ".git") || !withinAny(p, pol.WritableRoots()) {
			continue
		}
		head, err := stat(Join(p, "HEAD"))
		if err != nil {
			return GitPlan{}, fmt.Errorf("allow_git_writes: %s: %w", Join(p, "HEAD"), err)
		}
		if !head.Exists || head.Dir || head.Link {
			continue // not a repository (a placeholder made for a missing .git)
		}
		if slices.ContainsFunc(g.GitDirs, func(x string) bool { return SamePath(x, p) }) {
			continue
		}
		g.GitDirs = append(g.GitDirs, p)
		g.addGuard(p)
		for _, ro := range gitguard.ReadOnlyPaths {
			if err := g.carve(p, ro, stat); err != nil {
				return GitPlan{}, err
			}
		}
	}
	return g, nil
}

func (g *GitPlan) carve(gitdir string, ro gitguard.ReadOnly, stat func(string) (PathInfo, error)) error {
	path, dir, placeholder := gitdir, ro.Dir, ro.Placeholder
	// Walk down the components; the first missing one is guarded whole
	// (a directory placeholder), as Linux does.
	parts := strings.Split(ro.Rel, "/")
	for i, part := range parts {
		path = Join(path, part)
		info, err := stat(path)
		if err != nil {
			return fmt.Errorf("allow_git_writes: %s: %w", path, err)
		}
		last := i == len(parts)-1
		switch {
		case info.Link:
			return fmt.Errorf("allow_git_writes: %s is a link; agentbox cannot keep what it points to read-only (keep .git read-only: allow_git_writes = false, or replace the link)", path)
		case !info.Exists:
			if !last {
				dir, placeholder = true, ""
			}
			return g.add(gitdir, path, ro.Why, dir, placeholder, true)
		case last:
			return g.add(gitdir, path, ro.Why, info.Dir, "", false)
		case !info.Dir:
			// objects is a file: guard it whole.
			return g.add(gitdir, path, ro.Why, false, "", false)
		}
	}
	return nil
}

func (g *GitPlan) add(gitdir, path, why string, dir bool, placeholder string, missing bool) error {
	if slices.ContainsFunc(g.Carveouts, func(c policy.Protected) bool { return SamePath(c.Path, path) }) {
		return nil
	}
	kind := policy.File
	switch {
	case missing && dir:
		kind = policy.Missing // a directory placeholder (Plan.Mkdirs)
	case missing:
		g.Files = append(g.Files, FilePlaceholder{Path: path, Content: placeholder})
	case dir:
		kind = policy.Dir
	}
	g.Carveouts = append(g.Carveouts, policy.Protected{Path: path, Kind: kind, Root: gitdir, Why: "read-only with allow_git_writes: " + why})
	for d := Parent(path); !SamePath(d, gitdir) && Within(d, gitdir); d = Parent(d) {
		g.addGuard(d)
	}
	return nil
}

func (g *GitPlan) addGuard(d string) {
	if !slices.ContainsFunc(g.Guarded, func(x string) bool { return SamePath(x, d) }) {
		g.Guarded = append(g.Guarded, d)
	}
}

func base(p string) string {
	if i := strings.LastIndex(p, `\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

// Policy returns pol with each opened .git replaced by its read-only
// paths (a copy; pol is unchanged). The plans built from it
// (PlanForRoots, PlanFor, IntegrityPlan) no longer deny or label .git
// itself.
func (g GitPlan) Policy(pol *policy.Policy) *policy.Policy {
	if len(g.GitDirs) == 0 {
		return pol
	}
	pr := slices.DeleteFunc(pol.Protected(), func(pr policy.Protected) bool {
		return slices.ContainsFunc(g.GitDirs, func(x string) bool { return SamePath(x, pr.Path) })
	})
	return pol.WithProtected(append(pr, g.Carveouts...))
}

// SIDPlan is the DACL part for the run's SIDs (sidOf as for PlanForRoots):
// the file placeholders, and the removal of the deny an earlier run
// without allow_git_writes put on each opened .git.
func (g GitPlan) SIDPlan(pol *policy.Policy, sidOf func(root string) string) Plan {
	var pl Plan
	pl.Files = append(pl.Files, g.Files...)
	for _, d := range g.GitDirs {
		var done []string
		for _, r := range pol.WritableRoots() {
			if s := sidOf(r); Within(d, r) && !slices.Contains(done, s) {
				done = append(done, s)
				pl.Remove = append(pl.Remove, Entry{
					Path: d,
					ACE:  ACE{Deny: true, Flags: ObjectInherit | ContainerInherit, Mask: DenyWrite, SID: s},
					Why:  "opened by allow_git_writes",
				})
			}
		}
	}
	return pl
}

// UserPlan is the integrity part (unelevated mode): [GitDirGuard] for
// userSID on each guarded directory, and the removal of the Medium label
// an earlier run without allow_git_writes put on each opened .git.
func (g GitPlan) UserPlan(userSID string) Plan {
	var pl Plan
	pl.Unlabel = append(pl.Unlabel, g.GitDirs...)
	for _, d := range g.Guarded {
		pl.Entries = append(pl.Entries, Entry{
			Path: d,
			ACE:  GitDirGuard(userSID),
			Why:  "keeps " + d + " from being renamed aside with the read-only git paths in it",
		})
	}
	return pl
}

// GitDirGuard is the ACE [GitPlan.UserPlan] puts on .git and the
// directories between it and a read-only git path, for the user's own
// SID: neither they nor anything in them can be deleted or renamed
// through it. Files and directories below keep granting DELETE
// themselves, so git's lock-file renames and the user's own deletes of
// what is inside still work; only these directories themselves cannot be
// deleted or renamed until `agentbox cleanup`. FILE_WRITE_EA (extended
// attributes of that one directory, which git never writes) is in the
// mask only to give the ACE a shape of its own: cleanup removes exactly
// this ACE, never a DELETE|FILE_DELETE_CHILD deny the user made.
func GitDirGuard(userSID string) ACE {
	return ACE{Deny: true, Mask: Delete | FileDeleteChild | FileWriteEA, SID: userSID}
}
