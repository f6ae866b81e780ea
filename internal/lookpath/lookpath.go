// Package lookpath finds a command the way a POSIX shell does, in the PATH
// of the command's own environment rather than the calling process's, and
// maps failures to the shell's statuses (127 not found, 126 found but not
// executable). It reads no process-wide state, so concurrent callers with
// different environments cannot race.
package lookpath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Statuses a shell reports for a command it cannot run.
const (
	NotExecutable = 126
	NotFound      = 127
)

// Env returns the value of PATH in env (the last entry wins, as for exec).
func Env(env []string) string {
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	return path
}

// Find resolves name against path (a colon-separated list; an empty entry
// is the current directory, as for the shell). A name with a slash is used
// as it is. On failure it returns the status a shell would exit with and
// an error naming the command.
func Find(name, path string) (string, int, error) {
	if name == "" {
		return "", NotFound, errors.New("empty command name: command not found")
	}
	if strings.Contains(name, "/") {
		if err := executable(name); err != nil {
			return "", statusOf(err), fmt.Errorf("%s: %w", name, describe(err))
		}
		return name, 0, nil
	}
	// A file found but not executable is remembered, as the shell does:
	// 126 only when no later entry has an executable one.
	var denied error
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if dir == "." {
			p = "./" + name
		}
		err := executable(p)
		if err == nil {
			return p, 0, nil
		}
		if denied == nil && errors.Is(err, fs.ErrPermission) {
			denied = err
		}
	}
	if denied != nil {
		return "", NotExecutable, fmt.Errorf("%s: %w", name, describe(denied))
	}
	return "", NotFound, fmt.Errorf("%s: command not found", name)
}

// executable reports nil for a regular file with an execute bit, wrapping
// fs.ErrPermission for one without it or for a directory, and the stat
// error otherwise.
func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("not executable: %w", fs.ErrPermission)
	}
	return nil
}

func statusOf(err error) int {
	if errors.Is(err, fs.ErrPermission) {
		return NotExecutable
	}
	return NotFound
}

func describe(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errors.New("command not found")
	case errors.Is(err, fs.ErrPermission):
		return errors.New("permission denied (not executable)")
	}
	return err
}
