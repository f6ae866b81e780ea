package gitguard

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// quarantine moves what the guard does not trust out of git's sight,
// losing nothing: into a directory of its own under agentbox's state
// directory (which no command can write, so nothing there can be moved
// back; a directory is made unreadable there, as git would still use it
// as a repository through a symlink a later command leaves), or, where that is another file system (a rename cannot cross
// one), to a name beside it that the command cannot predict (random), made
// unreadable, with the inode remembered: a later run that finds it under
// any other name moves it aside again.
type quarantine struct {
	state *dir // agentbox's quarantine directory ($STATE/quarantine)
	run   *dir // this check's subdirectory, made on first use
	n     int

	moved     []Moved                                                    // remembered, in-place moves (persisted)
	known     map[Identity]int                                           // index into moved
	manifest  strings.Builder                                            // what this check moved, for the user
	rename    func(from *dir, name string, to *dir, toName string) error // tests fake EXDEV
	randomHex func(int) string
}

// Moved is an inode moved aside in place, remembered across runs.
type Moved struct {
	ID   Identity
	Path string // where it was put
}

const (
	movedFile    = "moved-in-place.json"
	manifestFile = "MANIFEST"
	maxMoved     = 10000
)

// testRename, when set by a test, stands in for the quarantine's renames
// (to fake a rename across file systems).
var testRename func(from *dir, name string, to *dir, toName string) error

func newQuarantine(state *dir) (*quarantine, error) {
	q := &quarantine{state: state, known: map[Identity]int{}, rename: (*dir).rename, randomHex: randomHex}
	if testRename != nil {
		q.rename = testRename
	}
	data, ok, err := state.readFile(movedFile, 16<<20)
	switch {
	case isNotExist(err):
	case err != nil:
		return nil, fmt.Errorf("reading agentbox's record of what it moved aside: %w", err)
	case !ok:
		return nil, fmt.Errorf("%s is larger than agentbox reads", state.child(movedFile))
	default:
		if err := json.Unmarshal(data, &q.moved); err != nil {
			return nil, fmt.Errorf("reading %s: %w", state.child(movedFile), err)
		}
	}
	for i, m := range q.moved {
		q.known[m.ID] = i
	}
	return q, nil
}

// remembers reports whether st is an inode agentbox moved aside in place
// before and that is now somewhere else: a command put it back.
func (q *quarantine) remembers(st info) bool {
	_, ok := q.known[st.identity()]
	return ok
}

// move moves name out of parent; it returns where it went.
func (q *quarantine) move(parent *dir, name string) (string, error) {
	st, err := parent.stat(name)
	if err != nil {
		return "", err
	}
	if q.run == nil {
		stamp := time.Now().UTC().Format("20060102-150405")
		runName := stamp + "-" + q.randomHex(4)
		if err := q.state.mkdir(runName, 0o700); err != nil {
			return "", err
		}
		if q.run, _, err = q.state.open(runName); err != nil {
			return "", err
		}
	}
	q.n++
	toName := fmt.Sprintf("%d-%s", q.n, strings.TrimLeft(name, "."))
	where := q.run.child(toName)
	err = q.rename(parent, name, q.run, toName)
	if err == nil && st.mode.IsDir() {
		// Unreadable there too: the quarantine is readable by the
		// user, and a later command can learn its names and leave a
		// symlink in the workspace that leads the user's git into a
		// repository it planted.
		if err = q.run.chmodEntry(toName, 0); err == nil {
			err = q.run.disown(toName)
		}
	}
	if isCrossDevice(err) {
		toName = name + ".agentbox-quarantine-" + q.randomHex(8)
		where = parent.child(toName)
		if err = q.rename(parent, name, parent, toName); err == nil {
			if st.mode.IsDir() {
				// Unreadable, so git cannot use it under any name
				// until the user deliberately makes it readable.
				if err = parent.chmodEntry(toName, 0); err == nil {
					err = parent.disown(toName)
				}
			}
			q.remember(st.identity(), where)
		}
	}
	if err != nil {
		return "", err
	}
	// Nothing else may stand at the name now (the command's processes
	// are gone, but another sandbox's roots may overlap this one's).
	if _, err := parent.stat(name); !isNotExist(err) {
		return "", fmt.Errorf("something is still at %s after moving it aside", parent.child(name))
	}
	fmt.Fprintf(&q.manifest, "%s\t%s\n", parent.child(name), where)
	return where, nil
}

func (q *quarantine) remember(id Identity, where string) {
	if i, ok := q.known[id]; ok {
		q.moved[i].Path = where
		return
	}
	q.known[id] = len(q.moved)
	q.moved = append(q.moved, Moved{ID: id, Path: where})
}

// atHome reports whether st, found at path, is a remembered inode still
// where agentbox put it (then it stays, unreadable).
func (q *quarantine) atHome(st info, path string) bool {
	i, ok := q.known[st.identity()]
	return ok && filepath.Clean(q.moved[i].Path) == path
}

// close writes the run's manifest and the remembered in-place moves.
func (q *quarantine) close() error {
	var err error
	if q.run != nil {
		err = q.run.writeNew(manifestFile, []byte(q.manifest.String()), 0o600)
		q.run.close()
	}
	if len(q.moved) > maxMoved {
		q.moved = q.moved[len(q.moved)-maxMoved:]
	}
	if len(q.moved) > 0 {
		data, _ := json.Marshal(q.moved)
		tmp := movedFile + ".tmp-" + q.randomHex(4)
		if werr := q.state.writeNew(tmp, data, 0o600); werr != nil {
			err = werr
		} else if rerr := q.rename(q.state, tmp, q.state, movedFile); rerr != nil {
			q.state.remove(tmp)
			err = rerr
		}
	}
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
