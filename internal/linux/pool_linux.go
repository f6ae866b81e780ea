package linux

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// A Pool keeps a session's placeholders out of sight between its
// commands, so that the next command's are renamed into place rather than
// made anew.
//
// A session's command must have its placeholders made on the host when
// it starts and gone when it ends (mounter_linux.go says why), and making
// and removing directories is what that costs: on ext4 an mkdir allocates
// an inode and a block, and the rmdir of a directory bound in the
// session's mount namespace unbinds it there (a synchronous RCU grace
// period per placeholder). Moved by rename to a holding directory of the
// pool (in agentbox's state directory, which no sandbox can write) and
// back, a placeholder keeps its inode, so its record only needs
// rewriting, and keeps the session's read-only bind on it (a mount in
// another namespace follows its directory through a rename), so that the
// session's next command has nothing to bind. The name is gone from the
// host as soon as the rename has moved it; what was moved is kept only if
// it is still empty.
//
// Only a placeholder on the filesystem of the state directory can be
// kept (a rename does not cross filesystems): others are made and removed
// each time. A placeholder joined by another run when its command ends is
// left to that run, as any other. A directory kept in the pool has mode
// 0755 for a caller other than root: moving a directory to another parent
// needs write permission on it (to update its ".."), and the bind keeps
// it read-only in the session anyway.
//
// The holding directory is locked for the pool's life; a sweep
// (SweepPlaceholders) removes what a pool whose owner died left there.
type Pool struct {
	mu     sync.Mutex
	dir    string
	fd     int    // the holding directory, flock'ed for the pool's life
	dev    uint64 // its filesystem
	next   int
	spares []spare
	// records are the record files of the paths the pool's placeholders
	// served, kept open: rewriting one is then a single write.
	records map[string]int
}

// spare is a placeholder in the holding directory, with the descriptor
// that names it (exclusively flock'ed: no run holds it).
type spare struct {
	f    *os.File
	name string
	file bool
	// parent is the directory (device and inode) it last had its name
	// in: a session binds a placeholder under the mount its directory
	// lies in, and a bind follows a rename only within that mount.
	parent [2]uint64
	// was is the name it last had there: back under the same name, its
	// record already says what it would be rewritten with.
	was string
}

// poolDirName is where a state directory's pools keep their placeholders.
const poolDirName = "placeholders-pool"

// maxSpares bounds what one pool keeps.
const maxSpares = 256

// NewPool makes a pool under stateDir; nil (no pooling: each placeholder
// is made and removed each time) when it cannot.
func NewPool(stateDir string) *Pool {
	if stateDir == "" {
		return nil
	}
	parent := filepath.Join(stateDir, poolDirName)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil
	}
	var id [8]byte
	rand.Read(id[:])
	dir := filepath.Join(parent, hex.EncodeToString(id[:]))
	if err := unix.Mkdir(dir, 0o700); err != nil {
		return nil
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Rmdir(dir)
		return nil
	}
	var st unix.Stat_t
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil || unix.Fstat(fd, &st) != nil {
		unix.Close(fd)
		unix.Rmdir(dir)
		return nil
	}
	return &Pool{dir: dir, fd: fd, dev: st.Dev}
}

// Close removes what the pool keeps, and the pool. Call it once the
// sessions that bound its placeholders have ended: then no unbinding is
// left to do.
func (pl *Pool) Close() {
	if pl == nil {
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, sp := range pl.spares {
		removeSpare(pl.fd, sp.name, sp.file)
		sp.f.Close()
	}
	pl.spares = nil
	for _, fd := range pl.records {
		unix.Close(fd)
	}
	pl.records = nil
	unix.Close(pl.fd)
	unix.Rmdir(pl.dir)
}

// removeSpare removes a pooled placeholder, only while empty.
func removeSpare(dir int, name string, file bool) {
	if !file {
		unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
		return
	}
	var st unix.Stat_t
	if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == 0 {
		unix.Unlinkat(dir, name, 0)
	}
}

// sameDev reports whether the directory pid (device and inode) is on
// the pool's filesystem.
func (pl *Pool) sameDev(pid [2]uint64) bool {
	return pid[0] == pl.dev && pid != [2]uint64{}
}

// take moves a kept placeholder of the kind asked for to name in parent
// (whose device and inode are pid) and returns its descriptor, share-locked; nil when there is none to
// move there (nothing kept, another filesystem, or the name is taken).
func (pl *Pool) take(parent int, pid [2]uint64, name string, file bool) *os.File {
	if pl == nil || !pl.sameDev(pid) {
		return nil
	}
	pl.mu.Lock()
	// One last named in this directory first: the session that bound it
	// there has it bound still (see spare.parent); and of those, the one
	// last at this very name, whose record needs no rewriting.
	i, rank := -1, 0
	for j := len(pl.spares) - 1; j >= 0; j-- {
		sp := pl.spares[j]
		if sp.file != file {
			continue
		}
		r := 1
		if sp.parent == pid {
			r = 2
			if sp.was == name {
				r = 3
			}
		}
		if r > rank {
			i, rank = j, r
			if r == 3 {
				break
			}
		}
	}
	if i < 0 {
		pl.mu.Unlock()
		return nil
	}
	sp := pl.spares[i]
	pl.spares = append(pl.spares[:i], pl.spares[i+1:]...)
	pl.mu.Unlock()
	// Shared before it can be seen: a run that finds it at its name
	// joins it as any other placeholder.
	unix.Flock(int(sp.f.Fd()), unix.LOCK_SH)
	if err := unix.Renameat2(pl.fd, sp.name, parent, name, unix.RENAME_NOREPLACE); err != nil {
		unix.Flock(int(sp.f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		pl.keep(sp)
		return nil
	}
	return sp.f
}

// putResult is what put did with a placeholder.
type putResult int

const (
	notPut   putResult = iota // left as it was: the caller may remove it
	pooled                    // moved into the pool: its name is gone
	usersNow                  // written into: left for the user
)

// put moves the placeholder f, at name in parent and exclusively locked
// by the caller (no run holds it), into the pool if it is empty. fromPool
// says it came from the pool (and so has the pool's mode).
func (pl *Pool) put(parent int, pid [2]uint64, name string, f *os.File, file, fromPool bool) putResult {
	if pl == nil || !pl.sameDev(pid) {
		return notPut
	}
	pl.mu.Lock()
	full := len(pl.spares) >= maxSpares
	pl.next++
	kept := "p" + strconv.Itoa(pl.next)
	pl.mu.Unlock()
	if full {
		return notPut
	}
	if !file && !fromPool && os.Geteuid() != 0 {
		var st unix.Stat_t
		if unix.Fstat(int(f.Fd()), &st) != nil {
			return notPut
		}
		if st.Mode&0o200 == 0 && unix.Fchmod(int(f.Fd()), placeholderMode|0o200) != nil {
			return notPut
		}
	}
	if err := unix.Renameat2(parent, name, pl.fd, kept, unix.RENAME_NOREPLACE); err != nil {
		return notPut
	}
	if !isEmpty(f, file) {
		// Written into (by the user's own processes: sandboxes have it
		// read-only), so theirs: back where it was; if that name was
		// taken since, it stays in the holding directory, which a sweep
		// keeps while not empty. Checked once it is out of sight, so
		// that nothing written after the check can be moved.
		unix.Renameat2(pl.fd, kept, parent, name, unix.RENAME_NOREPLACE)
		return usersNow
	}
	pl.keep(spare{f: f, name: kept, file: file, parent: pid, was: name})
	return pooled
}

// writeRecord writes b, the record of path, through the record file the
// pool keeps open for it; false when the caller must write it itself (no
// pool). A record file a sweep removed meanwhile is made again.
func (pl *Pool) writeRecord(dir, path string, b []byte) bool {
	if pl == nil {
		return false
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	fd, ok := pl.records[path]
	if ok {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || st.Nlink == 0 {
			unix.Close(fd)
			ok = false
		}
	}
	if !ok {
		if fd = openRecord(dir, path, len(b)); fd < 0 {
			delete(pl.records, path)
			return true // as the caller would have failed
		}
		if pl.records == nil {
			pl.records = map[string]int{}
		}
		pl.records[path] = fd
	}
	// Most often the record already says this (the same placeholder
	// back at the same path): reading it costs less than a write, which
	// dirties the file.
	buf := make([]byte, len(b)+1)
	if n, err := unix.Pread(fd, buf, 0); err == nil && n == len(b) && string(buf[:n]) == string(b) {
		return true
	}
	writeRecord(fd, b)
	return true
}

func (pl *Pool) keep(sp spare) {
	pl.mu.Lock()
	pl.spares = append(pl.spares, sp)
	pl.mu.Unlock()
}

// sweepPools removes what the pools of dead owners left under stateDir:
// empty placeholders only, then each pool's directory if empty.
func sweepPools(stateDir string) {
	parent := filepath.Join(stateDir, poolDirName)
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		dir := filepath.Join(parent, e.Name())
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil {
			f := os.NewFile(uintptr(fd), dir)
			names, _ := f.Readdirnames(-1)
			for _, n := range names {
				var st unix.Stat_t
				if unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
					removeSpare(fd, n, st.Mode&unix.S_IFMT != unix.S_IFDIR)
				}
			}
			unix.Rmdir(dir)
			f.Close()
			continue
		}
		unix.Close(fd)
	}
}
