package gitguard

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/git"
	"github.com/agentbox/agentbox/internal/linux/inotify"
)

// A watcher is a kernel notification (inotify) on every directory of a
// writable root, held by a process that runs many commands under one
// policy (a session, the resident helper): it records which directories
// had entries made, removed, renamed, written or changed, so that the
// check after each command looks only there instead of walking the whole
// root. The kernel queues an event synchronously with the change, so once
// a command's tree is gone every event it caused is in the queue; the
// check drains it first.
//
// What it cannot see makes the check walk everything, as a lone run does:
// a lost event (queue overflow), a directory it could not watch (the
// user's inotify limit), a renamed directory (its subtree's paths moved),
// and a file with more than one link that changed (written through
// another name, in a directory the watcher would not mark).
type watcher struct {
	root string
	fd   int
	// file is fd in the runtime's poller, once the reader runs: it
	// waits parked there rather than in a blocking poll, which kept a
	// thread in a system call each time it waited, and the runtime's
	// monitor waking every 20 us to take its processor back. Closing it
	// ends the reader.
	file *os.File
	buf  []byte // the reader's and the checks' read buffer (under mu)

	mu     sync.Mutex
	byWD   map[int32]string
	byPath map[string]int32
	files  map[int32]string // watches of git directories' files
	// subdirs counts the watched directories right below each path.
	subdirs map[string]int
	gitRel  map[string]string // watched git directories: path inside the git directory
	dirty   map[string]int64  // directory -> when an event there was read (UnixNano)
	ready   int64             // every directory watched since this time
	// blind is when a directory last moved (its subtree's events until
	// then may name old paths): checks of windows that began earlier walk
	// the whole root.
	blind int64
	// broken: an event was lost or a directory could not be watched;
	// from then on every check walks.
	broken  bool
	refs    int
	reading bool
	done    chan struct{}
}

const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_CLOSE_WRITE | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW | unix.IN_EXCL_UNLINK

var watchers = struct {
	sync.Mutex
	m map[string]*watcher
	// pending counts the holders of roots that did not exist when they
	// asked (a private /tmp's host directory, made by the first
	// command): the first check after the root appears starts watching
	// it.
	pending map[string]int
}{m: map[string]*watcher{}, pending: map[string]int{}}

// Watch starts watching each root (or shares a watcher this process
// already has); release ends this holder's share. A root that cannot be
// watched is left to full walks; one that does not exist yet is watched
// from the first check after it appears.
func Watch(roots []string) (release func()) {
	var held []string
	watchers.Lock()
	for _, r := range roots {
		w := watchers.m[r]
		if w == nil {
			var err error
			if w, err = newWatcher(r); err != nil {
				if isNotExist(err) {
					watchers.pending[r]++
					held = append(held, r)
				}
				continue
			}
			watchers.m[r] = w
		}
		w.refs++
		held = append(held, r)
	}
	watchers.Unlock()
	return func() {
		watchers.Lock()
		defer watchers.Unlock()
		for _, r := range held {
			if w := watchers.m[r]; w != nil {
				if w.refs--; w.refs == 0 {
					delete(watchers.m, r)
					w.close()
				}
			} else if watchers.pending[r]--; watchers.pending[r] <= 0 {
				delete(watchers.pending, r)
			}
		}
	}
}

func newWatcher(root string) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	w := &watcher{root: root, fd: fd, byWD: map[int32]string{}, byPath: map[string]int32{}, files: map[int32]string{}, gitRel: map[string]string{}, subdirs: map[string]int{}, dirty: map[string]int64{}, done: make(chan struct{})}
	w.mu.Lock()
	err = w.addTree(root, 0, 0)
	w.ready = time.Now().UnixNano()
	w.mu.Unlock()
	if err != nil {
		w.close()
		return nil, err
	}
	// fd is non-blocking (IN_NONBLOCK): os.NewFile puts it in the
	// poller.
	w.file = os.NewFile(uintptr(fd), "inotify "+root)
	w.reading = true
	go w.read()
	return w, nil
}

// addTree watches dir and every directory below it, without following
// symlinks, marking each dirty at mark (0: not). Watching before listing
// means nothing made in a directory is missed: it is either listed or
// reported.
//
// In git directories (a .git, or a directory shaped like a bare
// repository) it watches the files too: a watch on a directory hears of
// writes made through that directory only, and one of the repository's
// files written through a hard link elsewhere (outside every watched
// root: a shared $TMPDIR) would leave the directory unmarked. A watch on
// the file itself hears of every write, through any name.
func (w *watcher) addTree(dir string, depth int, mark int64) error {
	if depth > maxDepth {
		return errors.New("too deep")
	}
	wd, err := unix.InotifyAddWatch(w.fd, dir, watchMask)
	if err != nil {
		if dir == w.root {
			// A watcher of nothing would answer that nothing changed.
			return &os.PathError{Op: "inotify_add_watch", Path: dir, Err: err}
		}
		if isNotExist(err) || errors.Is(err, unix.ENOTDIR) {
			return nil // gone, or a symlink (IN_DONT_FOLLOW|IN_ONLYDIR)
		}
		return err
	}
	if old, ok := w.byPath[dir]; ok && old != int32(wd) {
		delete(w.byWD, old)
	} else if !ok {
		w.subdirs[filepath.Dir(dir)]++
	}
	w.byWD[int32(wd)] = dir
	w.byPath[dir] = int32(wd)
	if mark != 0 {
		w.dirty[dir] = mark
	}
	d, err := openTop(dir)
	if err != nil {
		if isNotExist(err) {
			return nil
		}
		return err
	}
	rel, inGit := w.gitRel[filepath.Dir(dir)]
	switch {
	case inGit:
		rel = path.Join(rel, filepath.Base(dir))
	case git.IsDotGit(filepath.Base(dir)):
		rel, inGit = ".", true
	default:
		if bare, _ := bareShape(d); bare {
			rel, inGit = ".", true
		}
	}
	if inGit {
		w.gitRel[dir] = rel
	}
	ents, err := d.entries()
	d.close()
	if err != nil {
		return err
	}
	for _, e := range ents {
		child := filepath.Join(dir, e.name)
		if e.typ == fs.ModeDir {
			if err := w.addTree(child, depth+1, mark); err != nil {
				return err
			}
		} else if inGit {
			if err := w.addFile(child, rel); err != nil {
				return err
			}
		}
	}
	return nil
}

// fileMask: what is done to a watched file through any of its names.
const fileMask = unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_DONT_FOLLOW

// addFile watches the file p of a git directory (rel is its directory's
// path inside the git directory), but for the many that cannot make git
// run anything: objects (but objects/info), refs and reflogs.
func (w *watcher) addFile(p, rel string) error {
	top, _, _ := strings.Cut(rel, "/")
	if (top == "objects" && !strings.HasPrefix(rel, "objects/info")) || top == "logs" || top == "refs" && !strings.HasPrefix(rel, "refs/replace") {
		return nil
	}
	wd, err := unix.InotifyAddWatch(w.fd, p, fileMask)
	if err != nil {
		if isNotExist(err) || errors.Is(err, unix.ELOOP) {
			return nil
		}
		return err
	}
	if _, dir := w.byWD[int32(wd)]; !dir {
		w.files[int32(wd)] = p
	}
	return nil
}

// watchedBelow reports whether a directory below dir is watched (by
// its old path, for a directory that just moved). The count may be high
// (a moved directory's old paths are not forgotten), never low.
func (w *watcher) watchedBelow(dir string) bool { return w.subdirs[dir] > 0 }

// read drains events as they come, so the queue does not overflow
// during a long build.
func (w *watcher) read() {
	defer close(w.done)
	if rc, err := w.file.SyscallConn(); err == nil {
		// Drains, then waits in the poller for more, until close: the
		// queue is read to empty each time, so an edge-triggered wake-up
		// is never missed. It returns only with an error.
		rc.Read(func(uintptr) bool {
			w.mu.Lock()
			w.drainLocked()
			w.mu.Unlock()
			return false
		})
	}
	// The file closed (the watcher's end), or a wait that failed (the
	// descriptor not in the poller): from then on nobody hears of
	// changes, so every check walks.
	w.mu.Lock()
	w.broken = true
	w.mu.Unlock()
}

// drainLocked reads every queued event. A read that fails (or a record
// the parser cannot trust) may have lost events: every check walks from
// then on.
func (w *watcher) drainLocked() {
	// Kept: zeroing 64 KiB for every drain, a few dozen times a
	// command, was a measurable part of a session's.
	if w.buf == nil {
		w.buf = make([]byte, 64<<10)
	}
	if err := inotify.Drain(w.fd, w.buf, func(ev inotify.Event) {
		// Its time is taken once it has been read, never before: a
		// check's window that began before the change must see it.
		w.event(ev.Wd, ev.Mask, ev.Name, time.Now().UnixNano())
	}); err != nil {
		w.broken = true
	}
}

func (w *watcher) event(wd int32, mask uint32, name string, now int64) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		w.broken = true
		return
	}
	dir, ok := w.byWD[wd]
	if !ok {
		if f, ok := w.files[wd]; ok {
			if mask&unix.IN_IGNORED != 0 {
				delete(w.files, wd)
				return
			}
			// Written, linked or chmodded through some name: its
			// directory is where the check must look. (Moved or
			// deleted, that directory hears of it too.)
			w.dirty[filepath.Dir(f)] = now
		}
		return
	}
	if mask&unix.IN_IGNORED != 0 {
		delete(w.byWD, wd)
		if w.byPath[dir] == wd {
			delete(w.byPath, dir)
			if w.subdirs[filepath.Dir(dir)]--; w.subdirs[filepath.Dir(dir)] <= 0 {
				delete(w.subdirs, filepath.Dir(dir))
			}
		}
		return
	}
	w.dirty[dir] = now
	if mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 && dir == w.root {
		w.broken = true
	}
	if name == "" {
		return
	}
	if mask&unix.IN_ISDIR == 0 {
		if rel, ok := w.gitRel[dir]; ok && mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 && w.addFile(filepath.Join(dir, name), rel) != nil {
			w.broken = true
		}
		return
	}
	child := filepath.Join(dir, name)
	switch {
	case mask&(unix.IN_MOVED_FROM|unix.IN_MOVED_TO) != 0:
		// A directory moved away with directories below it: their
		// watches' paths are stale now, so checks of windows open now
		// walk everything. One with none below (agentbox's own
		// placeholders, which each command of a session renames in and
		// out) leaves no stale path: it is gone from here, or found again
		// under its new name. Either way what arrives is watched again
		// and marked: the check must look there.
		if mask&unix.IN_MOVED_FROM != 0 && w.watchedBelow(child) {
			w.blind = now
		}
		if mask&unix.IN_MOVED_TO != 0 && w.addTree(child, 0, now) != nil {
			w.broken = true
		}
	case mask&unix.IN_CREATE != 0:
		// What was made in it before its watch is in its listing:
		// every directory of the new subtree is marked.
		if w.addTree(child, 0, now) != nil {
			w.broken = true
		}
	}
}

// dirtySince returns the directories that changed since t, after
// draining the queue; ok is false when the watcher cannot answer for the
// whole time since t.
func (w *watcher) dirtySince(t int64) (dirty map[string]bool, ok bool) {
	if w == nil {
		return nil, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drainLocked()
	if w.broken || w.ready > t || w.blind >= t {
		return nil, false
	}
	out := map[string]bool{}
	for d, at := range w.dirty {
		if at >= t {
			out[d] = true
		}
	}
	return out, true
}

// forget drops what the watcher recorded before t: no window that is
// still open began earlier.
func (w *watcher) forget(t int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for d, at := range w.dirty {
		if at < t {
			delete(w.dirty, d)
		}
	}
}

func (w *watcher) close() {
	if w.reading {
		// Ends the reader's wait; the descriptor is closed once its
		// last drain has returned.
		w.file.Close()
		<-w.done
		return
	}
	unix.Close(w.fd)
}

// watcherFor returns this process's watcher of root, if any; for a
// root that was missing when its holders asked, it starts one now if the
// root is there (this check still walks: the watcher is younger than the
// window).
func watcherFor(root string) *watcher {
	watchers.Lock()
	defer watchers.Unlock()
	if n := watchers.pending[root]; n > 0 && watchers.m[root] == nil {
		if w, err := newWatcher(root); err == nil {
			w.refs = n
			watchers.m[root] = w
			delete(watchers.pending, root)
		} else if !isNotExist(err) {
			delete(watchers.pending, root) // walks from now on
		}
	}
	return watchers.m[root]
}
