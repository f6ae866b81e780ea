//go:build !linux

package sandbox

import "github.com/agentbox/agentbox/policy"

// newSession has no prepared sandbox to offer outside Linux: each command
// of the session starts exactly as a lone Cmd.
func newSession(*policy.Policy, string) (sessionImpl, error) { return nil, nil }
