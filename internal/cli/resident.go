package cli

import (
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/resident"
	"github.com/agentbox/agentbox/policy"
)

// spawnResident starts the resident helper for the next run when this
// one, which the lean client (internal/resident/client) did not hand
// over, is one it could serve and none is there (see resident.Spawn).
func spawnResident(pol *policy.Policy, stdin io.Reader, stdout, stderr io.Writer) {
	state := agentdirs.State(os.Getenv, runtime.GOOS)
	if state == "" || resident.Disabled(os.Getenv, false) {
		return
	}
	var stdio [3]*os.File
	for i, s := range []any{stdin, stdout, stderr} {
		f, isFile := s.(*os.File)
		if !isFile {
			return
		}
		stdio[i] = f
	}
	resident.Spawn(state, pol, stdio)
}

// stopResident stops the resident helper if it is idle, and says on out
// what it did or why it left it running.
func stopResident(out io.Writer) error {
	state := agentdirs.State(os.Getenv, runtime.GOOS)
	if state == "" {
		return nil
	}
	o, err := resident.StopIdle(state)
	if err != nil {
		return err
	}
	switch {
	case o.Pid == 0 && !o.Stopped:
	case o.Stopped:
		fmt.Fprintf(out, "stopped the idle resident helper (pid %d)\n", o.Pid)
	case o.Why != "":
		fmt.Fprintf(out, "kept the resident helper (pid %d): %s; it exits on its own once idle (kill %d stops it and what it runs)\n", o.Pid, o.Why, o.Pid)
	default:
		closed := ""
		if o.Closed > 0 {
			closed = fmt.Sprintf("; closed its %d idle sandbox(es)", o.Closed)
		}
		fmt.Fprintf(out, "kept the resident helper (pid %d): %d command(s) running in it%s; it exits on its own once they end (kill %d stops it and them)\n", o.Pid, o.Busy, closed, o.Pid)
	}
	return nil
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
			var err error
			if detach {
				err = resident.Detach(state)
			} else {
				err = resident.Serve(state)
			}
			if err != nil {
				return failure("resident: %v", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&state, "state-dir", "", "agentbox's state directory")
	cmd.Flags().BoolVar(&detach, "detach", false, "start the helper and exit")
	return cmd
}
