// Package policyhook carries the functions package policy registers for
// internal/rawpolicy. rawpolicy imports policy for its types, so policy
// cannot import it; both import this package instead. Nothing else should
// use it: rawpolicy gives the same functions their types.
package policyhook

var (
	// New is a func(rawpolicy.Fields) *policy.Policy.
	New any
	// Fields is a func(*policy.Policy) rawpolicy.Fields.
	Fields any
	// Resolve is a func(policy.Options, func(string) string, string) (*policy.Policy, error).
	Resolve any
)
