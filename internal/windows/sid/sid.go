// Package sid creates and persists the synthetic SIDs of agentbox's
// unelevated Windows sandbox.
//
// A synthetic SID has the shape of a domain account SID, S-1-5-21-a-b-c-d,
// with four random 32-bit sub-authorities from crypto/rand. No account
// carries it; it only appears in ACEs agentbox writes and as a restricting
// SID of the sandbox token, so it names "the sandbox" and nothing else.
//
// The SIDs are stored per user in a small JSON file in agentbox's state
// directory (%LOCALAPPDATA%\agentbox\sids.json on Windows). Two SIDs are
// kept: Workspace, granted write on writable roots, and ReadOnly, granted
// nothing, used for read-only runs so grants left by workspace-write runs
// never apply to them. The file also lists every path whose DACL agentbox
// changed, which is what `agentbox cleanup` revokes.
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

// Version is the state file format version this package writes.
const Version = 1

// FileName is the state file's name inside the state directory.
const FileName = "sids.json"

// State is the content of the state file.
type State struct {
	Version   int    `json:"version"`
	Workspace string `json:"workspace"`
	ReadOnly  string `json:"readonly"`
	// Paths whose DACLs carry ACEs for these SIDs, for cleanup.
	Paths []string `json:"paths,omitempty"`
	// Placeholders are protected directories agentbox created because
	// they did not exist; cleanup removes them when still empty.
	Placeholders []string `json:"placeholders,omitempty"`
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
	case st.Version != Version:
		return nil, fmt.Errorf("%s: version %d, this agentbox understands %d (run agentbox cleanup, then retry)", path, st.Version, Version)
	case !Valid(st.Workspace) || !Valid(st.ReadOnly) || st.Workspace == st.ReadOnly:
		return nil, fmt.Errorf("%s: invalid SIDs %q, %q (run agentbox cleanup, then retry)", path, st.Workspace, st.ReadOnly)
	}
	return &st, nil
}

// LoadOrCreate returns the state in dir, creating the directory and two new
// SIDs when there is no state file yet. created says which happened.
func LoadOrCreate(dir string) (st *State, created bool, err error) {
	st, err = Load(dir)
	if err == nil {
		return st, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	st = &State{Version: Version}
	if st.Workspace, err = New(); err != nil {
		return nil, false, err
	}
	for st.ReadOnly == "" || st.ReadOnly == st.Workspace {
		if st.ReadOnly, err = New(); err != nil {
			return nil, false, err
		}
	}
	if err := Save(dir, st); err != nil {
		return nil, false, err
	}
	return st, true, nil
}

// AddPaths records paths (compared case-insensitively) and reports whether
// any was new.
func (st *State) AddPaths(paths ...string) bool { return addTo(&st.Paths, paths) }

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

// StateDir returns agentbox's per-user state directory on Windows,
// %LOCALAPPDATA%\agentbox: local (not roaming) because the SIDs and the
// paths they were granted on belong to this machine.
func StateDir(getenv func(string) string) (string, error) {
	d := getenv("LOCALAPPDATA")
	if d == "" {
		return "", errors.New("LOCALAPPDATA is not set; cannot find agentbox's state directory")
	}
	return strings.TrimRight(d, `\/`) + `\agentbox`, nil
}
