// Package exitcode holds the exit statuses agentbox reports for its own
// failures (the CLI contract of DESIGN.md) and the error that carries one.
// The CLI, the library and every backend use these; nothing else defines
// 125, 126 or 127.
package exitcode

// Statuses for a command that did not run.
const (
	// SandboxFailure: agentbox could not build or enforce the sandbox
	// (bad policy, missing setup, a restriction the machine cannot apply).
	SandboxFailure = 125
	// NotExecutable: the command was found but cannot be executed.
	NotExecutable = 126
	// NotFound: the command was not found.
	NotFound = 127
)

// Error is a failure to start a command, with the status the CLI exits
// with for it.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }
