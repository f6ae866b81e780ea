// Package policyhook carries the functions package policy registers for
// internal/rawpolicy, internal/gitguard and internal/cacheplan, which
// import policy for its types, so policy cannot import them; both sides
// import this package instead. Nothing else should use it: those packages give the same
// functions their types.
package policyhook

var (
	// New is a func(rawpolicy.Fields) *policy.Policy.
	New any
	// Fields is a func(*policy.Policy) rawpolicy.Fields.
	Fields any
	// Resolve is a func(policy.Options, func(string) string, string) (*policy.Policy, error).
	Resolve any
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
