// Package policyhook carries the functions package policy registers for
// internal/rawpolicy, internal/gitguard and internal/cacheplan, which
// import policy for its types, so policy cannot import them; both sides
// import this package instead. Nothing else should use it: those packages give the same
// functions their types.
package policyhook

import (
	"errors"
	"os"
)

var (
	// New is a func(rawpolicy.Fields) *policy.Policy.
	New any
	// Fields is a func(*policy.Policy) rawpolicy.Fields.
	Fields any
	// Resolve is a func(policy.Options, func(string) string, string) (*policy.Policy, error).
	Resolve any
	// ResolveFor is a func(policy.Options, Caller, string) (*policy.Policy, error).
	ResolveFor any
	// SafeBareRepository is gitguard.SafeBareRepository.
	SafeBareRepository func(getenv func(string) string) (value, file string, err error)
	// CacheEnvValue is the value of the named tool cache's relocating
	// variable pointing it at dir, given its current value old; for
	// internal/cacheplan.
	CacheEnvValue func(name, dir, old string) string
	// KnownCache reports whether this build's tool cache table has name;
	// for internal/rawpolicy's Decode.
	KnownCache func(name string) bool
)

// Caller is what policy resolution reads of the process it resolves for,
// when that is not this one: the resident helper resolves a run on its
// client's behalf. Empty fields are this process's own.
type Caller struct {
	Getenv     func(string) string
	Dir        string // the working directory, as os.Getwd gave it
	Executable string // as os.Executable gave it
	// Remote: Arg0 is the caller's os.Args[0] (which may be empty).
	Remote bool
	Arg0   string
}

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
