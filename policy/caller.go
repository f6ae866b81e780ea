package policy

import (
	"errors"
	"os"
	"runtime"
)

// Caller is what resolution reads of the process it resolves for, when
// that is not this one: a server (agentbox's resident helper) resolving a
// run on its client's behalf. Empty fields are this process's own.
type Caller struct {
	Getenv     func(string) string
	Dir        string // the working directory, as os.Getwd gave it
	Executable string // as os.Executable gave it
	// Remote: Arg0 is the caller's os.Args[0] (which may be empty), and
	// the caller's directory is never this process's.
	Remote bool
	Arg0   string
}

// ResolveFor is [Resolve] for the process c describes: from its
// environment, working directory, executable and argv[0], exactly as
// that process would have resolved o itself.
func ResolveFor(o Options, c Caller) (*Policy, error) { return resolveFor(o, c, runtime.GOOS) }

// Env is the caller's environment lookup: Getenv, else this process's.
func (c Caller) Env() func(string) string {
	if c.Getenv != nil {
		return c.Getenv
	}
	return os.Getenv
}

// Wd is the caller's working directory: Dir, else this process's own,
// never for a remote caller (whose directory is not ours).
func (c Caller) Wd() (string, error) {
	if c.Dir != "" {
		return c.Dir, nil
	}
	if c.Remote {
		return "", errors.New("the caller's directory is not known")
	}
	return os.Getwd()
}

// Exe is the caller's executable: Executable, else this process's.
func (c Caller) Exe() (string, error) {
	if c.Executable != "" {
		return c.Executable, nil
	}
	return os.Executable()
}
