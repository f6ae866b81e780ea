package gitguard

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// entries lists d. The descriptor's offset is rewound first, so a
// directory may be listed twice.
//
// It reads the descriptor itself rather than through an os.File, whose
// duplicate (dup, close-on-exec, flags, close) and extra read at the end
// were most of the cost of listing the small directories a check and the
// watcher list for every command.
func (d *dir) entries() ([]entry, error) {
	if err := d.rewind(); err != nil {
		return nil, err
	}
	buf := make([]byte, 8192)
	var out []entry
	for {
		n, err := unix.Getdents(d.fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return out, &os.PathError{Op: "readdirent", Path: d.path, Err: err}
		}
		if n <= 0 {
			return out, nil
		}
		if out, err = d.appendDirents(out, buf[:n]); err != nil {
			return out, err
		}
	}
}

// appendDirents appends the entries of b, a getdents64 result, less "."
// and "..". An entry whose type the file system does not give is looked
// up (not following a symlink); one gone meanwhile is left out, as
// os.File.ReadDir leaves it out.
func (d *dir) appendDirents(out []entry, b []byte) ([]entry, error) {
	// struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
	const nameOff = 19
	for len(b) > 0 {
		if len(b) < nameOff {
			return out, &os.PathError{Op: "readdirent", Path: d.path, Err: unix.EIO}
		}
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < nameOff || reclen > len(b) {
			return out, &os.PathError{Op: "readdirent", Path: d.path, Err: unix.EIO}
		}
		typ, raw := b[18], b[nameOff:reclen]
		b = b[reclen:]
		n := 0
		for n < len(raw) && raw[n] != 0 {
			n++
		}
		name := string(raw[:n])
		if name == "" || name == "." || name == ".." {
			continue
		}
		var mode fs.FileMode
		switch typ {
		case unix.DT_REG:
		case unix.DT_DIR:
			mode = fs.ModeDir
		case unix.DT_LNK:
			mode = fs.ModeSymlink
		case unix.DT_FIFO:
			mode = fs.ModeNamedPipe
		case unix.DT_SOCK:
			mode = fs.ModeSocket
		case unix.DT_CHR:
			mode = fs.ModeDevice | fs.ModeCharDevice
		case unix.DT_BLK:
			mode = fs.ModeDevice
		default:
			var st unix.Stat_t
			err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			if err != nil {
				return out, &os.PathError{Op: "lstat", Path: d.child(name), Err: err}
			}
			mode = unixMode(st.Mode).Type()
		}
		out = append(out, entry{name: name, typ: mode})
	}
	return out, nil
}
