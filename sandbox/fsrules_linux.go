package sandbox

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/internal/fsreport"
	"github.com/agentbox/agentbox/internal/linux/landlock"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/policy"
)

// fsReportEnv, set to 0 in agentbox's own environment, runs commands
// without the file observer (the report's filesystem section then says
// it is unavailable): for measuring what it costs. It weakens nothing;
// the observer only reports.
const fsReportEnv = "AGENTBOX_FSREPORT"

// fileRules are the rules by which the sandbox's file observer judges the
// command's write-intent calls (package fsreport): what sp lets it
// write (its writable roots, the private temporary directories among
// them, the devices every sandbox writes), less the policy's protected
// paths and whatever else sp binds read-only. The walls are sp's;
// these rules only name the one that refused.
func fileRules(pol *policy.Policy, sp *spec.Spec) *fsreport.Rules {
	r := &fsreport.Rules{Writable: append(slices.Clone(sp.Walls.WritableRoots), landlock.WritableDevices()...)}
	if !sp.Degraded.On {
		r.Writable = append(r.Writable, "/dev/shm")
	}
	gitOpen := pol.AllowGitWrites() && pol.Mode() == policy.WorkspaceWrite
	prot := pol.Protected()
	have := map[string]bool{}
	for _, pr := range prot {
		git := isGitPath(pr)
		if git && gitOpen {
			// allow_git_writes opened it; what stays read-only in it
			// is in sp's mounts below.
			continue
		}
		reason := fsreport.ReasonProtected(protectedName(pr))
		switch {
		case git:
			reason = fsreport.ReasonGit
		case pr.Root == "":
			reason = fsreport.ReasonOutside
		}
		r.ReadOnly = append(r.ReadOnly, fsreport.Carve{Path: pr.Path, Reason: reason})
		have[pr.Path] = true
	}
	for _, m := range sp.FS.Mounts {
		if have[m.Path] || m.Kind != spec.BindReadOnly && m.Kind != spec.BindHost && m.Kind != spec.PinLink {
			continue
		}
		reason := fsreport.ReasonOutside
		if root := fspath.InnermostRoot(m.Path, pol.WritableRoots()); root != "" {
			rel, err := filepath.Rel(root, m.Path)
			if err != nil {
				rel = m.Path
			}
			reason = fsreport.ReasonProtected(rel)
		}
		r.ReadOnly = append(r.ReadOnly, fsreport.Carve{Path: m.Path, Reason: reason})
		have[m.Path] = true
	}
	return r
}

// isGitPath reports whether a protected path is a repository's: a .git
// directory or file, the gitdir a .git file names, a worktree's common
// directory. allow_git_writes opens those.
func isGitPath(pr policy.Protected) bool {
	return filepath.Base(pr.Path) == ".git" || strings.HasPrefix(pr.Why, "gitdir of ") || strings.HasPrefix(pr.Why, "common dir of ")
}

// protectedName is how a reason names a protected path: the protected
// name it was found by (".agents"), else its path below its root.
func protectedName(pr policy.Protected) string {
	if name, _, ok := strings.Cut(pr.Why, " in "); ok && !strings.Contains(name, "/") && name != "" {
		return name
	}
	if pr.Root != "" {
		if rel, err := filepath.Rel(pr.Root, pr.Path); err == nil {
			return rel
		}
	}
	return pr.Path
}
