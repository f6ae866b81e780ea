// Command agentbox runs a command inside an OS-enforced sandbox: it may read
// what the user can read, write only beneath the workspace and the allowed
// roots (with .git, .codex and .agents kept read-only) and reach no network
// unless allowed. See `agentbox help run`.
package main

import (
	"os"

	"github.com/agentbox/agentbox/internal/cli"
	// On Linux, hands `agentbox run` to the resident helper from a
	// package init, before most of the binary initialises; when the
	// helper does not serve the run, main runs the CLI as usual.
	_ "github.com/agentbox/agentbox/internal/resident/client"
)

func main() {
	// The Linux backend re-executes this binary to build the sandbox;
	// that stage takes over from a package init function and never
	// reaches main.
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
