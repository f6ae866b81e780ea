//go:build linux || darwin || windows

package sandbox

import (
	"fmt"

	"github.com/agentbox/agentbox/internal/gitguard"
	"github.com/agentbox/agentbox/policy"
)

// beginGuard joins the checks of what commands leave behind in the
// policy's writable roots (internal/gitguard), before the command can
// write anything: an error means they cannot be made, and nothing runs.
func (c *Cmd) beginGuard() error {
	g, err := gitguard.Begin(c.Policy, stateDir())
	if err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: err}
	}
	for _, n := range g.Notes() {
		c.diag("%s", n)
	}
	c.guard = g
	return nil
}

// endGuard lets go of them once the command's whole tree is gone; the
// last run out of a root checks it. What was moved aside goes to the
// diagnostics; what could not be is the error that fails the run.
func (c *Cmd) endGuard() error {
	g := c.guard
	c.guard = nil
	notes, err := g.End()
	for _, n := range notes {
		c.diag("%s", n)
	}
	if err != nil {
		return fmt.Errorf("after the command: %w", err)
	}
	return nil
}

type guardHold = *gitguard.Guard

// watchRoots starts watching pol's writable roots for a session.
func watchRoots(pol *policy.Policy) func() { return gitguard.Watch(gitguard.Roots(pol)) }
