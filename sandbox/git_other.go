//go:build !linux && !windows && !darwin

package sandbox

import "github.com/agentbox/agentbox/policy"

func (c *Cmd) beginGuard() error { return nil }
func (c *Cmd) endGuard() error   { return nil }

type guardHold = struct{}

func watchRoots(*policy.Policy) func() { return func() {} }
