// Command agentbox runs a command inside an OS-enforced sandbox: it may read
// what the user can read, write only beneath the workspace and the allowed
// roots (with .git, .codex and .agents kept read-only) and reach no network
// unless allowed. See `agentbox help run`.
package main

import (
	"os"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/sandbox"
)

func main() {
	// The Linux backend re-executes this binary to build the sandbox;
	// Main takes over (and never returns) in that stage.
	sandbox.Main()
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
