package acl

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/policy"
)

// Hidden paths (policy.Hidden: credential files, deny_read) on Windows.
//
// Unelevated mode: the command's token is at Low integrity (label.go), so
// an explicit Medium label with NO_READ_UP on a hidden path takes every
// read right away from it in the mandatory check, which comes before the
// DACL and which the write-restricted token's DACL passes do not touch.
// On a directory the label is inheritable, so what lies and what appears
// below it is hidden too; a path the policy re-opens inside it gets an
// explicit Medium label without NO_READ_UP (readable, not writable). The
// user's own Medium-integrity programs are not affected. The labels are a
// lasting change: recorded in the state and removed by agentbox cleanup,
// and by a later run for a path that is no longer hidden.
//
// Elevated mode: the command runs as a sandbox user, whose reads the
// normal DACL check decides, so each hidden path gets an explicit deny of
// reading and writing for the sandbox users' group (inheritable on a
// directory), and each re-opened path an explicit allow of reading,
// which Windows orders before the deny it inherits.

// Labels and masks for hidden paths.
var (
	// HiddenLabel goes on a hidden directory: Medium, no read or write
	// up, inherited by everything below.
	HiddenLabel = Label{Level: MediumIL, Flags: ObjectInherit | ContainerInherit, Policy: NoWriteUp | NoReadUp}
	// HiddenFileLabel is HiddenLabel for a file.
	HiddenFileLabel = Label{Level: MediumIL, Policy: NoWriteUp | NoReadUp}
)

// DenyRead is what a hidden path's deny takes from the sandbox users:
// its content, extended attributes and running it (execution reads the
// file), and every right DenyWrite covers.
const DenyRead = FileReadData | FileReadEA | FileExecute | DenyWrite

// AllowReopen is what a re-opened path's allow grants back.
const AllowReopen = FileGenericRead | FileGenericExecute

// IsDir reports whether a path is an existing directory; the planners
// take it so that they stay pure.
type IsDir func(path string) bool

// HiddenPlan is the unelevated plan for pol's hidden paths: the labels,
// and Unhide for the paths of recorded (those earlier runs hid or
// re-opened: sid.State.Hidden) that are no longer hidden or re-opened.
func HiddenPlan(pol *policy.Policy, isDir IsDir, recorded []string) Plan {
	var pl Plan
	if pol.Mode() == policy.DangerFullAccess {
		return pl
	}
	var now []string
	for _, h := range pol.Hidden() {
		p := Clean(h.Path)
		l := HiddenFileLabel
		if h.Kind == policy.Dir {
			l = HiddenLabel
		}
		pl.Labels = append(pl.Labels, LabelEntry{Path: p, Label: l, Why: "hidden: " + h.Why})
		now = append(now, p)
	}
	// After every hidden label: a re-opened path may lie below one, whose
	// label it would otherwise inherit.
	for _, h := range pol.Hidden() {
		for _, r := range h.Reopen {
			p := Clean(r)
			l := ProtectedFileLabel
			if isDir(p) {
				l = ProtectedLabel
			}
			pl.Labels = append(pl.Labels, LabelEntry{Path: p, Label: l, Why: "re-opened inside " + h.Path})
			now = append(now, p)
		}
	}
	pl.Unhide, pl.HiddenNow = stale(recorded, now), now
	return pl
}

// HiddenACLPlan is the elevated plan for pol's hidden paths: denies and
// re-opening allows for sid (the sandbox users' group), and Unhide for
// the recorded paths no longer hidden.
func HiddenACLPlan(pol *policy.Policy, sid string, isDir IsDir, recorded []string) Plan {
	var pl Plan
	if pol.Mode() == policy.DangerFullAccess {
		return pl
	}
	var now []string
	for _, h := range pol.Hidden() {
		p := Clean(h.Path)
		a := ACE{Deny: true, Mask: DenyRead, SID: sid}
		if h.Kind == policy.Dir {
			a.Flags = ObjectInherit | ContainerInherit
		}
		pl.Entries = append(pl.Entries, Entry{Path: p, ACE: a, Why: "hidden: " + h.Why})
		now = append(now, p)
		for _, r := range h.Reopen {
			rp := Clean(r)
			a := ACE{Mask: AllowReopen, SID: sid}
			if isDir(rp) {
				a.Flags = ObjectInherit | ContainerInherit
			}
			pl.Entries = append(pl.Entries, Entry{Path: rp, ACE: a, Why: "re-opened inside " + h.Path})
			now = append(now, rp)
		}
	}
	pl.Unhide, pl.HiddenNow, pl.UnhideSID = stale(recorded, now), now, sid
	return pl
}

// stale are the paths of recorded not in now.
func stale(recorded, now []string) []string {
	var out []string
	for _, r := range recorded {
		if !slices.ContainsFunc(now, func(n string) bool { return SamePath(n, r) }) &&
			!slices.ContainsFunc(out, func(o string) bool { return SamePath(o, r) }) {
			out = append(out, r)
		}
	}
	return out
}

// hiddenLabel reports whether l is one of the labels HiddenPlan sets.
func hiddenLabel(l Label) bool { return l == HiddenLabel || l == HiddenFileLabel }

// hiddenACE reports whether a is one of the ACEs HiddenACLPlan sets for sid.
func hiddenACE(a ACE, sid string) bool {
	if !strings.EqualFold(canonicalSID(a.SID), canonicalSID(sid)) || a.Flags&^(ObjectInherit|ContainerInherit) != 0 {
		return false
	}
	return a.Deny && a.Mask == DenyRead || !a.Deny && a.Mask == AllowReopen
}

// unhide takes hidden labels (and, with sid, the hidden ACEs for sid)
// off paths that are no longer hidden; missing paths are skipped.
func unhide(st Store, paths []string, sid string, res *Result) error {
	if len(paths) == 0 {
		return nil
	}
	var errs []error
	if sid != "" {
		changed, err := editDACLs(st, paths, func(d *DACL) int {
			n := 0
			for _, r := range slices.Clone(d.ACEs) {
				if r.OK && r.Parsed.Flags&Inherited == 0 && hiddenACE(r.Parsed, sid) {
					n += d.RemoveACE(r.Parsed)
				}
			}
			return n
		})
		res.Modified = append(res.Modified, changed...)
		errs = append(errs, err)
	}
	if ls, ok := st.(LabelStore); ok {
		for _, p := range paths {
			cur, err := ls.GetLabel(p)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("reading integrity label of %s: %w", p, err))
				continue
			}
			res.Checked++
			// Only the hidden shape: the path may be a protected one or a
			// root now, whose label this run keeps. (A path re-opened
			// earlier keeps its read-only label until cleanup.)
			if l, ok := ParseLabel(cur); !ok || !hiddenLabel(l) {
				continue
			}
			if err := ls.SetLabel(p, "S:"); err != nil {
				errs = append(errs, fmt.Errorf("removing integrity label of %s: %w", p, err))
				continue
			}
			res.Labeled = append(res.Labeled, p)
		}
	}
	return errors.Join(errs...)
}

// checkForeignLabel refuses to replace an explicit label agentbox did
// not set on a path it hides: cleanup could not give it back. One that
// already keeps Low-integrity readers out is left as it is (ok false,
// err nil: nothing to do).
func checkForeignLabel(path, cur string) (set bool, err error) {
	l, ok := ParseLabel(cur)
	if !ok || l.Flags&Inherited != 0 || l == RootLabel || l == ProtectedLabel || l == ProtectedFileLabel || hiddenLabel(l) {
		return true, nil
	}
	if l.Level >= MediumIL && l.Policy&NoReadUp != 0 {
		return false, nil
	}
	return false, fmt.Errorf("%s carries an integrity label agentbox did not set (%s), which hiding it would replace for good; remove that label (icacls %q /setintegritylevel medium) or re-open the path with allow_read", path, l.SDDL(), path)
}
