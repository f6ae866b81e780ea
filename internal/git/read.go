package git

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrConfigDir is ReadConfigFile's error for a directory.
var ErrConfigDir = errors.New("a directory")

// ReadConfigFile reads a config file of at most 1 MiB; a bigger one is
// refused rather than half read.
func ReadConfigFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, ErrConfigDir
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	if fi.Size() > 1<<20 {
		return nil, fmt.Errorf("larger than 1 MiB")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Sized by the file (plus one byte to see it grow), not by the limit:
	// this runs for every config file on every run.
	buf := make([]byte, fi.Size()+1)
	n, _ := ReadFull(f, buf)
	if n == len(buf) {
		return nil, fmt.Errorf("changed while being read")
	}
	if n > 1<<20 {
		return nil, fmt.Errorf("larger than 1 MiB")
	}
	return buf[:n], nil
}

// ReadFull reads into buf until it is full or a read fails.
func ReadFull(f *os.File, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// ReadSmall reads at most 64 KiB: a gitdir file is one line, and a hostile
// workspace must not make agentbox read a huge file.
//
// Only regular files are read: a FIFO planted as a gitdir or commondir file
// would block the open forever, and a link to /proc/self/fd/0 would read
// agentbox's stdin. (A swap between the check and the open remains a
// possible hang, not an escape.)
func ReadSmall(path string) ([]byte, error) {
	if fi, err := os.Stat(path); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	// Sized by the file, not the limit: this runs many times per run.
	buf := make([]byte, min(fi.Size()+1, 64<<10))
	n, err := f.Read(buf)
	if err != nil && n == 0 && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:n], nil
}
