package gitguard

import (
	"errors"
	"io/fs"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// dir on Windows is a path: Windows has no *at calls, and the guard runs
// after the command's job is gone. A reparse point (symlink, junction) is
// never followed: it is looked at as the entry it is. What this cannot
// close: another sandbox whose roots overlap this one's may swap a
// directory between the guard's look and its rename.
type dir struct{ path string }

func openTop(path string) (*dir, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &os.PathError{Op: "open", Path: path, Err: windows.ERROR_DIRECTORY}
	}
	return &dir{path: path}, nil
}

func (d *dir) close() {}
func (d *dir) openPlain(name string) (*dir, error) {
	sub, _, err := d.open(name)
	return sub, err
}

func (d *dir) open(name string) (*dir, func(), error) {
	st, err := d.stat(name)
	if err != nil {
		return nil, func() {}, err
	}
	if !st.mode.IsDir() {
		return nil, func() {}, &os.PathError{Op: "open", Path: d.child(name), Err: windows.ERROR_DIRECTORY}
	}
	return &dir{path: d.child(name)}, func() {}, nil
}

type entry struct {
	name string
	typ  fs.FileMode
}

func (d *dir) entries() ([]entry, error) {
	des, err := os.ReadDir(d.path)
	var out []entry
	for _, de := range des {
		out = append(out, entry{name: de.Name(), typ: de.Type()})
	}
	return out, err
}

func (d *dir) openFile(name string) (*os.File, error) {
	st, err := d.stat(name)
	if err != nil {
		return nil, err
	}
	if !st.mode.IsRegular() {
		return nil, &os.PathError{Op: "open", Path: d.child(name), Err: windows.ERROR_INVALID_PARAMETER}
	}
	return os.Open(d.child(name))
}

func (d *dir) writeNew(name string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(d.child(name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (d *dir) mkdir(name string, perm os.FileMode) error { return os.Mkdir(d.child(name), perm) }

func (d *dir) rename(name string, to *dir, toName string) error {
	return os.Rename(d.child(name), to.child(toName))
}

func (d *dir) remove(name string) error { return os.Remove(d.child(name)) }

// chmodEntry: Windows has no mode to make a directory unreadable with;
// the read-only attribute is what there is.
func (d *dir) chmodEntry(name string, perm os.FileMode) error {
	return os.Chmod(d.child(name), perm)
}

func (d *dir) stat(name string) (info, error) { return statPath(d.child(name)) }

// statPath reads the entry's times from the file system itself
// (FILE_BASIC_INFO): its creation and change times. Unlike the Unix change
// time, a process with write access to a file can set both
// (SetFileInformationByHandle); the README says what that leaves open.
func statPath(p string) (info, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return info{}, err
	}
	u, err := windows.UTF16PtrFromString(p)
	if err != nil {
		return info{}, err
	}
	h, err := windows.CreateFile(u, windows.FILE_READ_ATTRIBUTES, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		return info{}, &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer windows.CloseHandle(h)
	var bi fileBasicInfo
	if err := windows.GetFileInformationByHandleEx(h, windows.FileBasicInfo, (*byte)(unsafe.Pointer(&bi)), uint32(unsafe.Sizeof(bi))); err != nil {
		return info{}, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	var id windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &id); err != nil {
		return info{}, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	return info{
		mode:     fi.Mode(),
		nlink:    uint64(id.NumberOfLinks),
		dev:      uint64(id.VolumeSerialNumber),
		ino:      uint64(id.FileIndexHigh)<<32 | uint64(id.FileIndexLow),
		ctime:    filetime(bi.ChangeTime),
		btime:    filetime(bi.CreationTime),
		hasBtime: true,
		size:     fi.Size(),
	}, nil
}

type fileBasicInfo struct {
	CreationTime, LastAccessTime, LastWriteTime, ChangeTime int64
	FileAttributes                                          uint32
	_                                                       uint32
}

func filetime(t int64) time.Time { return time.Unix(0, (t-116444736000000000)*100) }

func (d *dir) touch(name string) error {
	now := time.Now()
	return os.Chtimes(d.child(name), now, now)
}

func isCrossDevice(err error) bool { return errors.Is(err, windows.ERROR_NOT_SAME_DEVICE) }

func coarseNow() time.Time { return time.Now().Add(-20 * time.Millisecond) }

// lockFile is a LockFileEx lock, dropped by Windows when its holder dies.
type lockFile struct{ f *os.File }

func openLock(d *dir, name string) (*lockFile, error) {
	f, err := os.OpenFile(d.child(name), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	return &lockFile{f: f}, nil
}

func (l *lockFile) try(exclusive bool) (bool, error) {
	flags := uint32(windows.LOCKFILE_FAIL_IMMEDIATELY)
	if exclusive {
		flags |= windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	err := windows.LockFileEx(windows.Handle(l.f.Fd()), flags, 0, 1, 0, new(windows.Overlapped))
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING) {
		return false, nil
	}
	return err == nil, err
}

func (l *lockFile) close() { l.f.Close() }

// disown: Windows' quarantine relies on the directory's ACL (see
// chmodEntry).
func (d *dir) disown(string) error { return nil }
