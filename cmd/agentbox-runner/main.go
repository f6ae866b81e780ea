// Command agentbox-runner is the middle process of agentbox's elevated
// Windows sandbox. agentbox starts it as a sandbox user with
// CreateProcessWithLogonW; it connects back over a private named pipe,
// builds a write-restricted token from its own token and runs the
// requested command inside a kill-on-close job. It is not meant to be run
// by hand; agentbox-setup installs a copy the sandbox users can execute.
package main

import (
	"os"

	"github.com/agentbox/agentbox/internal/windows/elevated"
)

func main() {
	os.Exit(elevated.RunnerMain(os.Args[1:]))
}
