// Package stage is the code that runs only in agentbox re-executed as a
// sandbox's stage (a lone run's init, its degraded reaper, a session's
// zygote and mounter): it builds the sandbox from inside, hardens what the
// command is forked from, runs the command and reports on it.
package stage
