package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/resident"
	"github.com/agentbox/agentbox/policy"
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
	return true, finish(res.Outcome(pol, timeout), stderr, rep)
}

// notPaths are variables policy resolution reads that hold no path, or a
// relative one it resolves itself ($TMPDIR from the workspace, PATH's
// entries from the caller's directory).
var notPaths = map[string]bool{"AGENTBOX_RESIDENT": true, "GIT_CONFIG_NOSYSTEM": true, "GIT_CONFIG_COUNT": true, "TMPDIR": true, "PATH": true}

// resolveForClient is the helper's half of a lean client's run (package
// fastpath): `agentbox run` as the client typed it, parsed and resolved
// as the CLI's run command does (c stands for the client), for the
// helper to run. Anything but a plain run with a command (an error,
// --help, --report, the helper switched off) is the full CLI's.
func resolveForClient(args []string, c policy.Caller) (*resident.Resolved, string) {
	if len(args) == 0 || args[0] != "run" {
		return nil, "not a run"
	}
	var f runFlags
	cmd := &cobra.Command{Use: "run"}
	f.registerRun(cmd)
	if err := cmd.ParseFlags(args[1:]); err != nil {
		return nil, "flags: " + err.Error()
	}
	argv := cmd.Flags().Args()
	switch {
	case len(argv) == 0:
		return nil, "no command"
	case f.timeout < 0:
		return nil, "negative --timeout"
	case f.report != "":
		return nil, "--report is written by the CLI"
	}
	// What resolution reads of the environment, recorded: a relative
	// path there (GIT_CONFIG_GLOBAL=g.cfg, HOME=.) names a file from the
	// caller's directory, which resolution opens from its own. Such a
	// run is the full CLI's, in the client's own directory.
	getenv, read := c.Getenv, map[string]bool{}
	c.Getenv = func(k string) string {
		v := getenv(k)
		if v != "" {
			read[k] = true
		}
		return v
	}
	pol, err := f.resolveFor(cmd, c)
	if err != nil {
		return nil, "resolving the policy: " + err.Error()
	}
	for k := range read {
		if v := getenv(k); !filepath.IsAbs(v) && !notPaths[k] {
			return nil, "$" + k + " is not an absolute path"
		}
	}
	if resident.Disabled(c.Getenv, f.cfg != nil && f.cfg.Linux.Resident != nil && !*f.cfg.Linux.Resident) {
		return nil, "the resident helper is switched off"
	}
	return &resident.Resolved{Policy: pol, Argv: argv, Timeout: f.timeout}, ""
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
				err = resident.Serve(state, resolveForClient)
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
