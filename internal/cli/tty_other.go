//go:build !linux && !darwin

package cli

import "io"

// saveTerminal is a no-op where agentbox does not manage the terminal.
func saveTerminal(io.Reader) func() { return func() {} }
