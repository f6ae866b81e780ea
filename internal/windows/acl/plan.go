package acl

import (
	"fmt"
	"slices"

	"github.com/agentbox/agentbox/policy"
)

// Entry is one ACE agentbox wants on one path.
type Entry struct {
	Path string
	ACE  ACE
	Why  string
	// OnLink also puts ACE (without inheritance flags) on the link object
	// itself when Path is a reparse point (see LinkStore): set on
	// protected paths, so a protected link cannot be deleted and replaced.
	OnLink bool
}

// Plan is what the unelevated backend applies before running a command.
type Plan struct {
	// Mkdirs are protected paths that do not exist yet. Windows cannot deny
	// creating a name, so agentbox creates them as empty directories and
	// denies writes inside them; the command then cannot create, replace or
	// link anything at that name. A missing path read as a file
	// (policy.Protected.FileWhenMissing) is an empty file in Files instead.
	Mkdirs []string
	// Entries in application order: allows on roots first, then denies.
	Entries []Entry
	// Labels are the mandatory labels to set (see IntegrityPlan).
	Labels []LabelEntry
	// Files are placeholder files to create when missing (see GitPlan,
	// and Mkdirs).
	Files []FilePlaceholder
	// Remove are ACEs to take off before Entries are added: what an
	// earlier run put on a path this policy no longer protects.
	Remove []Entry
	// Unlabel are paths whose explicit agentbox label (ProtectedLabel or
	// ProtectedFileLabel) is removed before Labels are set, so they
	// inherit their parent's label again.
	Unlabel []string
	// Unhide are paths an earlier run hid that this policy does not:
	// their hidden label (HiddenLabel, HiddenFileLabel) is removed, and
	// with UnhideSID set (elevated mode) the hidden denies and re-opening
	// allows for that SID too (see HiddenPlan). Missing paths are skipped.
	Unhide    []string
	UnhideSID string
	// HiddenNow are the paths the plan hides or re-opens, for the state
	// (the next run's Unhide).
	HiddenNow []string
}

// LabelEntry is one mandatory label agentbox wants on one path.
type LabelEntry struct {
	Path  string
	Label Label
	Why   string
}

// Merge appends o's placeholders, entries and labels to pl.
func (pl *Plan) Merge(o Plan) {
	for _, m := range o.Mkdirs {
		if !slices.ContainsFunc(pl.Mkdirs, func(x string) bool { return SamePath(x, m) }) {
			pl.Mkdirs = append(pl.Mkdirs, m)
		}
	}
	for _, f := range o.Files {
		if !slices.ContainsFunc(pl.Files, func(x FilePlaceholder) bool { return SamePath(x.Path, f.Path) }) {
			pl.Files = append(pl.Files, f)
		}
	}
	pl.Entries = append(pl.Entries, o.Entries...)
	pl.Labels = append(pl.Labels, o.Labels...)
	pl.Remove = append(pl.Remove, o.Remove...)
	pl.Unlabel = append(pl.Unlabel, o.Unlabel...)
	pl.Unhide = append(pl.Unhide, o.Unhide...)
	pl.HiddenNow = append(pl.HiddenNow, o.HiddenNow...)
	if o.UnhideSID != "" {
		pl.UnhideSID = o.UnhideSID
	}
}

// PlanFor returns the ACEs that make pol's writable roots writable for sid
// and its protected paths read-only. Paths in pol are Windows paths. A
// read-only or full-access policy needs no ACEs.
func PlanFor(pol *policy.Policy, sid string) Plan {
	return PlanForRoots(pol, func(string) string { return sid })
}

// PlanForRoots is PlanFor with a SID per writable root: root r's allow is
// for sidOf(r), and a protected path (or a directory leading to one) gets
// its deny for the SID of every writable root containing it, so whichever
// of this run's SIDs reaches it through inheritance is denied.
func PlanForRoots(pol *policy.Policy, sidOf func(root string) string) Plan {
	var pl Plan
	if pol.Mode() != policy.WorkspaceWrite {
		return pl
	}
	for _, r := range pol.WritableRoots() {
		pl.Entries = append(pl.Entries, Entry{
			Path: Clean(r),
			ACE:  ACE{Flags: ObjectInherit | ContainerInherit, Mask: AllowWrite, SID: sidOf(r)},
			Why:  "writable root",
		})
	}
	sidsFor := func(p string) []string {
		var out []string
		for _, r := range pol.WritableRoots() {
			if s := sidOf(r); Within(p, r) && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out
	}
	guarded := map[string]bool{}
	var guards []Entry
	for _, pr := range pol.Protected() {
		p := Clean(pr.Path)
		if !withinAny(p, pol.WritableRoots()) {
			continue // outside every root: nothing grants a write there
		}
		file := missingFile(pr)
		switch {
		case file:
			pl.addFile(p)
		case pr.Kind == policy.Missing:
			pl.Mkdirs = append(pl.Mkdirs, p)
		}
		for _, sid := range sidsFor(p) {
			e := Entry{Path: p, Why: "protected: " + pr.Why, OnLink: true}
			switch {
			case file:
				e.ACE = ACE{Deny: true, Mask: DenyWrite, SID: sid}
			case pr.Kind == policy.Missing, pr.Kind == policy.Dir:
				e.ACE = ACE{Deny: true, Flags: ObjectInherit | ContainerInherit, Mask: DenyWrite, SID: sid}
			default: // a file or a link: inheritance flags mean nothing there
				e.ACE = ACE{Deny: true, Mask: DenyWrite, SID: sid}
			}
			pl.Entries = append(pl.Entries, e)
		}
		// Every directory from p's parent up to the outermost writable
		// root containing it: deleting or renaming any of them (which
		// needs DELETE on it, or FILE_DELETE_CHILD on its parent) would
		// move p aside.
		for _, d := range guardChain(p, pol.WritableRoots()) {
			for _, sid := range sidsFor(d) {
				if k := Key(d) + "|" + sid; !guarded[k] {
					guarded[k] = true
					guards = append(guards, Entry{
						Path: d,
						ACE:  ACE{Deny: true, Mask: DenyRenameAside, SID: sid},
						Why:  "keeps " + p + " from being renamed aside",
					})
				}
			}
		}
	}
	slices.SortStableFunc(guards, func(a, b Entry) int { return compareKeys(a.Path, b.Path) })
	pl.Entries = append(pl.Entries, guards...)
	return pl
}

// missingFile reports whether pr is missing and read as a file (a git
// config file, .mcp.json): its placeholder is an empty file, not a
// directory, so that what reads it finds a file.
func missingFile(pr policy.Protected) bool { return pr.Kind == policy.Missing && pr.FileWhenMissing }

// addFile adds an empty placeholder file for p, once.
func (pl *Plan) addFile(p string) {
	if !slices.ContainsFunc(pl.Files, func(x FilePlaceholder) bool { return SamePath(x.Path, p) }) {
		pl.Files = append(pl.Files, FilePlaceholder{Path: p})
	}
}

// guardChain is every directory from p's parent up to the outermost
// writable root containing p.
func guardChain(p string, roots []string) []string {
	var out []string
	for d := Parent(p); withinAny(d, roots); d = Parent(d) {
		out = append(out, d)
		if Parent(d) == d {
			break
		}
	}
	return out
}

// IntegrityPlan is the mandatory-label half of the unelevated sandbox,
// for a command whose token runs at Low integrity (see label.go): each
// writable root gets RootLabel (inherited below it), each protected path
// inside a root an explicit Medium label (ProtectedLabel, or
// ProtectedFileLabel for a file or link), so the command can neither
// write, delete nor rename it whatever the DACL says. The labels do not
// change what the user's own Medium processes may do.
//
// One route stays open to the mandatory check: deleting or renaming an
// object is also allowed with FILE_DELETE_CHILD on its parent, and the
// parent of a protected path is a Low writable directory. So every
// directory from a protected path's parent up to its root also gets a
// non-inheritable deny of FILE_DELETE_CHILD for userSID (the user's own
// SID, which the command's token carries in its normal pass). The user
// loses only the right to delete a child of that directory whose own DACL
// denies them DELETE; everything else they may delete keeps granting
// DELETE itself.
//
// What it cannot close (see ResidualRisks): a directory between a writable
// root and a protected path (rootendor in rootendor\lib\.git) is
// itself Low and grants the user DELETE, so it can be renamed aside with
// the protected path inside it.
func IntegrityPlan(pol *policy.Policy, userSID string) Plan {
	var pl Plan
	if pol.Mode() != policy.WorkspaceWrite {
		return pl
	}
	for _, r := range pol.WritableRoots() {
		pl.Labels = append(pl.Labels, LabelEntry{Path: Clean(r), Label: RootLabel, Why: "writable root"})
	}
	guarded := map[string]bool{}
	var guards []Entry
	for _, pr := range pol.Protected() {
		p := Clean(pr.Path)
		if !withinAny(p, pol.WritableRoots()) {
			continue
		}
		l := ProtectedLabel
		switch {
		case missingFile(pr):
			pl.addFile(p)
			l = ProtectedFileLabel
		case pr.Kind == policy.Missing:
			pl.Mkdirs = append(pl.Mkdirs, p)
		case pr.Kind == policy.Dir:
		default:
			l = ProtectedFileLabel
		}
		pl.Labels = append(pl.Labels, LabelEntry{Path: p, Label: l, Why: "protected: " + pr.Why})
		for _, d := range guardChain(p, pol.WritableRoots()) {
			if insideProtected(d, pol) {
				continue // Medium already: the label denies FILE_DELETE_CHILD
			}
			if !guarded[Key(d)] {
				guarded[Key(d)] = true
				guards = append(guards, Entry{
					Path: d,
					ACE:  UserGuard(userSID),
					Why:  "keeps the children of " + d + " (" + p + ") from being deleted or renamed through FILE_DELETE_CHILD",
				})
			}
		}
	}
	slices.SortStableFunc(guards, func(a, b Entry) int { return compareKeys(a.Path, b.Path) })
	pl.Entries = guards
	return pl
}

// ResidualRisks lists what the unelevated sandbox does not guarantee for
// pol, in words for doctor and for each run: protected paths that sit
// below a non-protected directory of a writable root (that directory can
// be renamed aside, taking the protected path with it).
func ResidualRisks(pol *policy.Policy) []string {
	if pol.Mode() != policy.WorkspaceWrite {
		return nil
	}
	var out []string
	for _, pr := range pol.Protected() {
		p := Clean(pr.Path)
		if !withinAny(p, pol.WritableRoots()) {
			continue
		}
		for _, d := range guardChain(p, pol.WritableRoots()) {
			if isRootOrProtected(d, pol) {
				continue
			}
			out = append(out, fmt.Sprintf("%s can be renamed aside together with %s (a directory between it and its writable root)", p, d))
			break
		}
	}
	return out
}

func isRootOrProtected(d string, pol *policy.Policy) bool {
	for _, r := range pol.WritableRoots() {
		if SamePath(d, r) {
			return true
		}
	}
	return insideProtected(d, pol)
}

// insideProtected reports whether d is a protected path or lies inside
// one, where the protected path's Medium label is inherited.
func insideProtected(d string, pol *policy.Policy) bool {
	for _, pr := range pol.Protected() {
		if (pr.Kind == policy.Dir || pr.Kind == policy.Missing) && Within(d, pr.Path) {
			return true
		}
	}
	return false
}

func withinAny(p string, roots []string) bool {
	for _, r := range roots {
		if Within(p, r) {
			return true
		}
	}
	return false
}

func compareKeys(a, b string) int {
	ka, kb := Key(a), Key(b)
	switch {
	case ka < kb:
		return -1
	case ka > kb:
		return 1
	}
	return 0
}
