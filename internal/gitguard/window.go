package gitguard

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/fspath"
)

// A window is the time during which sandboxed runs may have written a
// writable root: from the start of the first run that holds it to the end
// of the last one out. Runs of one root (lone runs, the resident helper's,
// a session's commands, in any process of the user) share one window, so
// that no run's check takes what another run wrote for the user's: the
// check runs once, when the last run lets go, over everything made or
// changed since the window opened. Windows of roots that overlap (a
// workspace inside another run's --add-dir) share their start, and the
// innermost open one defers to the outer one that contains it.
//
// The bookkeeping lives in agentbox's state directory, which no command
// can write: guard/registry.lock serialises opening and closing windows;
// guard/<key>.lock is held shared by every run of the window for as long
// as it runs (the kernel drops a killed run's hold, so a window nobody
// holds is over); guard/<key>.json is the window's record.
type window struct {
	Root string
	// Since is when it opened (UnixNano), at the kernel's coarse clock.
	Since int64
	// Skip are the paths inside Root that every run of the window had
	// read-only (so the check need not look in them).
	Skip []string `json:",omitempty"`
	// Guarded are the paths inside Root that every run of the window
	// kept read-only or whose git-running files it kept read-only (the
	// git directories allow_git_writes opens): what no run of the window
	// could make git run a program through. A window that overlaps this
	// one may only skip, or trust as a run's own, what this one guarded.
	Guarded []string `json:",omitempty"`
	// Own are the root's own git directories that a run of the window
	// could write (allow_git_writes), with what they held before.
	Own []Baseline `json:",omitempty"`
}

// narrow makes w's record hold for what a run of o (another window,
// open at the same time, that overlaps w) could write: w no longer skips
// a path inside o's root that o did not keep read-only, nor one that
// holds o's root; and w's own git directories that o did not guard are
// exposed (checked as any nested repository). It reports whether w
// changed.
func (w *window) narrow(o window) bool {
	changed := false
	var skip []string
	for _, p := range w.Skip {
		inO := fspath.Within(p, o.Root) && !slices.ContainsFunc(o.Skip, func(q string) bool { return fspath.Within(p, q) })
		if inO || fspath.Within(o.Root, p) {
			changed = true
			continue
		}
		skip = append(skip, p)
	}
	w.Skip = skip
	for i, b := range w.Own {
		inO := fspath.Within(b.GitDir, o.Root) && !slices.Contains(o.Guarded, b.GitDir)
		if !b.Exposed && (inO || fspath.Within(o.Root, b.GitDir)) {
			w.Own[i].Exposed = true
			changed = true
		}
	}
	return changed
}

const (
	guardDir     = "guard"
	registryLock = "registry.lock"
	// lockWait bounds how long a run waits for the registry: another
	// run's check (a walk of a large tree) holds it.
	lockWait = 5 * time.Minute
)

func windowKey(root string) string { return agentdirs.WorkspaceKey(root) }

// registry is the guard directory, locked.
type registry struct {
	d    *dir
	lock *lockFile
}

// openRegistry opens and locks $STATE/guard, making it if needed.
func openRegistry(state string) (*registry, error) {
	if state == "" || !filepath.IsAbs(state) {
		return nil, errors.New("agentbox has no state directory to coordinate its checks of what commands leave behind (set HOME or XDG_STATE_HOME)")
	}
	s, err := openOrMake(state)
	if err != nil {
		return nil, err
	}
	defer s.close()
	if err := s.mkdir(guardDir, 0o700); err != nil && !isExist(err) {
		return nil, err
	}
	d, _, err := s.open(guardDir)
	if err != nil {
		return nil, err
	}
	l, err := openLock(d, registryLock)
	if err != nil {
		d.close()
		return nil, err
	}
	if err := l.lockWait(true, lockWait); err != nil {
		l.close()
		d.close()
		return nil, fmt.Errorf("waiting for %s (another agentbox run is checking what its command left behind): %w", d.child(registryLock), err)
	}
	return &registry{d: d, lock: l}, nil
}

func (r *registry) close() {
	r.lock.close()
	r.d.close()
}

// load reads the window record for key; ok is false when there is none.
func (r *registry) load(key string) (w window, ok bool, err error) {
	data, fits, err := r.d.readFile(key+".json", 64<<20)
	if isNotExist(err) {
		return window{}, false, nil
	}
	if err == nil && !fits {
		err = errors.New("too large")
	}
	if err == nil {
		err = json.Unmarshal(data, &w)
	}
	if err != nil {
		return window{}, false, fmt.Errorf("reading %s: %w", r.d.child(key+".json"), err)
	}
	return w, true, nil
}

func (r *registry) store(key string, w window) error {
	data, err := json.Marshal(w)
	if err != nil {
		return err
	}
	tmp := key + ".json.tmp-" + randomHex(4)
	if err := r.d.writeNew(tmp, data, 0o600); err != nil {
		return err
	}
	if err := r.d.rename(tmp, r.d, key+".json"); err != nil {
		r.d.remove(tmp)
		return err
	}
	return nil
}

// drop removes a window's record and lock, which nobody holds: every
// open of a window's lock happens under the registry lock.
func (r *registry) drop(key string) {
	r.d.remove(key + ".json")
	r.d.remove(key + ".lock")
}

// held reports whether any run holds the window key (its lock is taken).
func (r *registry) held(key string) (bool, error) {
	l, err := openLock(r.d, key+".lock")
	if err != nil {
		return false, err
	}
	defer l.close()
	got, err := l.try(true)
	return !got, err
}

// windows lists the keys of every recorded window.
func (r *registry) windows() ([]string, error) {
	ents, err := r.d.entries()
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, e := range ents {
		if k, ok := strings.CutSuffix(e.name, ".json"); ok && e.typ == 0 {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// open is one recorded window and whether a run holds it.
type openWindow struct {
	key  string
	w    window
	held bool
}

// all reads every recorded window.
func (r *registry) all() ([]openWindow, error) {
	keys, err := r.windows()
	if err != nil {
		return nil, err
	}
	var out []openWindow
	for _, k := range keys {
		w, ok, err := r.load(k)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		h, err := r.held(k)
		if err != nil {
			return nil, err
		}
		out = append(out, openWindow{key: k, w: w, held: h})
	}
	return out, nil
}

// overlaps reports whether two roots overlap (one holds the other).
func overlaps(a, b string) bool { return fspath.Within(a, b) || fspath.Within(b, a) }

// intersect keeps the paths of a that are also in b.
func intersect(a, b []string) []string {
	var out []string
	for _, p := range a {
		if slices.Contains(b, p) {
			out = append(out, p)
		}
	}
	return out
}
