//go:build !linux

package resident

import (
	"errors"
	"os"

	"github.com/agentbox/agentbox/policy"
)

// Spawn starts nothing here: only Linux has a resident helper.
func Spawn(stateDir string, pol *policy.Policy, stdio [3]*os.File) {}

// Serve fails: only Linux has a resident helper.
func Serve(stateDir string) error {
	return errors.New("agentbox: the resident helper exists on Linux only")
}

// StopIdle has nothing to stop here.
func StopIdle(stateDir string) (StopOutcome, error) { return StopOutcome{}, nil }

// Detach fails: only Linux has a resident helper.
func Detach(stateDir string) error { return Serve(stateDir) }
