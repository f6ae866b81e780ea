// Command agentbox runs a command inside an OS-enforced sandbox: it may read
// what the user can read, write only beneath the workspace and the allowed
// roots (with .git, .codex and .agents kept read-only) and reach no network
// unless allowed. See `agentbox help run`.
package main

import (
	"os"

	"github.com/agentbox/agentbox/internal/cli"
	// PID 1 of the commands the resident helper runs: it takes over
	// from its init function, before the CLI's packages initialise.
	_ "github.com/agentbox/agentbox/internal/resident/shim"
)

func main() {
	// The Linux backend re-executes this binary to build the sandbox;
	// that stage takes over from a package init function and never
	// reaches main.
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
