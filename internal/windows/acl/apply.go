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
	return res, nil
}

// Revoke removes every explicit ACE for the given SIDs from paths and
// returns the paths it changed (agentbox cleanup). Missing paths are
// skipped.
func Revoke(st Store, paths []string, sids ...string) ([]string, error) {
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
