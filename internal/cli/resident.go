package cli

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/cli/refusals"
	"github.com/agentbox/agentbox/internal/resident"
	"github.com/agentbox/agentbox/policy"
	"github.com/agentbox/agentbox/sandbox"
)

// runResident runs the command through the resident helper when it can
// (see internal/resident); handled is false when it did not, and nothing
// ran.
// Everything the CLI does around a lone run it does here too: the exit
// status and its contract, the timeout message, the report, the notes of
// the post-run checks.
func runResident(pol *policy.Policy, timeout time.Duration, args []string, stdin io.Reader, stdout, stderr io.Writer, rep *reportFile, sigs <-chan os.Signal) (handled bool, err error) {
	state := agentdirs.State(os.Getenv, runtime.GOOS)
	if state == "" || resident.Disabled(os.Getenv, false) {
		return false, nil
	}
	var stdio [3]*os.File
	for i, s := range []any{stdin, stdout, stderr} {
		f, isFile := s.(*os.File)
		if !isFile {
			return false, nil
		}
		stdio[i] = f
	}
	res, served := resident.Run(state, pol, args, timeout, stdio, sigs)
	if !served {
		return false, nil
	}
	if res.Diag != "" {
		io.WriteString(stderr, res.Diag)
	}
	code := res.Code
	switch {
	case res.Failed != "":
		code = sandbox.CodeSandboxFailure
	case res.Signal != 0:
		code = 128 + res.Signal
	}
	r := sandbox.NewRunReport(pol, code)
	refusals.Write(stderr, r)
	if werr := rep.write(r); werr != nil {
		fmt.Fprintf(stderr, "agentbox: --report %s: %v\n", rep.path, werr)
	}
	switch {
	case res.Failed != "":
		return true, failure("%s", res.Failed)
	case res.TimedOut:
		fmt.Fprintf(stderr, "agentbox: command timed out after %v and was killed with everything it started\n", timeout)
	}
	if code == 0 {
		return true, nil
	}
	return true, &exitError{code: code}
}

// stopResident stops the resident helper, if one runs.
func stopResident() error {
	state := agentdirs.State(os.Getenv, runtime.GOOS)
	if state == "" {
		return nil
	}
	return resident.Stop(state)
}

// newResident is the helper itself, started by `agentbox run` (hidden:
// not for users to call).
func newResident() *cobra.Command {
	var state string
	var detach bool
	cmd := &cobra.Command{
		Use:    "resident --state-dir DIR",
		Short:  "The per-user resident helper (started by agentbox run)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if state == "" {
				return failure("resident: --state-dir is required")
			}
			run := resident.Serve
			if detach {
				run = resident.Detach
			}
			if err := run(state); err != nil {
				return failure("resident: %v", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&state, "state-dir", "", "agentbox's state directory")
	cmd.Flags().BoolVar(&detach, "detach", false, "start the helper and exit")
	return cmd
}
