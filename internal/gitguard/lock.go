package gitguard

import (
	"errors"
	"io/fs"
	"os"
	"time"
)

// lockWait takes the lock, waiting at most d.
func (l *lockFile) lockWait(exclusive bool, d time.Duration) error {
	deadline := time.Now().Add(d)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		ok, err := l.try(exclusive)
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(pause)
	}
}

// openOrMake opens one of agentbox's own directories (the state directory
// or one below it), making it (0700) first if it is missing.
func openOrMake(path string) (*dir, error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, err
	}
	return openTop(path)
}

// errNotOurs: a directory the caller can neither read nor write, which a
// command with the caller's identity cannot have put anything into.
var errNotOurs = errors.New("not the caller's, and not writable by it")

// isNotExist reports whether err says a name is absent, or is a
// directory that, for the guard, might as well be (errNotOurs).
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotOurs) }

// isExist reports whether err says a name is taken.
func isExist(err error) bool { return errors.Is(err, fs.ErrExist) }
