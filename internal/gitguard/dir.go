package gitguard

import (
	"io"
	"path/filepath"
)

// The methods of dir that are the same on every OS, over the per-OS
// ones (dir_unix.go, dir_windows.go).

// child is the path of name in d, for messages and skip lists.
func (d *dir) child(name string) string { return filepath.Join(d.path, name) }

// readFile reads name in d (not following a symlink), at most max bytes;
// ok is false when it is larger.
func (d *dir) readFile(name string, max int) (data []byte, ok bool, err error) {
	f, err := d.openFile(name)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	data, err = io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, false, err
	}
	if len(data) > max {
		return nil, false, nil
	}
	return data, true, nil
}
