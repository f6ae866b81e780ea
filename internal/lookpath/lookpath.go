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

	"github.com/agentbox/agentbox/internal/exitcode"
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
func Find(name, path string) (string, int, error) { return FindIn(name, path, "") }

// FindIn is [Find] for a command that will run in dir rather than in the
// caller's current directory: relative names and PATH entries are checked
// against dir, and returned relative, for the command's own exec.
func FindIn(name, path, dir string) (string, int, error) {
	if name == "" {
		return "", exitcode.NotFound, errors.New("empty command name: command not found")
	}
	if strings.Contains(name, "/") {
		if err := executable(in(dir, name)); err != nil {
			return "", statusOf(err), fmt.Errorf("%s: %w", name, describe(err))
		}
		return name, 0, nil
	}
	// A file found but not executable is remembered, as the shell does:
	// 126 only when no later entry has an executable one. An entry that
	// cannot be searched (EACCES from stat, as a PATH that `sudo -u`
	// left with root's /root/bin in it gives) holds nothing this process
	// could run: it is skipped, as bash skips it, and a name found
	// nowhere else is "command not found", 127. (execvp(3) remembers
	// that EACCES too and reports 126; the shells users compare with do
	// not.)
	var denied error
	for _, entry := range filepath.SplitList(path) {
		if entry == "" {
			entry = "."
		}
		p := filepath.Join(entry, name)
		if entry == "." {
			p = "./" + name
		}
		err := executable(in(dir, p))
		if err == nil {
			return p, 0, nil
		}
		if denied == nil && errors.Is(err, errNotExecutable) {
			denied = err
		}
	}
	if denied != nil {
		return "", exitcode.NotExecutable, fmt.Errorf("%s: %w", name, describe(denied))
	}
	return "", exitcode.NotFound, fmt.Errorf("%s: command not found", name)
}

// in makes a relative p relative to dir ("" is the current directory).
func in(dir, p string) string {
	if dir == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// errNotExecutable is a file that exists but this process may not
// execute (a directory included); it wraps fs.ErrPermission.
var errNotExecutable = fmt.Errorf("not executable: %w", fs.ErrPermission)

// stat is os.Stat; tests replace it to see a directory they cannot make
// unsearchable for root.
var stat = os.Stat

// executable reports nil for a regular file this process may execute,
// errNotExecutable for one it may not or for a directory, and the stat
// error otherwise (fs.ErrPermission when a directory on the way cannot
// be searched).
func executable(p string) error {
	fi, err := stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 || !mayExecute(p) {
		return errNotExecutable
	}
	return nil
}

// statusOf is the exec table's status for a file the lookup refused:
// what exec would have said of it (a loop of symlinks, a name too
// long: 126, as bash says), and 127 for a stat that failed otherwise.
func statusOf(err error) int {
	if c := exitcode.Classify(err); c != exitcode.SandboxFailure {
		return c
	}
	return exitcode.NotFound
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
