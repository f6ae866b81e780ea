// Package sessionhook carries the session constructor package sandbox
// registers for agentbox's resident helper (internal/resident), which
// imports sandbox, so sandbox cannot offer it to the helper alone any
// other way. Nothing else should use it.
package sessionhook

// NewInitSession is a func(pol *policy.Policy, init string)
// (*sandbox.Session, error): sandbox.NewSession, whose prepared commands
// each run under an init of their own (the executable init, at the same
// path in the sandbox, started as package pid1) that is started before
// the command is asked for.
var NewInitSession any
