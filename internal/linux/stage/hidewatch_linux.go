package stage

import (
	"slices"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/internal/fsreport"
	"github.com/agentbox/agentbox/internal/linux/inotify"
	"github.com/agentbox/agentbox/internal/linux/spec"

	"golang.org/x/sys/unix"
)

// hiddenReads counts the opens of the masks over hidden paths, for the
// report's read entries (op "read", reason "hidden"). Each mask made
// when the sandbox is built is an inode of its own (applyHide), so an
// inotify watch on it names the hidden path an open reached. An open
// is not a read, but an open of an empty read-only file or directory
// has nothing else to do; a stat, an O_PATH open or a lookup of a name
// inside a hidden directory (which finds nothing) opens nothing and is
// not seen. The kernel queues the events as the opens happen, and we
// read them only when a command ends: the command's reads of other files
// cost nothing (the watches are on the masks' file system alone).
type hiddenReads struct {
	fd int
	mu sync.Mutex
	// paths is each watch's hidden path; "" when two paths share the
	// inode (a session's late masks, bound from one template), which
	// says nothing of which was read.
	paths map[int32]string
	// opens counts each watch's opens since the watches were made (an
	// overflowing queue, beyond 16384 events by default, loses some).
	opens map[int32]int
}

// watchHiddenFor watches spec's masks when its report is on: a lone
// run's, or a session's, which may mask more later (ensureHidden).
func watchHiddenFor(sp *spec.Spec) *hiddenReads {
	// Degraded mode masks nothing: its hidden paths are the host's
	// files, which the host's own programs open.
	if sp.Walls.Files == nil || sp.Degraded.On || !sp.Session.On {
		// A lone run is not watched: the kernel's teardown of an
		// inotify instance, when the init exits, cost a lone run 10 to
		// 15 ms (`true`: 24 -> 38 ms), and a session's zygote, which
		// lives on, pays it once.
		return nil
	}
	return watchHidden(sp.FS.Hides)
}

// watchHidden watches the masks at paths that are masks (on the file
// system of the mask sources, a file or directory of its own); it
// returns nil when inotify is not to be had (a per-user limit on
// instances), since the report is all that is lost.
func watchHidden(hides []spec.Hide) *hiddenReads {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	w := &hiddenReads{fd: fd, paths: map[int32]string{}, opens: map[int32]int{}}
	w.add(hides, nil)
	return w
}

// add watches each of hides not bound from shared (the template a
// session's late masks are cloned from; nil for none).
func (w *hiddenReads) add(hides []spec.Hide, shared *unix.Stat_t) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range hides {
		var st unix.Stat_t
		if unix.Lstat(h.Path, &st) != nil {
			continue // nothing there: nothing to read
		}
		if shared != nil && st.Dev == shared.Dev && st.Ino == shared.Ino {
			continue
		}
		// A mask is a mount; anything else at the path is not ours to
		// watch (an open of it is no read of a secret by the command).
		if !isMountRoot(h.Path, st.Dev) {
			continue
		}
		// The closes too, though not counted: the kernel merges an
		// event into the last one queued when they are alike, and a
		// close between two opens keeps them apart.
		wd, err := unix.InotifyAddWatch(w.fd, h.Path, unix.IN_OPEN|unix.IN_CLOSE_NOWRITE|unix.IN_DONT_FOLLOW)
		if err != nil {
			continue
		}
		if p, ok := w.paths[int32(wd)]; ok && p != h.Path {
			w.paths[int32(wd)] = ""
			continue
		}
		w.paths[int32(wd)] = h.Path
	}
}

// drain reads the queued events into w.opens. w.mu is held. An error
// loses counts, and the report (all that they are for) with them.
func (w *hiddenReads) drain() {
	var buf [4096]byte
	inotify.Drain(w.fd, buf[:], func(ev inotify.Event) {
		if ev.Mask&unix.IN_OPEN != 0 {
			w.opens[ev.Wd]++
		}
	})
}

// counts returns the opens so far, to compare with when a command ends.
func (w *hiddenReads) counts() map[int32]int {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drain()
	c := make(map[int32]int, len(w.opens))
	for wd, n := range w.opens {
		c[wd] = n
	}
	return c
}

// record adds to rec a read of each hidden path opened since before
// (counts' answer when the command started; nil for since the watches
// were made). With commands running at once in a session, an open
// during both is counted for both: the masks are the session's, not a
// command's.
func (w *hiddenReads) record(rec *fsreport.Recorder, before map[int32]int) {
	if w == nil || rec == nil {
		return
	}
	w.mu.Lock()
	w.drain()
	type read struct {
		path string
		n    int
	}
	var reads []read
	for wd, n := range w.opens {
		if p := w.paths[wd]; p != "" && n > before[wd] {
			reads = append(reads, read{p, n - before[wd]})
		}
	}
	w.mu.Unlock()
	slices.SortFunc(reads, func(a, b read) int { return strings.Compare(a.path, b.path) })
	for _, r := range reads {
		rec.AddCount(fsreport.OpRead, r.path, fsreport.ReasonHidden, r.n)
	}
}
