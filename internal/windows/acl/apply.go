package acl

import (
	"errors"
	"fmt"
	"io/fs"
)

// Store reads and writes file DACLs as SDDL. The Windows implementation
// uses GetNamedSecurityInfo and SetNamedSecurityInfo; tests use a map.
type Store interface {
	// GetDACL returns the path's DACL as SDDL ("D:...").
	GetDACL(path string) (string, error)
	// SetDACL replaces the path's explicit DACL. Windows then propagates
	// inheritable ACEs through the tree, which is the slow part.
	SetDACL(path, sddl string, protected bool) error
	// Mkdir creates a directory; it must fail with fs.ErrExist when the
	// path exists.
	Mkdir(path string) error
}

// LinkStore is a Store that can tell reparse points (symbolic links,
// junctions) from other files and read and write the DACL of the link
// object itself. GetDACL and SetDACL work by name and follow a reparse
// point to its target; a protected path that is a link would otherwise
// keep the allow it inherits from its writable root (DELETE included), so
// the command could delete it and put another link or directory there.
// The Windows store opens the link with FILE_FLAG_OPEN_REPARSE_POINT and
// uses Get/SetSecurityInfo on that handle.
type LinkStore interface {
	Store
	// IsLink reports whether path itself is a reparse point.
	IsLink(path string) (bool, error)
	GetLinkDACL(path string) (string, error)
	SetLinkDACL(path, sddl string, protected bool) error
}

// LabelStore is a Store that reads and writes mandatory labels, which a
// plan with Labels needs. Windows: Get/SetNamedSecurityInfo with
// LABEL_SECURITY_INFORMATION, which needs READ_CONTROL and WRITE_OWNER (a
// user may label what they own, up to their own integrity level).
type LabelStore interface {
	Store
	// GetLabel returns the path's label part as SDDL ("S:(ML;...)", or
	// "" or "S:" when it has none).
	GetLabel(path string) (string, error)
	// SetLabel sets the path's explicit label from "S:(ML;...)"; "S:"
	// removes it. Windows propagates an inheritable label to the tree.
	SetLabel(path, sacl string) error
}

// LinkLabelStore also labels the link object itself, for protected paths
// that are links (as LinkStore does for their DACL).
type LinkLabelStore interface {
	LinkStore
	GetLinkLabel(path string) (string, error)
	SetLinkLabel(path, sacl string) error
}

// Result says what Apply did.
type Result struct {
	Checked  int      // paths whose DACL was read
	Modified []string // paths whose DACL was written
	Created  []string // protected placeholders created
	Labeled  []string // paths whose label was written
	// Files are the placeholder files created, with their content.
	Files []FilePlaceholder
}

// FileMaker is a Store that can create placeholder files (GitPlan).
type FileMaker interface {
	// CreateFile creates path with content; it must fail with
	// fs.ErrExist when the path exists.
	CreateFile(path string, content []byte) error
}

// Apply makes the plan true on disk, reading each DACL first and writing
// only those that lack an entry, so a second run over the same policy
// writes nothing and walks no tree.
func Apply(st Store, pl Plan) (Result, error) {
	var res Result
	for _, p := range pl.Mkdirs {
		err := st.Mkdir(p)
		switch {
		case err == nil:
			res.Created = append(res.Created, p)
		case errors.Is(err, fs.ErrExist):
		default:
			return res, fmt.Errorf("creating protected placeholder %s: %w", p, err)
		}
	}
	if len(pl.Files) > 0 {
		fm, ok := st.(FileMaker)
		if !ok {
			return res, errors.New("the plan creates placeholder files but the store cannot")
		}
		for _, f := range pl.Files {
			err := fm.CreateFile(f.Path, []byte(f.Content))
			switch {
			case err == nil:
				res.Files = append(res.Files, f)
			case errors.Is(err, fs.ErrExist):
			default:
				return res, fmt.Errorf("creating placeholder %s: %w", f.Path, err)
			}
		}
	}
	// Group entries by path so each DACL is read and written once.
	var order []string
	byPath := map[string][]Entry{}
	removes := map[string][]ACE{}
	for _, e := range pl.Remove {
		k := Key(e.Path)
		if _, ok := byPath[k]; !ok {
			order = append(order, k)
			byPath[k] = nil
		}
		removes[k] = append(removes[k], e.ACE)
	}
	for _, e := range pl.Entries {
		k := Key(e.Path)
		if _, ok := byPath[k]; !ok {
			order = append(order, k)
		}
		byPath[k] = append(byPath[k], e)
	}
	for _, k := range order {
		es := byPath[k]
		path := pathOf(es, pl.Remove, k)
		sddl, err := st.GetDACL(path)
		if err != nil {
			return res, fmt.Errorf("reading DACL of %s: %w", path, err)
		}
		res.Checked++
		d, err := ParseDACL(sddl)
		if err != nil {
			return res, fmt.Errorf("DACL of %s: %w", path, err)
		}
		changed := false
		for _, a := range removes[k] {
			changed = d.RemoveACE(a) > 0 || changed
		}
		for _, e := range es {
			c, err := d.Add(e.ACE)
			if err != nil {
				return res, fmt.Errorf("%s (%s): %w", path, e.Why, err)
			}
			changed = changed || c
		}
		if !changed {
			continue
		}
		if err := st.SetDACL(path, d.Explicit(), d.Protected()); err != nil {
			return res, fmt.Errorf("writing DACL of %s: %w", path, err)
		}
		res.Modified = append(res.Modified, path)
	}
	if err := unhide(st, pl.Unhide, pl.UnhideSID, &res); err != nil {
		return res, err
	}
	if err := removeLabels(st, pl.Unlabel, &res); err != nil {
		return res, err
	}
	if err := applyLabels(st, pl.Labels, &res); err != nil {
		return res, err
	}
	// Protected paths that are links get the deny on the link object too.
	ls, ok := st.(LinkStore)
	if !ok {
		return res, nil
	}
	for _, k := range order {
		var want []ACE
		for _, e := range byPath[k] {
			if e.OnLink {
				a := e.ACE
				a.Flags = 0 // nothing to inherit on the link object
				want = append(want, a)
			}
		}
		if len(want) == 0 {
			continue
		}
		path := pathOf(byPath[k], pl.Remove, k)
		link, err := ls.IsLink(path)
		if err != nil {
			return res, fmt.Errorf("checking whether %s is a link: %w", path, err)
		}
		if !link {
			continue
		}
		changed, err := addACEs(ls.GetLinkDACL, ls.SetLinkDACL, path, want)
		res.Checked++
		if err != nil {
			return res, fmt.Errorf("link %s: %w", path, err)
		}
		if changed && (len(res.Modified) == 0 || res.Modified[len(res.Modified)-1] != path) {
			res.Modified = append(res.Modified, path)
		}
	}
	return res, nil
}

// pathOf is the path of key k: from its entries, else from the removals.
func pathOf(es []Entry, removes []Entry, k string) string {
	if len(es) > 0 {
		return es[0].Path
	}
	for _, e := range removes {
		if Key(e.Path) == k {
			return e.Path
		}
	}
	return k
}

// removeLabels removes agentbox's own explicit protected label from each
// path that carries it.
func removeLabels(st Store, paths []string, res *Result) error {
	if len(paths) == 0 {
		return nil
	}
	ls, ok := st.(LabelStore)
	if !ok {
		return nil // no labels in this mode (elevated, Wine): nothing to remove
	}
	for _, p := range paths {
		cur, err := ls.GetLabel(p)
		if err != nil {
			return fmt.Errorf("reading integrity label of %s: %w", p, err)
		}
		res.Checked++
		if l, ok := ParseLabel(cur); !ok || l != ProtectedLabel && l != ProtectedFileLabel {
			continue
		}
		if err := ls.SetLabel(p, "S:"); err != nil {
			return fmt.Errorf("removing integrity label of %s: %w", p, err)
		}
		res.Labeled = append(res.Labeled, p)
	}
	return nil
}

// applyLabels sets each wanted label whose path does not carry exactly it
// as an explicit label; a protected link gets it on the link object too.
func applyLabels(st Store, labels []LabelEntry, res *Result) error {
	if len(labels) == 0 {
		return nil
	}
	ls, ok := st.(LabelStore)
	if !ok {
		return errors.New("the plan sets integrity labels but the store cannot write them")
	}
	for _, l := range labels {
		if hiddenLabel(l.Label) {
			cur, err := ls.GetLabel(l.Path)
			if err != nil {
				return fmt.Errorf("integrity label of %s (%s): reading: %w", l.Path, l.Why, err)
			}
			set, err := checkForeignLabel(l.Path, cur)
			if err != nil {
				return err
			}
			if !set {
				res.Checked++
				continue
			}
		}
		changed, err := setLabel(ls.GetLabel, ls.SetLabel, l.Path, l.Label)
		if err != nil {
			return fmt.Errorf("integrity label of %s (%s): %w", l.Path, l.Why, err)
		}
		res.Checked++
		if changed {
			res.Labeled = append(res.Labeled, l.Path)
		}
		if l.Label == RootLabel {
			continue // a root that is a link is resolved by the policy
		}
		lls, ok := st.(LinkLabelStore)
		if !ok {
			continue
		}
		link, err := lls.IsLink(l.Path)
		if err != nil {
			return fmt.Errorf("checking whether %s is a link: %w", l.Path, err)
		}
		if !link {
			continue
		}
		ll := l.Label
		ll.Flags = 0
		changed, err = setLabel(lls.GetLinkLabel, lls.SetLinkLabel, l.Path, ll)
		if err != nil {
			return fmt.Errorf("integrity label of link %s: %w", l.Path, err)
		}
		if changed && (len(res.Labeled) == 0 || res.Labeled[len(res.Labeled)-1] != l.Path) {
			res.Labeled = append(res.Labeled, l.Path)
		}
	}
	return nil
}

func setLabel(get func(string) (string, error), set func(string, string) error, path string, want Label) (bool, error) {
	cur, err := get(path)
	if err != nil {
		return false, fmt.Errorf("reading: %w", err)
	}
	if have, ok := ParseLabel(cur); ok && have == want {
		return false, nil
	}
	if err := set(path, want.SACL()); err != nil {
		return false, fmt.Errorf("writing: %w", err)
	}
	return true, nil
}

// RevokeLabels removes the explicit labels agentbox sets (RootLabel,
// ProtectedLabel, ProtectedFileLabel, HiddenLabel, HiddenFileLabel) from paths, on link objects too, and
// returns the paths it changed. Missing paths are skipped; a label of
// another shape is somebody else's and stays.
func RevokeLabels(st LabelStore, paths []string) ([]string, error) {
	ours := func(l Label) bool {
		// Exact match: an inherited copy carries ID and is not ours.
		return l == RootLabel || l == ProtectedLabel || l == ProtectedFileLabel || hiddenLabel(l)
	}
	var changed []string
	var errs []error
	revoke := func(get func(string) (string, error), set func(string, string) error, p string) {
		cur, err := get(p)
		if errors.Is(err, fs.ErrNotExist) {
			return
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading label of %s: %w", p, err))
			return
		}
		if l, ok := ParseLabel(cur); !ok || !ours(l) {
			return
		}
		if err := set(p, "S:"); err != nil {
			errs = append(errs, fmt.Errorf("removing label of %s: %w", p, err))
			return
		}
		if len(changed) == 0 || changed[len(changed)-1] != p {
			changed = append(changed, p)
		}
	}
	lls, _ := st.(LinkLabelStore)
	for _, p := range paths {
		if lls != nil {
			if link, err := lls.IsLink(p); err == nil && link {
				revoke(lls.GetLinkLabel, lls.SetLinkLabel, p)
			}
		}
		revoke(st.GetLabel, st.SetLabel, p)
	}
	return changed, errors.Join(errs...)
}

// addACEs adds want to the DACL get reads, writing it back with set only
// when something was missing.
func addACEs(get func(string) (string, error), set func(string, string, bool) error, path string, want []ACE) (bool, error) {
	sddl, err := get(path)
	if err != nil {
		return false, fmt.Errorf("reading DACL: %w", err)
	}
	d, err := ParseDACL(sddl)
	if err != nil {
		return false, err
	}
	changed := false
	for _, a := range want {
		c, err := d.Add(a)
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	if !changed {
		return false, nil
	}
	if err := set(path, d.Explicit(), d.Protected()); err != nil {
		return false, fmt.Errorf("writing DACL: %w", err)
	}
	return true, nil
}

// UserGuard is the ACE IntegrityPlan puts on the directories leading to a
// protected path, for the user's own SID.
func UserGuard(userSID string) ACE { return ACE{Deny: true, Mask: FileDeleteChild, SID: userSID} }

// RevokeUserGuards removes exactly UserGuard(userSID) and
// GitDirGuard(userSID) from paths, and no other ACE of the user's,
// returning the paths it changed.
func RevokeUserGuards(st Store, paths []string, userSID string) ([]string, error) {
	g, gd := UserGuard(userSID), GitDirGuard(userSID)
	return editDACLs(st, paths, func(d *DACL) int { return d.RemoveACE(g) + d.RemoveACE(gd) })
}

// editDACLs applies edit, which returns how many ACEs it removed, to the
// DACL of each path that exists, writes back the ones it changed and
// returns them.
func editDACLs(st Store, paths []string, edit func(*DACL) int) ([]string, error) {
	var changed []string
	var errs []error
	for _, p := range paths {
		sddl, err := st.GetDACL(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading DACL of %s: %w", p, err))
			continue
		}
		d, err := ParseDACL(sddl)
		if err != nil {
			errs = append(errs, fmt.Errorf("DACL of %s: %w", p, err))
			continue
		}
		if edit(d) == 0 {
			continue
		}
		if err := st.SetDACL(p, d.Explicit(), d.Protected()); err != nil {
			errs = append(errs, fmt.Errorf("writing DACL of %s: %w", p, err))
			continue
		}
		changed = append(changed, p)
	}
	return changed, errors.Join(errs...)
}

// Revoke removes every explicit ACE for the given SIDs from paths and
// returns the paths it changed (agentbox cleanup). Missing paths are
// skipped. Never pass a real account's SID: use RevokeUserGuards.
func Revoke(st Store, paths []string, sids ...string) ([]string, error) {
	var changed []string
	var errs []error
	if ls, ok := st.(LinkStore); ok {
		// A link object's own ACEs (Apply's OnLink entries) first.
		for _, p := range paths {
			if link, err := ls.IsLink(p); err != nil || !link {
				continue
			}
			n, err := removeSIDs(ls.GetLinkDACL, ls.SetLinkDACL, p, sids)
			if err != nil {
				errs = append(errs, fmt.Errorf("link %s: %w", p, err))
			} else if n > 0 {
				changed = append(changed, p)
			}
		}
	}
	more, err := editDACLs(st, paths, func(d *DACL) int {
		n := 0
		for _, s := range sids {
			n += d.RemoveSID(s)
		}
		return n
	})
	return append(changed, more...), errors.Join(append(errs, err)...)
}

func removeSIDs(get func(string) (string, error), set func(string, string, bool) error, path string, sids []string) (int, error) {
	sddl, err := get(path)
	if err != nil {
		return 0, fmt.Errorf("reading DACL: %w", err)
	}
	d, err := ParseDACL(sddl)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range sids {
		n += d.RemoveSID(s)
	}
	if n == 0 {
		return 0, nil
	}
	if err := set(path, d.Explicit(), d.Protected()); err != nil {
		return 0, fmt.Errorf("writing DACL: %w", err)
	}
	return n, nil
}
