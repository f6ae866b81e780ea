//go:build linux || darwin

package gitguard

import (
	"errors"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// dir is an open directory that the guard acts through: every lookup,
// rename and removal is relative to its descriptor and never follows a
// symlink, so a tree swapped under the guard (by another sandbox whose
// roots overlap this one's) can at worst make it act on entries of the
// directory it holds, never on a path a link points at.
type dir struct {
	fd   int
	path string // for messages only
}

// openTop opens an absolute, symlink-free directory (a writable root as
// the policy resolved it, or agentbox's state directory).
func openTop(path string) (*dir, error) {
	fd, err := openNoSymlinks(path)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return &dir{fd: fd, path: path}, nil
}

func (d *dir) close() { unix.Close(d.fd) }

// open opens the directory name in d. A directory the command left
// unreadable or unsearchable is given u+rwx for the guard's look (git,
// running as the same user, reaches what is below it by path, so the guard
// must see it too); restore puts the mode back.
func (d *dir) open(name string) (sub *dir, restore func(), err error) {
	restore = func() {}
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) {
		var st info
		if st, err = d.stat(name); err != nil {
			return nil, restore, err
		}
		if !st.mode.IsDir() {
			return nil, restore, &os.PathError{Op: "open", Path: d.child(name), Err: unix.ENOTDIR}
		}
		if st.uid != uint32(os.Geteuid()) {
			// Another user's directory (in a shared /tmp, say), which
			// agentbox may not chmod: if the command, which has the
			// caller's identity and no capabilities, could not make an
			// entry in it either, there is nothing to find.
			if unix.Faccessat(d.fd, name, unix.W_OK|unix.X_OK, unix.AT_EACCESS) != nil {
				return nil, restore, errNotOurs
			}
			return nil, restore, &os.PathError{Op: "open", Path: d.child(name), Err: unix.EACCES}
		}
		perm := rawPerm(st.mode)
		if err = chmodAt(d.fd, name, perm|0o700); err != nil {
			return nil, restore, &os.PathError{Op: "chmod", Path: d.child(name), Err: err}
		}
		restore = func() { chmodAt(d.fd, name, perm) }
		fd, err = unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		restore()
		return nil, func() {}, &os.PathError{Op: "open", Path: d.child(name), Err: err}
	}
	return &dir{fd: fd, path: d.child(name)}, restore, nil
}

// openPlain opens the directory name in d without changing any mode: for
// reaching what git itself reaches.
func (d *dir) openPlain(name string) (*dir, error) {
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: d.child(name), Err: err}
	}
	return &dir{fd: fd, path: d.child(name)}, nil
}

// entry is one name in a directory with its type as the directory listing
// gives it (fs.ModeDir, fs.ModeSymlink, ...; 0 for a regular file).
type entry struct {
	name string
	typ  fs.FileMode
}

// rewind sets d's offset back to its start, for a listing from the top.
func (d *dir) rewind() error {
	if _, err := unix.Seek(d.fd, 0, io.SeekStart); err != nil {
		return &os.PathError{Op: "seek", Path: d.path, Err: err}
	}
	return nil
}

// openFile opens the regular file name in d for reading, not following a
// symlink and not blocking on a FIFO.
func (d *dir) openFile(name string) (*os.File, error) {
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: d.child(name), Err: err}
	}
	f := os.NewFile(uintptr(fd), d.child(name))
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, &os.PathError{Op: "open", Path: d.child(name), Err: unix.EINVAL}
	}
	return f, nil
}

// writeNew creates name in d with data; it must not exist.
func (d *dir) writeNew(name string, data []byte, perm os.FileMode) error {
	fd, err := unix.Openat(d.fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm))
	if err != nil {
		return &os.PathError{Op: "create", Path: d.child(name), Err: err}
	}
	f := os.NewFile(uintptr(fd), d.child(name))
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// mkdir makes the directory name in d.
func (d *dir) mkdir(name string, perm os.FileMode) error {
	if err := unix.Mkdirat(d.fd, name, uint32(perm)); err != nil {
		return &os.PathError{Op: "mkdir", Path: d.child(name), Err: err}
	}
	return nil
}

// withWritable runs op, and if it fails for want of write permission on
// d (a directory the command made 0555), gives d u+wx for one more try
// and puts its mode back.
func (d *dir) withWritable(op func() error) error {
	err := op()
	if !errors.Is(err, unix.EACCES) && !errors.Is(err, unix.EPERM) {
		return err
	}
	var st unix.Stat_t
	if unix.Fstat(d.fd, &st) != nil {
		return err
	}
	perm := uint32(st.Mode) & 0o7777
	if unix.Fchmod(d.fd, perm|0o300) != nil {
		return err
	}
	defer unix.Fchmod(d.fd, perm)
	return op()
}

// rename moves name in d to toName in to.
func (d *dir) rename(name string, to *dir, toName string) error {
	return d.withWritable(func() error {
		if err := unix.Renameat(d.fd, name, to.fd, toName); err != nil {
			return &os.LinkError{Op: "rename", Old: d.child(name), New: to.child(toName), Err: err}
		}
		return nil
	})
}

// remove removes the non-directory name from d.
func (d *dir) remove(name string) error {
	return d.withWritable(func() error {
		if err := unix.Unlinkat(d.fd, name, 0); err != nil {
			return &os.PathError{Op: "remove", Path: d.child(name), Err: err}
		}
		return nil
	})
}

// chmodEntry sets the mode of the directory name in d (a quarantined
// repository made unreadable).
func (d *dir) chmodEntry(name string, mode os.FileMode) error {
	return chmodAt(d.fd, name, rawPerm(mode))
}

// isCrossDevice reports whether err is a rename between file systems.
func isCrossDevice(err error) bool { return errors.Is(err, unix.EXDEV) }

// rawPerm is the permission, set-id and sticky bits of m as chmod takes
// them.
func rawPerm(m fs.FileMode) uint32 {
	p := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		p |= unix.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		p |= unix.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		p |= unix.S_ISVTX
	}
	return p
}

// unixMode is the file type and permission bits of a raw st_mode.
func unixMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// nobody is the owner root's quarantined directories are given.
const nobody = 65534

// disown gives the directory name in d to nobody when agentbox runs as
// root: root reads a directory of mode 0 all the same, but git (2.35.2
// and later) refuses a repository another user owns ("dubious
// ownership"), so root's git cannot use it either. A plain user's own
// mode 0 is enough, and it may not chown.
func (d *dir) disown(name string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if err := unix.Fchownat(d.fd, name, nobody, nobody, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "chown", Path: d.child(name), Err: err}
	}
	return nil
}
