package acl

import (
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
	// link anything at that name.
	Mkdirs []string
	// Entries in application order: allows on roots first, then denies.
	Entries []Entry
}

// PlanFor returns the ACEs that make pol's writable roots writable for sid
// and its protected paths read-only. Paths in pol are Windows paths. A
// read-only or full-access policy needs no ACEs.
func PlanFor(pol *policy.Policy, sid string) Plan {
	var pl Plan
	if pol.Mode != policy.WorkspaceWrite {
		return pl
	}
	for _, r := range pol.WritableRoots {
		pl.Entries = append(pl.Entries, Entry{
			Path: Clean(r),
			ACE:  ACE{Flags: ObjectInherit | ContainerInherit, Mask: AllowWrite, SID: sid},
			Why:  "writable root",
		})
	}
	guarded := map[string]bool{}
	var guards []Entry
	for _, pr := range pol.Protected {
		p := Clean(pr.Path)
		if !withinAny(p, pol.WritableRoots) {
			continue // outside every root: nothing grants a write there
		}
		e := Entry{Path: p, Why: "protected: " + pr.Why, OnLink: true}
		switch pr.Kind {
		case policy.Missing:
			pl.Mkdirs = append(pl.Mkdirs, p)
			e.ACE = ACE{Deny: true, Flags: ObjectInherit | ContainerInherit, Mask: DenyWrite, SID: sid}
		case policy.Dir:
			e.ACE = ACE{Deny: true, Flags: ObjectInherit | ContainerInherit, Mask: DenyWrite, SID: sid}
		default: // a file or a link: inheritance flags mean nothing there
			e.ACE = ACE{Deny: true, Mask: DenyWrite, SID: sid}
		}
		pl.Entries = append(pl.Entries, e)
		// Every directory from p's parent up to the outermost writable
		// root containing it: deleting or renaming any of them (which
		// needs DELETE on it, or FILE_DELETE_CHILD on its parent) would
		// move p aside.
		for d := Parent(p); withinAny(d, pol.WritableRoots); d = Parent(d) {
			if !guarded[Key(d)] {
				guarded[Key(d)] = true
				guards = append(guards, Entry{
					Path: d,
					ACE:  ACE{Deny: true, Mask: DenyRenameAside, SID: sid},
					Why:  "keeps " + p + " from being renamed aside",
				})
			}
			if Parent(d) == d {
				break
			}
		}
	}
	slices.SortStableFunc(guards, func(a, b Entry) int { return compareKeys(a.Path, b.Path) })
	pl.Entries = append(pl.Entries, guards...)
	return pl
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
