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

// Result says what Apply did.
type Result struct {
	Checked  int      // paths whose DACL was read
	Modified []string // paths whose DACL was written
	Created  []string // protected placeholders created
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
	// Group entries by path so each DACL is read and written once.
	var order []string
	byPath := map[string][]Entry{}
	for _, e := range pl.Entries {
		k := Key(e.Path)
		if _, ok := byPath[k]; !ok {
			order = append(order, k)
		}
		byPath[k] = append(byPath[k], e)
	}
	for _, k := range order {
		es := byPath[k]
		path := es[0].Path
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
		path := byPath[k][0].Path
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

// Revoke removes every explicit ACE for the given SIDs from paths and
// returns the paths it changed (agentbox cleanup). Missing paths are
// skipped.
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
		n := 0
		for _, s := range sids {
			n += d.RemoveSID(s)
		}
		if n == 0 {
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
