// Package sid creates and persists the synthetic SIDs of agentbox's
// unelevated Windows sandbox.
//
// A synthetic SID has the shape of a domain account SID, S-1-5-21-a-b-c-d,
// with four random 32-bit sub-authorities from crypto/rand. No account
// carries it; it only appears in ACEs agentbox writes and as a restricting
// SID of the sandbox token, so it names "the sandbox" and nothing else.
//
// The SIDs are stored per user in a small JSON file in agentbox's state
// directory (%LOCALAPPDATA%\agentbox\sids.json on Windows): one SID per
// writable root (Roots), granted write on that root only, and ReadOnly,
// granted nothing, used for read-only runs. A run's token carries only the
// SIDs of its own roots, so the grants a run left on another workspace
// last week (ACEs persist) do not make that workspace writable now. The
// file also lists every path whose DACL or label agentbox changed, which
// is what `agentbox cleanup` revokes.
//
// Version 1 files had one Workspace SID for every root; they are still
// read, their SID is never put in a token again, and cleanup revokes it.
package sid

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Version is the state file format version this package writes; it also
// reads version 1.
const Version = 2

// FileName is the state file's name inside the state directory.
const FileName = "sids.json"

// State is the content of the state file.
type State struct {
	Version int `json:"version"`
	// Workspace is version 1's single SID for every writable root: kept
	// only so cleanup can revoke its ACEs.
	Workspace string `json:"workspace,omitempty"`
	ReadOnly  string `json:"readonly"`
	// Roots maps a writable root (RootKey) to its SID.
	Roots map[string]string `json:"roots,omitempty"`
	// Paths whose DACLs carry ACEs for these SIDs, for cleanup.
	Paths []string `json:"paths,omitempty"`
	// Placeholders are protected directories agentbox created because
	// they did not exist; cleanup removes them when still empty.
	Placeholders []string `json:"placeholders,omitempty"`
	// Labels are paths whose mandatory label agentbox set.
	Labels []string `json:"labels,omitempty"`
	// Hidden are the paths agentbox hides or re-opens (a label or an
	// ACE for each, recorded in Labels or Paths too), so that a later
	// run that no longer hides one gives it back (acl.Plan.Unhide).
	Hidden []string `json:"hidden,omitempty"`
	// PlaceholderFiles are read-only git files agentbox created for
	// allow_git_writes; cleanup removes each only while it still holds
	// Content.
	PlaceholderFiles []PlaceholderFile `json:"placeholder_files,omitempty"`
}

// PlaceholderFile is one file agentbox created and what it wrote there.
type PlaceholderFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// AddPlaceholderFiles records created placeholder files and reports
// whether any was new.
func (st *State) AddPlaceholderFiles(files ...PlaceholderFile) bool {
	added := false
	for _, f := range files {
		if !slices.ContainsFunc(st.PlaceholderFiles, func(g PlaceholderFile) bool { return strings.EqualFold(f.Path, g.Path) }) {
			st.PlaceholderFiles = append(st.PlaceholderFiles, f)
			added = true
		}
	}
	return added
}

// RootKey is the form a writable root is keyed by in State.Roots: a
// Windows path with '\' separators, without a trailing one, upper-cased
// (Windows compares paths case-insensitively).
func RootKey(root string) string {
	p := strings.ReplaceAll(root, "/", `\`)
	for len(p) > 3 && strings.HasSuffix(p, `\`) {
		p = p[:len(p)-1]
	}
	return strings.ToUpper(p)
}

// RootSID returns root's SID, creating one (distinct from every other SID
// in the state) when root has none yet; added says so, and the caller then
// saves the state.
func (st *State) RootSID(root string) (sid string, added bool, err error) {
	k := RootKey(root)
	if s, ok := st.Roots[k]; ok {
		return s, false, nil
	}
	for {
		if sid, err = New(); err != nil {
			return "", false, err
		}
		if !slices.Contains(st.SIDs(), sid) {
			break
		}
	}
	if st.Roots == nil {
		st.Roots = map[string]string{}
	}
	st.Roots[k] = sid
	return sid, true, nil
}

// LookupRoot returns root's SID, if it has one.
func (st *State) LookupRoot(root string) (string, bool) {
	s, ok := st.Roots[RootKey(root)]
	return s, ok
}

// SIDs is every SID the state holds (the ones cleanup revokes), sorted by
// root for a stable order.
func (st *State) SIDs() []string {
	var out []string
	if st.Workspace != "" {
		out = append(out, st.Workspace)
	}
	if st.ReadOnly != "" {
		out = append(out, st.ReadOnly)
	}
	keys := make([]string, 0, len(st.Roots))
	for k := range st.Roots {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, st.Roots[k])
	}
	return out
}

var sidRE = regexp.MustCompile(`^S-1-5-21-[0-9]{1,10}-[0-9]{1,10}-[0-9]{1,10}-[0-9]{1,10}$`)

// Valid reports whether s is a synthetic SID as this package makes them.
func Valid(s string) bool {
	if !sidRE.MatchString(s) {
		return false
	}
	for _, part := range strings.Split(s, "-")[4:] {
		var v uint64
		fmt.Sscan(part, &v)
		if v > 0xFFFFFFFF {
			return false
		}
	}
	return true
}

// New returns a fresh random synthetic SID.
func New() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random SID: %w", err)
	}
	return fmt.Sprintf("S-1-5-21-%d-%d-%d-%d",
		binary.LittleEndian.Uint32(b[0:]), binary.LittleEndian.Uint32(b[4:]),
		binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:])), nil
}

// Load reads the state file in dir. It returns an error wrapping
// fs.ErrNotExist when there is none.
func Load(dir string) (*State, error) {
	path := filepath.Join(dir, FileName)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case st.Version != 1 && st.Version != Version:
		return nil, fmt.Errorf("%s: version %d, this agentbox understands 1 and %d (run agentbox cleanup, then retry)", path, st.Version, Version)
	case st.Version == 1 && !Valid(st.Workspace):
		return nil, fmt.Errorf("%s: invalid workspace SID %q (run agentbox cleanup, then retry)", path, st.Workspace)
	case st.Version == Version && st.Workspace != "" && !Valid(st.Workspace):
		return nil, fmt.Errorf("%s: invalid workspace SID %q (run agentbox cleanup, then retry)", path, st.Workspace)
	case !Valid(st.ReadOnly):
		return nil, fmt.Errorf("%s: invalid read-only SID %q (run agentbox cleanup, then retry)", path, st.ReadOnly)
	}
	seen := map[string]bool{}
	for _, s := range st.SIDs() {
		if !Valid(s) {
			return nil, fmt.Errorf("%s: invalid SID %q (run agentbox cleanup, then retry)", path, s)
		}
		if seen[s] {
			return nil, fmt.Errorf("%s: SID %s used twice (run agentbox cleanup, then retry)", path, s)
		}
		seen[s] = true
	}
	st.Version = Version // written back as the current format
	return &st, nil
}

// LoadOrCreate returns the state in dir, creating the directory and the
// read-only SID when there is no state file yet (root SIDs are made by
// RootSID as roots appear). created says which happened.
func LoadOrCreate(dir string) (st *State, created bool, err error) {
	st, err = Load(dir)
	if err == nil {
		return st, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	st = &State{Version: Version}
	if st.ReadOnly, err = New(); err != nil {
		return nil, false, err
	}
	if err := Save(dir, st); err != nil {
		return nil, false, err
	}
	return st, true, nil
}

// AddPaths records paths (compared case-insensitively) and reports whether
// any was new.
func (st *State) AddPaths(paths ...string) bool { return addTo(&st.Paths, paths) }

// AddLabels records paths whose mandatory label agentbox set.
func (st *State) AddLabels(paths ...string) bool { return addTo(&st.Labels, paths) }

// SetHidden records the paths hidden (or re-opened) now, and forgets
// those given back; it reports whether the list changed.
func (st *State) SetHidden(now, unhidden []string) bool {
	changed := addTo(&st.Hidden, now)
	n := len(st.Hidden)
	st.Hidden = slices.DeleteFunc(st.Hidden, func(p string) bool {
		return slices.ContainsFunc(unhidden, func(u string) bool { return strings.EqualFold(p, u) }) &&
			!slices.ContainsFunc(now, func(u string) bool { return strings.EqualFold(p, u) })
	})
	return changed || len(st.Hidden) != n
}

// AddPlaceholders records created placeholder directories.
func (st *State) AddPlaceholders(paths ...string) bool { return addTo(&st.Placeholders, paths) }

func addTo(list *[]string, paths []string) bool {
	added := false
	for _, p := range paths {
		if !slices.ContainsFunc(*list, func(q string) bool { return strings.EqualFold(p, q) }) {
			*list = append(*list, p)
			added = true
		}
	}
	return added
}

// Save writes the state file atomically (temp file, then rename), so a
// crash never leaves a half-written file that would lose the SIDs.
func Save(dir string, st *State) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, FileName+".*")
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	_, werr := f.Write(append(data, '\n'))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("state file: %w", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, FileName)); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("state file: %w", err)
	}
	return nil
}
