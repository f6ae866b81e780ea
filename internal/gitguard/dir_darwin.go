package gitguard

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// entries lists d. The descriptor's offset is rewound first, so a
// directory may be listed twice.
func (d *dir) entries() ([]entry, error) {
	if err := d.rewind(); err != nil {
		return nil, err
	}
	// A duplicate: os.File takes ownership of the descriptor it is given.
	fd, err := unix.Dup(d.fd)
	if err != nil {
		return nil, &os.PathError{Op: "dup", Path: d.path, Err: err}
	}
	unix.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	var out []entry
	for {
		des, err := f.ReadDir(1024)
		for _, de := range des {
			out = append(out, entry{name: de.Name(), typ: de.Type()})
		}
		if err == io.EOF || len(des) == 0 && err == nil {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}
