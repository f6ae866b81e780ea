//go:build !linux

package resident

import (
	"errors"
	"os"
	"time"

	"github.com/agentbox/agentbox/policy"
)

// Run never handles a run here: only Linux has a resident helper.
func Run(stateDir string, pol *policy.Policy, argv []string, timeout time.Duration, stdio [3]*os.File, sigs <-chan os.Signal) (*Result, bool) {
	return nil, false
}

// Serve fails: only Linux has a resident helper.
func Serve(stateDir string, resolve Resolver) error {
	return errors.New("agentbox: the resident helper exists on Linux only")
}

// StopIdle has nothing to stop here.
func StopIdle(stateDir string) (StopOutcome, error) { return StopOutcome{}, nil }

// Detach fails: only Linux has a resident helper.
func Detach(stateDir string) error { return Serve(stateDir, nil) }
