package linux

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/fspath"
	"golang.org/x/sys/unix"
)

// Placeholders make missing protected names (.git, .codex, .claude and
// the rest of the list, in a root that has none) uncreatable. A mount needs an existing mount point,
// so an empty directory is created on the host for the run and bound
// read-only over itself inside the sandbox, where it can be neither
// written, removed nor renamed. A path git reads as a file (a missing
// ~/.gitconfig or include.path target) gets an empty read-only file
// instead: git reads that as an empty config, where a directory would be
// a warning on every command or, for an include, a fatal error.
//
// On the host, though, the placeholder sits in a directory that another
// sandbox may be able to write (a workspace under /tmp, or under another
// run's --add-dir): that command can rename, exchange or replace the name
// at any moment. So nothing here goes by path once the parent is open.
// The parent is opened without following symlinks and every later step is
// relative to that descriptor: mkdirat, an openat that refuses symlinks
// and non-directories, fchmod on the descriptor, and rmdir (unlinkat with
// AT_REMOVEDIR, which removes only an empty directory and never follows a
// link) after checking that the name still holds the inode we hold open.
// Whatever a racing command swaps in is then at worst a directory from its
// own writable roots, which it could have changed or removed itself.
//
// Runs that share a placeholder hold a shared flock on it; the last one
// out removes it. Whether a directory is a placeholder is known only from
// a record in agentbox's state directory (a protected carve-out, so no
// sandboxed command can write it) naming the path and the device, inode
// and birth time of the directory agentbox made: nothing on the directory
// itself, which a command could forge on a directory of the user's. A run
// killed before its cleanup leaves a record, and the next run or
// `agentbox cleanup` removes the placeholder.
type Placeholders struct {
	dir  string // record directory, "" when none could be used
	held []heldPlaceholder
	pool *Pool // where this run's placeholders are kept after it; nil: removed
	// While AcquirePlaceholders runs: how to let go of the records lock
	// it holds for the whole batch, and the parents opened so far (with
	// their device and inode).
	unlock    func()
	parents   map[string]int
	parentIDs map[string][2]uint64
	// The identity adopt last recorded.
	recordedID identity
	recordedOK bool
}

type heldPlaceholder struct {
	path   string
	parent int      // O_PATH descriptor of the directory holding it
	f      *os.File // the directory (or file) itself, share-locked
	file   bool     // an empty file, not a directory
	// ours: made by agentbox (now, or by an earlier run with this state
	// directory), so the last run out removes it; a real directory of the
	// user's is only held.
	ours bool
	// spare: taken from the run's pool (and so already as the pool
	// keeps it).
	spare bool
	// parentID is the device and inode of parent; id the identity of f
	// as recorded (idOK false when none was read).
	parentID [2]uint64
	id       identity
	idOK     bool
}

// lockWait bounds how long a run waits for a placeholder that another run
// is removing (or that a hostile process holds locked).
const lockWait = 5 * time.Second

// modeWait bounds how long a run waits for a directory it cannot open:
// another user's run that just made it, under a umask stricter than 022,
// has yet to give it its final mode.
const modeWait = 500 * time.Millisecond

// placeholderMode lets every user's run open (and so lock) a placeholder
// another user made, and nobody write it; placeholderFileMode is the same
// for a file.
const (
	placeholderMode     = 0o555
	placeholderFileMode = 0o444
)

// AcquirePlaceholders holds each directory: it creates (or joins) a
// placeholder for each missing one, and holds each existing one.
func AcquirePlaceholders(dirs []HeldDir, stateDir string) (*Placeholders, error) {
	return AcquirePooled(dirs, stateDir, nil)
}

// AcquirePooled is AcquirePlaceholders taking placeholders from pool, and
// putting them back there on Release, where it can (see Pool).
func AcquirePooled(dirs []HeldDir, stateDir string, pool *Pool) (*Placeholders, error) {
	p := &Placeholders{unlock: func() {}, pool: pool}
	if len(dirs) == 0 {
		return p, nil
	}
	if stateDir != "" {
		d := filepath.Join(stateDir, "placeholders")
		if err := os.MkdirAll(d, 0o700); err == nil {
			p.dir = d
		}
	}
	// One lock for the batch (acquireAt lets go of it while it waits
	// for another run), and each parent opened once.
	unlock, err := p.lockRecords(time.Now().Add(lockWait))
	if err != nil {
		return nil, err
	}
	p.unlock, p.parents, p.parentIDs = unlock, map[string]int{}, map[string][2]uint64{}
	defer func() {
		for _, fd := range p.parents {
			unix.Close(fd)
		}
		p.parents, p.parentIDs = nil, nil
		p.unlock()
		p.unlock = func() {}
	}()
	for _, d := range dirs {
		// An existing directory goes the same way as a missing one: the
		// policy may have found it inside another run's placeholder (root
		// may create below a 0555 directory), which can be gone by now,
		// and then an ancestor is what is missing.
		h, held, err := p.acquireMissing(d)
		if err != nil {
			p.release(true)
			return nil, err
		}
		if held {
			p.held = append(p.held, h)
		}
	}
	return p, nil
}

// PlaceholderError is a missing protected path that agentbox can neither
// keep free with a placeholder nor prove the command unable to create.
type PlaceholderError struct {
	Path string // the protected path
	Dir  string // the directory it would be made in
	Err  error
	// Fix says what the user can do, in words.
	Fix string
}

func (e *PlaceholderError) Error() string {
	msg := fmt.Sprintf("creating placeholder for protected path %s: %v", e.Path, e.Err)
	if e.Fix != "" {
		msg += "; " + e.Fix
	}
	return msg
}

func (e *PlaceholderError) Unwrap() error { return e.Err }

// uncreatable reports whether the command can create no name in dir,
// where agentbox was refused creating one: then the protected name there
// needs no placeholder. The command runs as the caller's uid and groups
// with no capabilities, so what the caller may not write it may not
// either (faccessat with AT_EACCESS applies the mode, ACLs and groups as
// the kernel would for it), unless it owns dir: the owner may chmod it
// writable and then create the name, so a placeholder is needed and the
// error says how to get one. A read-only filesystem is read-only in the
// sandbox too. dir is opened without following symlinks, as the
// placeholder's parent is.
func uncreatable(path, dir string, refused error) (bool, error) {
	fd, err := openParent(dir)
	if err != nil {
		return false, &PlaceholderError{Path: path, Dir: dir, Err: err}
	}
	defer unix.Close(fd)
	aerr := unix.Faccessat2(fd, "", unix.W_OK, unix.AT_EACCESS|unix.AT_EMPTY_PATH)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, &PlaceholderError{Path: path, Dir: dir, Err: &os.PathError{Op: "fstat", Path: dir, Err: err}}
	}
	switch {
	case aerr == nil:
		// Writable now: its mode changed since our attempt.
		return false, &PlaceholderError{Path: path, Dir: dir, Err: refused, Fix: "the directory's permissions changed while starting; run again"}
	case errors.Is(aerr, unix.EROFS):
		return true, nil
	case int(st.Uid) == os.Geteuid():
		return false, &PlaceholderError{Path: path, Dir: dir, Err: refused,
			Fix: fmt.Sprintf("%s is yours but not writable, so a sandboxed command could make it writable (chmod) and create %s; make it writable (chmod u+w %s), or run read-only (Options.Mode read-only)", dir, filepath.Base(path), dir)}
	case errors.Is(aerr, unix.EACCES), errors.Is(aerr, unix.EPERM):
		return true, nil
	}
	return false, &PlaceholderError{Path: path, Dir: dir, Err: refused}
}

// Paths lists the directories held, for [Plan]: a missing protected path
// is held at its own path or at an ancestor (see acquireMissing).
func (p *Placeholders) Paths() []string {
	var out []string
	for _, h := range p.held {
		out = append(out, h.path)
	}
	return out
}

// HeldPath is a path a run holds, with its descriptor of what is there.
type HeldPath struct {
	Path string
	File *os.File
	// Parent is the device and inode of the directory holding it, where
	// known; Dir says File is a directory, and ID is its identity where
	// IDOK.
	Parent [2]uint64
	Dir    bool
	ID     identity
	IDOK   bool
}

// Held lists what is held, as Paths does, with descriptors, for a
// session's command ([Session.Start]). They stay valid until Release.
func (p *Placeholders) Held() []HeldPath {
	if p == nil {
		return nil
	}
	var out []HeldPath
	for _, h := range p.held {
		out = append(out, HeldPath{Path: h.path, File: h.f, Parent: h.parentID, Dir: !h.file, ID: h.id, IDOK: h.idOK})
	}
	return out
}

// dirID is the device and inode of the directory fd; zero when unknown.
func dirID(fd int) [2]uint64 {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return [2]uint64{}
	}
	return [2]uint64{st.Dev, st.Ino}
}

// acquireMissing makes a placeholder for d.Path, which the policy found
// missing (or holds it where it exists). Another run may have changed the
// way there since: a placeholder
// it made for an ancestor (when the policy was resolved, say ~/.config
// stood empty as that run's placeholder for it, so only
// ~/.config/agentbox was missing here) may be gone, or may still stand
// with no write permission. Then the ancestor is what protects d.Path: a
// placeholder where it is gone, or where it stands empty it is held and
// bound read-only, so that nothing can be created below it.
//
// It reports false, with no error, when no placeholder is needed: the
// command can create no name where d.Path would be (see uncreatable).
func (p *Placeholders) acquireMissing(d HeldDir) (heldPlaceholder, bool, error) {
	path, file := d.Path, d.File
	for ; ; file = false { // an ancestor is always a directory
		h, err := p.acquire(path, file)
		if err == nil {
			return h, true, nil
		}
		parent := filepath.Dir(path)
		var pe *os.PathError
		if !errors.As(err, &pe) || pe.Op != "mkdirat" && pe.Op != "create" && pe.Op != "openat2" {
			return h, false, err
		}
		refused := pe.Op != "openat2" && (errors.Is(pe.Err, unix.EACCES) || errors.Is(pe.Err, unix.EPERM) || errors.Is(pe.Err, unix.EROFS))
		inRoot := parent != d.Root && fspath.Within(parent, d.Root)
		switch {
		case errors.Is(pe.Err, unix.ENOENT) && inRoot:
			path = parent // gone: what the policy would find missing now
		case refused:
			if inRoot && errors.Is(pe.Err, unix.EACCES) {
				// Another run's placeholder for an ancestor, empty and
				// read-only: held, it keeps everything below free.
				if hh, ok := p.holdEmpty(parent); ok {
					return hh, true, nil
				}
			}
			if ok, uerr := uncreatable(path, parent, pe.Err); !ok {
				return h, false, uerr
			}
			return h, false, nil
		default:
			return h, false, err
		}
	}
}

// holdEmpty holds the existing directory path if it is empty.
func (p *Placeholders) holdEmpty(path string) (heldPlaceholder, bool) {
	h, err := p.acquire(path, false)
	if err != nil {
		return heldPlaceholder{}, false
	}
	if !isEmpty(h.f, false) {
		unix.Close(h.parent)
		h.f.Close()
		return heldPlaceholder{}, false
	}
	return h, true
}

// openParent opens dir for use as the base of *at calls, with no symlink
// anywhere on the way: the policy resolved the path already, so a symlink
// now means the tree was changed under us (by a concurrent sandbox, say)
// and the host must not be made to act where the link points.
func openParent(dir string) (int, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return -1, &os.PathError{Op: "openat2", Path: dir, Err: err}
	}
	return fd, nil
}

// openDir opens the directory name in parent, refusing a symlink or
// anything else that is not a directory.
func openDir(parent int, name string) (int, error) {
	return unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

func (p *Placeholders) acquire(path string, file bool) (heldPlaceholder, error) {
	dir, name := filepath.Split(path)
	parent, err := p.openParent(dir)
	if err != nil {
		return heldPlaceholder{}, fmt.Errorf("creating placeholder for protected path %s: %w", path, err)
	}
	pid, ok := p.parentIDs[dir]
	if !ok {
		pid = dirID(parent)
		if p.parentIDs != nil {
			p.parentIDs[dir] = pid
		}
	}
	h, err := p.acquireAt(parent, pid, path, name, file)
	if err != nil {
		unix.Close(parent)
	}
	return h, err
}

// openParent is the package's openParent, once for each directory of a
// batch: each placeholder gets its own duplicate of the descriptor.
func (p *Placeholders) openParent(dir string) (int, error) {
	fd, ok := p.parents[dir]
	if !ok {
		var err error
		if fd, err = openParent(dir); err != nil {
			return -1, err
		}
		if p.parents != nil {
			p.parents[dir] = fd
		} else {
			return fd, nil
		}
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "dup", Path: dir, Err: err}
	}
	return dup, nil
}

// acquireAt holds name in parent, with the records locked (by
// AcquirePlaceholders); while it waits for another run, the lock is let go.
func (p *Placeholders) acquireAt(parent int, pid [2]uint64, path, name string, file bool) (heldPlaceholder, error) {
	start := time.Now()
	for {
		h, wait, err := p.tryAcquire(parent, pid, path, name, file, time.Since(start))
		if err != nil || h.f != nil {
			return h, err
		}
		p.unlock()
		time.Sleep(wait)
		unlock, err := p.lockRecords(start.Add(lockWait))
		if err != nil {
			p.unlock = func() {}
			return heldPlaceholder{}, err
		}
		p.unlock = unlock
	}
}

// tryAcquire makes one attempt, with the records locked: a held directory,
// an error, or neither when the caller should try again after wait.
func (p *Placeholders) tryAcquire(parent int, pid [2]uint64, path, name string, file bool, waited time.Duration) (heldPlaceholder, time.Duration, error) {
	created := false
	made := time.Now()
	mk, op, open := mkdirPlaceholder, "mkdirat", openDir
	if file {
		mk, op, open = createPlaceholder, "create", openFile
	}
	var st unix.Stat_t
	if p.pool == nil || unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		// There already (another run's placeholder, the user's own):
		// joined below.
	} else if f := p.pool.take(parent, pid, name, file); f != nil {
		// Moved into place from the pool by a rename that replaced
		// nothing: the inode agentbox made for an earlier command, empty
		// when it went there (nothing but the user's own processes can
		// reach the pool).
		id, ok := p.record(path, f)
		return heldPlaceholder{path: path, parent: parent, f: f, file: file, ours: true, spare: true, parentID: pid, id: id, idOK: ok}, 0, nil
	}
	switch err := mk(parent, name); {
	case err == nil:
		created = true
	case errors.Is(err, unix.EEXIST):
	default:
		return heldPlaceholder{}, 0, fmt.Errorf("creating placeholder for protected path %s: %w", path, &os.PathError{Op: op, Path: path, Err: err})
	}
	fd, err := open(parent, name)
	switch {
	case err == nil:
	case errors.Is(err, unix.ENOENT) && waited < lockWait:
		// Removed between our mkdir and our open by a run that held it
		// last (it had opened it before we could lock it): the ordinary
		// hand-over, so make it again.
		return heldPlaceholder{}, 0, nil
	case errors.Is(err, unix.EACCES) && !created && waited < modeWait:
		return heldPlaceholder{}, time.Millisecond, nil
	default:
		if created && !file {
			// Not opened, so not known to be what we made. AT_REMOVEDIR
			// removes nothing but an empty directory and follows no
			// link; whatever is at the name came from a root the racing
			// command can write. (A file is left: unlinking whatever is
			// at the name now could remove someone's file; a later run
			// sees it as the user's.)
			unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
		}
		perr := &os.PathError{Op: "open", Path: path, Err: err}
		if errors.Is(err, unix.EACCES) {
			return heldPlaceholder{}, 0, fmt.Errorf("protected path %s exists and cannot be opened (another user's directory?): %w; remove it, or on a shared machine set exclude_slash_tmp and use a private $TMPDIR", path, perr)
		}
		what := "a directory"
		if file {
			what = "a regular file"
		}
		return heldPlaceholder{}, 0, fmt.Errorf("protected path %s appeared as something other than %s while starting; run again: %w", path, what, perr)
	}
	f := os.NewFile(uintptr(fd), path)
	if created && !p.adopt(f, path, made, file) {
		// A command able to write the parent exchanged our directory for
		// another between the mkdirat and the open: touch neither.
		f.Close()
		return heldPlaceholder{}, 0, fmt.Errorf("protected path %s was replaced while starting (by a command that can write %s?); run again", path, filepath.Dir(path))
	}
	if err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB); err != nil {
		f.Close()
		if waited > lockWait {
			return heldPlaceholder{}, 0, fmt.Errorf("placeholder %s stays locked by another process: %w", path, err)
		}
		return heldPlaceholder{}, 10 * time.Millisecond, nil
	}
	// The run that held it may have removed it between our open and our
	// lock; only the directory still at the name protects anything.
	if !sameEntry(parent, name, f) {
		f.Close()
		return heldPlaceholder{}, 0, nil
	}
	h := heldPlaceholder{path: path, parent: parent, f: f, file: file, parentID: pid}
	if created {
		h.ours, h.id, h.idOK = true, p.recordedID, p.recordedOK
	} else {
		h.ours = p.recorded(path, f)
		h.id, h.idOK = identityOf(f)
	}
	return h, 0, nil
}

// lockRecords serialises, among the runs that share this state directory,
// each step that makes or removes a placeholder together with its record,
// and each sweep: a sweep must never take a placeholder just made but not
// yet recorded for a stale record's leftover, nor a run judge a record
// another run is rewriting. The wait is bounded: a command can open the
// state directory (it is read-only, not hidden) and hold the lock.
func (p *Placeholders) lockRecords(deadline time.Time) (unlock func(), err error) {
	if p.dir == "" {
		return func() {}, nil
	}
	fd, err := unix.Open(p.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("locking placeholder records: %w", &os.PathError{Op: "open", Path: p.dir, Err: err})
	}
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { unix.Close(fd) }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			unix.Close(fd)
			return nil, fmt.Errorf("locking placeholder records %s (held by another process?): %w", p.dir, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// adopt finishes a directory our mkdirat just made: its final mode (the
// umask may have taken bits other users' runs need to open it) and a
// record. It reports false, changing nothing, unless f looks like what we
// made: ours, empty, no mode bits beyond those we asked for, and (where the
// filesystem keeps birth times) born no earlier than our mkdirat. What a
// racing command swaps in between the mkdirat and the open is then at
// worst an empty directory it made itself just now, never an older one
// (root's, say) whose mode the chmod would change.
func (p *Placeholders) adopt(f *os.File, path string, made time.Time, file bool) bool {
	mode := uint32(placeholderMode)
	if file {
		mode = placeholderFileMode
	}
	var st unix.Statx_t
	if unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_MODE|unix.STATX_UID|unix.STATX_BTIME|unix.STATX_SIZE, &st) != nil {
		return false
	}
	if int(st.Uid) != os.Geteuid() || uint32(st.Mode)&0o7777&^mode != 0 {
		return false
	}
	// Inode times come from a coarse clock that may lag by a tick.
	if st.Mask&unix.STATX_BTIME != 0 && time.Unix(st.Btime.Sec, int64(st.Btime.Nsec)).Before(made.Add(-time.Second)) {
		return false
	}
	if !isEmpty(f, file) {
		return false
	}
	if uint32(st.Mode)&0o7777 != mode {
		if unix.Fchmod(int(f.Fd()), mode) != nil {
			return false
		}
	}
	p.recordedID, p.recordedOK = p.record(path, f)
	return true
}

// mkdirPlaceholder and createPlaceholder make a placeholder at name in
// parent, failing with EEXIST when something is there already.
func mkdirPlaceholder(parent int, name string) error {
	return unix.Mkdirat(parent, name, placeholderMode)
}

func createPlaceholder(parent int, name string) error {
	fd, err := unix.Openat(parent, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, placeholderFileMode)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// openFile opens the regular file name in parent for reading and locking,
// refusing a symlink or anything else. The type is checked on an O_PATH
// descriptor first: opening a FIFO or a device a racing command put at
// the name could block or act on the device.
func openFile(parent int, name string) (int, error) {
	pfd, err := unix.Openat(parent, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return -1, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return -1, unix.EEXIST
	}
	// Reopened through the O_PATH descriptor, so it is the same inode.
	return unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
}

// isEmpty reports whether the placeholder f holds nothing: no entries for
// a directory, no bytes for a file.
func isEmpty(f *os.File, file bool) bool {
	if file {
		var st unix.Stat_t
		return unix.Fstat(int(f.Fd()), &st) == nil && st.Size == 0
	}
	return dirEmpty(int(f.Fd()))
}

// dirEmpty reads the directory fd from its start (so that it can be asked
// again of the same descriptor, which a Readdirnames at its end would
// not) and reports whether it holds nothing but "." and "..".
func dirEmpty(fd int) bool {
	if _, err := unix.Seek(fd, 0, io.SeekStart); err != nil {
		return false
	}
	var buf [512]byte
	for {
		n, err := unix.Getdents(fd, buf[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false
		}
		if n == 0 {
			return true
		}
		var names []string
		if _, _, names = unix.ParseDirent(buf[:n], -1, names); len(names) > 0 {
			return false // ParseDirent leaves out "." and ".."
		}
	}
}

func sameEntry(parent int, name string, f *os.File) bool {
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Fstatat(parent, name, &b, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// identity names one directory, not just a path: a record stays valid only
// while the same inode, born when agentbox made it, is there. A removed
// placeholder whose inode number is reused is no longer agentbox's to
// remove. The birth time (statx btime) is used where the filesystem keeps
// one, the ctime elsewhere (then a chmod of the directory also makes it
// the user's).
type identity struct {
	dev, ino uint64
	sec      int64
	nsec     int64
}

func identityOf(f *os.File) (identity, bool) {
	var st unix.Statx_t
	if unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_INO|unix.STATX_BTIME|unix.STATX_CTIME, &st) != nil {
		return identity{}, false
	}
	t := st.Ctime
	if st.Mask&unix.STATX_BTIME != 0 {
		t = st.Btime
	}
	return identity{unix.Mkdev(st.Dev_major, st.Dev_minor), st.Ino, t.Sec, int64(t.Nsec)}, true
}

// encodeRecord is the record's file content: the identity on the first
// line, the path (any bytes) after it. The numbers have a fixed width, so
// that the next record of the same path (the same file) is as long and
// overwrites this one in place (see record).
func encodeRecord(path string, id identity) []byte {
	return fmt.Appendf(nil, "%020d %020d %020d %010d\n%s", id.dev, id.ino, id.sec, id.nsec, path)
}

func decodeRecord(b []byte) (string, identity, bool) {
	head, path, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return "", identity{}, false
	}
	fields := strings.Fields(string(head))
	if len(fields) != 4 {
		return "", identity{}, false
	}
	var n [4]int64
	for i, s := range fields {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return "", identity{}, false
		}
		n[i] = v
	}
	return string(path), identity{uint64(n[0]), uint64(n[1]), n[2], n[3]}, true
}

func recordName(path string) string {
	sum := sha256.Sum256([]byte(path))
	return hex.EncodeToString(sum[:16])
}

// record writes the record of the placeholder f at path. A released
// placeholder's record stays (a later sweep drops it once nothing of that
// identity is at the path), so the next one for the same path, a
// session's next command's, rewrites that file in place rather than
// creating and removing one each time.
// It returns f's identity, as recorded.
func (p *Placeholders) record(path string, f *os.File) (identity, bool) {
	id, ok := identityOf(f)
	if p.dir == "" || !ok {
		return id, ok
	}
	b := encodeRecord(path, id)
	if p.pool.writeRecord(p.dir, path, b) {
		return id, ok
	}
	if fd := openRecord(p.dir, path, len(b)); fd >= 0 {
		writeRecord(fd, b)
		unix.Close(fd)
	}
	return id, ok
}

// openRecord opens (or makes) the record file of path, cut to n bytes if
// it is longer (an older, longer format); -1 when it cannot. It is open
// for reading too: a pool compares the record before rewriting it (see
// Pool.writeRecord).
func openRecord(dir, path string, n int) int {
	fd, err := unix.Open(filepath.Join(dir, recordName(path)), unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return -1
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil && st.Size > int64(n) {
		unix.Ftruncate(fd, int64(n))
	}
	return fd
}

// writeRecord writes b over the record file fd.
func writeRecord(fd int, b []byte) bool {
	if n, err := unix.Pwrite(fd, b, 0); err != nil || n != len(b) {
		unix.Ftruncate(fd, 0) // no record rather than a torn one
		return false
	}
	return true
}

// recorded reports whether the state directory says agentbox made the
// directory f has open at path.
func (p *Placeholders) recorded(path string, f *os.File) bool {
	if p.dir == "" {
		return false
	}
	b, err := os.ReadFile(filepath.Join(p.dir, recordName(path)))
	if err != nil {
		return false
	}
	rpath, rid, ok := decodeRecord(b)
	id, ok2 := identityOf(f)
	return ok && ok2 && rpath == path && rid == id
}

// Release drops this run's hold and removes every placeholder no other
// run still uses.
func (p *Placeholders) Release() {
	if p == nil {
		return
	}
	p.release(false)
}

// release is Release, with the records lock already held or not.
//
// A removed placeholder's descriptor is closed in the background: with it
// still open the rmdir only unlinks the name, and the inode's end (on
// ext4, freeing its block, which can take longer than the whole
// command) comes at the last close, which nothing has to wait for.
func (p *Placeholders) release(locked bool) {
	unlock, err := func() {}, error(nil)
	if !locked {
		unlock, err = p.lockRecords(time.Now().Add(lockWait))
	}
	var removed []*os.File
	for _, h := range p.held {
		if err == nil {
			switch p.removeIfUnused(h, false) {
			case removedIt:
				removed = append(removed, h.f)
				continue
			case pooledIt:
				continue // the pool holds it
			}
		}
		// Left for a later sweep, or not ours to remove.
		h.f.Close()
	}
	if err == nil {
		unlock()
	}
	p.held = nil
	if len(removed) > 0 {
		go func() {
			for _, f := range removed {
				f.Close()
			}
		}()
	}
}

// removal is what removeIfUnused did.
type removal int

const (
	keptIt    removal = iota // still there: in use, not ours, or not empty
	removedIt                // removed (the caller closes its descriptor)
	pooledIt                 // moved into the pool, which now holds it
)

// removeIfUnused removes h's directory when it is ours and can be locked
// exclusively (no other run holds it), or moves it into the run's pool.
// Only an empty directory, still at its name, is removed. The caller
// holds the records lock, and closes h.f unless it was pooled; h.parent
// is closed here. With drop, the record goes too once nothing it
// describes is left at the path (a sweep drops it; a run's release keeps
// the file for the path's next record, see record).
func (p *Placeholders) removeIfUnused(h heldPlaceholder, drop bool) removal {
	defer unix.Close(h.parent)
	if !h.ours {
		return keptIt // a real directory of the user's, never ours to remove
	}
	if unix.Flock(int(h.f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return keptIt // still in use; the last run out removes it
	}
	name := filepath.Base(h.path)
	ok := sameEntry(h.parent, name, h.f)
	// Judged before the rmdir, which changes the ctime (the stand-in for
	// a birth time on filesystems without one).
	recorded := drop && p.recorded(h.path, h.f)
	// rmdir refuses a directory that is not empty: something the user
	// put there since is theirs, and stays. A file is removed only while
	// empty, for the same reason.
	if ok {
		switch p.pool.put(h.parent, h.parentID, name, h.f, h.file, h.spare) {
		case pooled:
			return pooledIt
		case usersNow:
			if h.file {
				p.drop(h.path) // the user's file now, record and all
			}
			return keptIt
		}
		flags := unix.AT_REMOVEDIR
		if h.file {
			flags = 0
		}
		if h.file && !isEmpty(h.f, true) {
			// Written since: the user's file now, record and all.
			p.drop(h.path)
			return keptIt
		}
		if err := unix.Unlinkat(h.parent, name, flags); err != nil {
			// Not empty (a root run may have made its own placeholder
			// inside) or otherwise busy: the record stays, and a later
			// sweep removes it once it is empty again.
			return keptIt
		}
	}
	// Removed now, or no longer at its name (moved or removed by someone
	// else): either way the record has nothing left to describe.
	if recorded {
		p.drop(h.path)
	}
	if !ok {
		return keptIt
	}
	return removedIt
}

// drop removes the record of path.
func (p *Placeholders) drop(path string) {
	os.Remove(filepath.Join(p.dir, recordName(path)))
}

// SweepPlaceholders removes placeholders left by runs that were killed
// before they could clean up. It returns the paths it removed.
func SweepPlaceholders(stateDir string) []string {
	sweepPools(stateDir)
	p := &Placeholders{dir: filepath.Join(stateDir, "placeholders")}
	unlock, err := p.lockRecords(time.Now().Add(lockWait))
	if err != nil {
		return nil
	}
	defer unlock()
	ents, err := os.ReadDir(p.dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range ents {
		rec := filepath.Join(p.dir, e.Name())
		b, err := os.ReadFile(rec)
		if err != nil {
			continue
		}
		path, _, ok := decodeRecord(b)
		if !ok || recordName(path) != e.Name() || !filepath.IsAbs(path) {
			os.Remove(rec) // not written by us
			continue
		}
		h, err := p.reopen(path)
		if err != nil {
			os.Remove(rec) // gone, or no longer a directory we can judge
			continue
		}
		if !h.ours {
			// Something else is at the path now (the placeholder was
			// removed and the name reused): never ours to remove.
			unix.Close(h.parent)
			h.f.Close()
			os.Remove(rec)
			continue
		}
		if p.removeIfUnused(h, true) == removedIt {
			removed = append(removed, path)
		}
		h.f.Close()
	}
	return removed
}

// reopen opens a recorded placeholder the way acquire does, by descriptor
// from a parent opened without following links.
func (p *Placeholders) reopen(path string) (heldPlaceholder, error) {
	dir, name := filepath.Split(path)
	parent, err := openParent(dir)
	if err != nil {
		return heldPlaceholder{}, err
	}
	file := false
	fd, err := openDir(parent, name)
	if errors.Is(err, unix.ENOTDIR) {
		file = true
		fd, err = openFile(parent, name)
	}
	if err != nil {
		unix.Close(parent)
		return heldPlaceholder{}, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	return heldPlaceholder{path: path, parent: parent, f: f, file: file, ours: p.recorded(path, f)}, nil
}

// RecordedPlaceholders lists the placeholders the state directory still
// records and that are still there: those another run held when `agentbox
// cleanup` swept. (A released placeholder's record may stay until a
// sweep, describing an inode that is gone.)
func RecordedPlaceholders(stateDir string) []string {
	d := filepath.Join(stateDir, "placeholders")
	ents, _ := os.ReadDir(d)
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(d, e.Name()))
		if err != nil {
			continue
		}
		path, id, ok := decodeRecord(b)
		if !ok {
			continue
		}
		f, err := os.OpenFile(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		at, ok := identityOf(f)
		f.Close()
		if ok && at == id {
			out = append(out, path)
		}
	}
	return out
}
