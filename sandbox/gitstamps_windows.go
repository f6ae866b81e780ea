package sandbox

import (
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// fileBasicInfo is FILE_BASIC_INFO (winbase.h), which x/sys/windows does
// not define: times are FILETIMEs, 100 ns since 1601.
type fileBasicInfo struct {
	CreationTime, LastAccessTime, LastWriteTime, ChangeTime int64
	FileAttributes                                          uint32
	_                                                       uint32
}

// openNoFollow opens path itself (a link, not its target) for access.
func openNoFollow(path string, access uint32) (windows.Handle, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return windows.InvalidHandle, err
	}
	return windows.CreateFile(p, access, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_OPEN_REPARSE_POINT|windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
}

// changedSince reports whether path changed (its ChangeTime, which the
// command cannot set with SetFileTime) at or after t; an error counts as
// changed.
func changedSince(path string, t time.Time) bool {
	h, err := openNoFollow(path, windows.FILE_READ_ATTRIBUTES)
	if err != nil {
		return true
	}
	defer windows.CloseHandle(h)
	var fi fileBasicInfo
	if err := windows.GetFileInformationByHandleEx(h, windows.FileBasicInfo, (*byte)(unsafe.Pointer(&fi)), uint32(unsafe.Sizeof(fi))); err != nil {
		return true
	}
	ft := windows.Filetime{LowDateTime: uint32(fi.ChangeTime), HighDateTime: uint32(fi.ChangeTime >> 32)}
	return !time.Unix(0, ft.Nanoseconds()).Before(t)
}

// touchNoFollow sets path's access and write times to now, without
// following a link.
func touchNoFollow(path string) error {
	h, err := openNoFollow(path, windows.FILE_WRITE_ATTRIBUTES)
	if err != nil {
		return err
	}
	defer windows.CloseHandle(h)
	now := windows.NsecToFiletime(time.Now().UnixNano())
	return windows.SetFileTime(h, nil, &now, &now)
}
