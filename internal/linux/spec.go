// Package linux is agentbox's Linux backend on agentbox's side: it plans
// the sandbox (the mounts, masks, tool caches and placeholders of a
// policy), starts this binary again as the stage that builds it (package
// stage: fresh user, mount, pid, ipc, uts and network namespaces,
// read-only bind mounts, a fresh /proc and a private /dev, no
// capabilities, no_new_privs, Landlock and seccomp, then the command as
// its child, so that the whole process tree dies with it), and relays
// the command's streams and network from outside.
//
// The plan is computed here by pure functions so it can be tested
// anywhere; what agentbox and the stage exchange is package spec's.
package linux

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/policy"
)

// Plan orders the mounts for a policy. Writable roots and the private
// temporary directories go first, parents before children, so a nested
// root keeps its own bind (a workspace under the private /tmp is the
// host's, on a directory made for it there); then the pins; then the
// read-only carve-outs last, so no later bind can cover them whatever the
// nesting of roots. agentbox's state directory, where the private
// temporary directories live, is one of those carve-outs (or outside
// every root): a private directory is writable at its mount point only.
//
// held are the directories the caller holds for the run (see HeldDirs):
// placeholders for missing protected paths, made as empty directories for
// the duration of the run, are pinned read-only like existing ones. A
// missing path with nothing held for it gets no read-only step, only the
// pins of the directories between it and its root, so that it cannot be
// brought in by renaming one of them: the caller must have proved that
// the command cannot create it (AcquirePlaceholders), or, in a session,
// bind a placeholder for each command (MountPlaceholders).
func Plan(p *policy.Policy, held []string) []spec.Mount {
	out, mounted := tempPlan(p)
	have := map[string]bool{}
	for _, h := range held {
		have[h] = true
	}
	var ro, links []string
	pins, seen := map[string]bool{}, map[string]bool{}
	for _, pr := range p.Protected() {
		if pr.Root == "" {
			continue // outside every writable root: read-only already
		}
		bind := true
		if pr.Kind == policy.Missing {
			// Held at its own path, or (when another run's placeholder
			// stood in the way) at the empty ancestor that was held
			// instead: read-only, nothing can be created below it.
			if cover := coverOf(pr, have); cover != "" {
				pr.Path = cover
			} else {
				bind = false
			}
		}
		if seen[pr.Path] {
			continue
		}
		seen[pr.Path] = true
		switch {
		case !bind:
		case pr.Kind == policy.Symlink:
			links = append(links, pr.Path)
		default:
			ro = append(ro, pr.Path)
		}
		for a := filepath.Dir(pr.Path); a != pr.Root && fspath.Within(a, pr.Root); a = filepath.Dir(a) {
			pins[a] = true
		}
	}
	roots := map[string]bool{}
	for _, r := range p.WritableRoots() {
		roots[r] = true
	}
	// A writable root nested in another (a checkout under a shared
	// /tmp) is a mount point and cannot be renamed itself, but the
	// directories between it and the outer root could be, taking the
	// root's protected paths away and letting the command recreate them
	// empty: pin that chain too. Inside a private /tmp the same keeps the
	// command's later commands (a session's) from finding a directory of
	// its making at the root's path.
	for _, r := range mounted {
		outer := fspath.InnermostRoot(filepath.Dir(r), mounted)
		if outer == "" || outer == r {
			continue
		}
		for a := filepath.Dir(r); a != outer && fspath.Within(a, outer); a = filepath.Dir(a) {
			pins[a] = true
		}
	}
	for _, m := range mounted {
		roots[m] = true
	}
	var pinList []string
	for a := range pins {
		if !roots[a] { // a writable root is already a mount point
			pinList = append(pinList, a)
		}
	}
	out = appendByDepth(out, spec.Pin, pinList)
	out = appendByDepth(out, spec.BindReadOnly, ro)
	out = appendByDepth(out, spec.PinLink, links)
	return out
}

// tempPlan is the first part of the plan: the writable roots and the
// private temporary directories, parents first, with a directory made
// in a private one for each root, kept host directory and $TMPDIR inside
// it. It returns the steps and every path they mount on.
func tempPlan(p *policy.Policy) (steps []spec.Mount, mounted []string) {
	type step struct {
		spec.Mount
		made bool // a MakeDir goes first
	}
	var all []step
	var private []string
	type kept struct {
		path string
		file bool
	}
	var keep []kept
	for _, t := range p.PrivateTemps() {
		if fspath.InnermostRoot(t.Path, private) != "" {
			// $TMPDIR inside the private /tmp: a directory there.
			all = append(all, step{spec.Mount{Kind: spec.MakeDir, Path: t.Path}, true})
			continue
		}
		private = append(private, t.Path)
		all = append(all, step{Mount: spec.Mount{Kind: spec.BindPrivate, Path: t.Path, Source: t.Dir}})
		for _, k := range t.Keep {
			keep = append(keep, kept{k, false})
		}
	}
	// What the host shows read-only elsewhere stays visible inside a
	// private /tmp: protected paths outside every root, and listed
	// sockets (the user's deliberate hand-over).
	for _, pr := range p.Protected() {
		if pr.Root == "" && (pr.Kind == policy.Dir || pr.Kind == policy.File) {
			keep = append(keep, kept{pr.Path, pr.Kind == policy.File})
		}
	}
	for _, sock := range p.AllowUnixSockets() {
		keep = append(keep, kept{sock, true})
	}
	slices.SortFunc(keep, func(a, b kept) int { return byDepth(a.path, b.path) })
	var keptDirs []string
	for _, k := range keep {
		if fspath.InnermostRoot(k.path, private) == "" || fspath.InnermostRoot(k.path, p.WritableRoots()) != "" ||
			fspath.InnermostRoot(k.path, keptDirs) != "" || slices.Contains(private, k.path) {
			continue
		}
		if k.file {
			all = append(all, step{spec.Mount{Kind: spec.MakeDir, Path: filepath.Dir(k.path)}, true}, step{spec.Mount{Kind: spec.MakeFile, Path: k.path}, true})
		} else {
			all = append(all, step{spec.Mount{Kind: spec.MakeDir, Path: k.path}, true})
			keptDirs = append(keptDirs, k.path)
		}
		all = append(all, step{Mount: spec.Mount{Kind: spec.BindHost, Path: k.path}})
		mounted = append(mounted, k.path)
	}
	for _, r := range p.WritableRoots() {
		if fspath.InnermostRoot(r, private) != "" {
			all = append(all, step{spec.Mount{Kind: spec.MakeDir, Path: r}, true})
		}
		all = append(all, step{Mount: spec.Mount{Kind: spec.BindWritable, Path: r}})
	}
	slices.SortStableFunc(all, func(a, b step) int {
		if c := byDepth(a.Path, b.Path); c != 0 {
			return c
		}
		switch {
		case a.made && !b.made:
			return -1
		case b.made && !a.made:
			return 1
		}
		return 0
	})
	for _, s := range all {
		steps = append(steps, s.Mount)
	}
	return steps, append(append(private, p.WritableRoots()...), mounted...)
}

// coverOf is the held path that protects the missing pr: pr.Path itself,
// or its nearest held ancestor below the root; "" when none is held.
func coverOf(pr policy.Protected, held map[string]bool) string {
	for a := pr.Path; a != pr.Root && fspath.Within(a, pr.Root); a = filepath.Dir(a) {
		if held[a] {
			return a
		}
	}
	return ""
}

// byDepth orders shallower paths first, then lexically.
func byDepth(a, b string) int {
	da, db := strings.Count(a, "/"), strings.Count(b, "/")
	if da != db {
		return da - db
	}
	return strings.Compare(a, b)
}

// appendByDepth appends a mount of kind for each path, parents before
// children (paths is sorted in place).
func appendByDepth(out []spec.Mount, kind spec.MountKind, paths []string) []spec.Mount {
	slices.SortFunc(paths, byDepth)
	for _, p := range paths {
		out = append(out, spec.Mount{Kind: kind, Path: p})
	}
	return out
}

// HeldDir is a protected directory inside a writable root that a run must
// hold for its duration.
type HeldDir struct {
	Path, Root string
	// Missing: not there when the policy was resolved, so a placeholder
	// is made for it.
	Missing bool
	// File: the placeholder is an empty file rather than a directory
	// (policy.Protected.FileWhenMissing).
	File bool
}

// HeldDirs lists the protected directories (and files git reads) inside
// writable roots that a run must hold for its duration: missing ones get a
// placeholder, and existing ones are held too, because an existing empty
// directory or file may be another run's placeholder that would otherwise
// vanish under us.
func HeldDirs(p *policy.Policy) []HeldDir {
	var out []HeldDir
	for _, pr := range p.Protected() {
		// A file git reads, found existing, may be another run's file
		// placeholder: held like an existing directory.
		if (pr.Kind == policy.Missing || pr.Kind == policy.Dir || pr.Kind == policy.File && pr.FileWhenMissing) && pr.Root != "" {
			out = append(out, HeldDir{Path: pr.Path, Root: pr.Root, Missing: pr.Kind == policy.Missing, File: pr.FileWhenMissing})
		}
	}
	return out
}

// DegradedGaps lists, for a policy, the guarantees that are lost when the
// sandbox must run without namespaces (Landlock and seccomp only).
// landlockABI is the kernel's Landlock ABI: below 6 nothing scopes signals.
func DegradedGaps(p *policy.Policy, landlockABI int) []string {
	var gaps []string
	if landlockABI < 6 {
		gaps = append(gaps, "Landlock ABI below 6: the command can signal the user's other processes, agentbox's reaper included (killing it outright lets what the command started outlive the run)")
	}
	if p.Mode() == policy.WorkspaceWrite && len(p.Protected()) > 0 {
		gaps = append(gaps, fmt.Sprintf("protected paths inside writable roots (%s, and gitdirs) stay writable: Landlock can only add access, not carve read-only holes", strings.Join(p.ProtectedNames(), ", ")))
	}
	switch {
	case p.AllowList() != nil:
		gaps = append(gaps, "no network namespace: the allow-list proxy listens on the host's loopback, where other local processes can use it during the run; the command may only make TCP connections to it (every connect is checked), and UDP and listen(2) are refused, so servers inside the command do not work")
	case !p.Network():
		gaps = append(gaps, "no network namespace: all non-unix sockets are refused by seccomp, so servers on 127.0.0.1 inside the command do not work either")
	}
	if n := len(p.Hidden()); n > 0 {
		gaps = append(gaps, fmt.Sprintf("no mount namespace to mask the %d hidden paths: Landlock keeps their files from being opened for reading (reads are granted beneath every sibling on the way to each), but their names stay listable, and a file created later directly in a directory on the way (your home) cannot be read until the next run", n))
	}
	if len(p.PrivateTemps()) > 0 {
		gaps = append(gaps, "no mount namespace to give the command a private /tmp: the host's /tmp (and $TMPDIR) stay read-only, and TMPDIR points at the workspace's private temporary directory instead; a program that writes to /tmp by name fails (set share_slash_tmp = true to let it write the host's /tmp, where what it leaves can reach your own programs)")
	}
	gaps = append(gaps,
		"no private /dev: the host's terminals and input devices are kept out of reach by Landlock, and so are new pseudo-terminals opened by their /dev/pts path (script, expect, openpty fail; the command's own terminal works)",
		"no pid namespace: the command sees every process of the host in /proc (Landlock scoping keeps it from signalling them where the kernel supports it)",
		"no IPC namespace or private /dev/shm: the host's is used, limited by Landlock (the host's /dev/shm is not writable, so POSIX shared memory and semaphores fail); SysV IPC and POSIX message queues are refused by seccomp, and so are abstract unix sockets, the command's own included (network on or off)")
	return gaps
}

// errNonUTF8 is the refusal of a path the spec cannot carry.
func errNonUTF8(path string) error {
	return fmt.Errorf("%q is not valid UTF-8: agentbox cannot carry such a name into the sandbox yet (rename it, or run from a directory whose path is UTF-8)", path)
}
