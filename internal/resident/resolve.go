package resident

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/contract"
	"github.com/agentbox/agentbox/policy"
)

// clientRun is a lean client's `agentbox run` as it typed it, parsed as
// the CLI's run command parses it (package contract's flags).
type clientRun struct {
	f    contract.Flags
	cmd  *cobra.Command
	argv []string
}

// parseRun parses a client's arguments from "run" on; nil, with why, for
// anything but a plain run with a command (a flag error, --help, a
// negative --timeout): the client's full CLI says what it says of them.
func parseRun(args []string) (*clientRun, string) {
	if len(args) == 0 || args[0] != "run" {
		return nil, "not a run"
	}
	r := &clientRun{cmd: &cobra.Command{Use: "run"}}
	r.f.RegisterRun(r.cmd)
	if err := r.cmd.ParseFlags(args[1:]); err != nil {
		return nil, "flags: " + err.Error()
	}
	r.argv = r.cmd.Flags().Args()
	switch {
	case len(r.argv) == 0:
		return nil, "no command"
	case r.f.Timeout < 0:
		return nil, "negative --timeout"
	}
	return r, ""
}

// notPaths are variables policy resolution reads that hold no path, or a
// relative one it resolves itself ($TMPDIR from the workspace, PATH's
// entries from the caller's directory).
var notPaths = map[string]bool{"AGENTBOX_RESIDENT": true, "GIT_CONFIG_NOSYSTEM": true, "GIT_CONFIG_COUNT": true, "TMPDIR": true, "PATH": true}

// resolve is the policy the client's CLI would resolve for r, c standing
// for the client; nil, with why, for what the full CLI must do itself (a
// resolution error, a relative path in the environment, the helper
// switched off).
func (r *clientRun) resolve(c policy.Caller) (*policy.Policy, string) {
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
	pol, err := r.f.Resolve(r.cmd, c)
	if err != nil {
		return nil, "resolving the policy: " + err.Error()
	}
	for k := range read {
		if v := getenv(k); !filepath.IsAbs(v) && !notPaths[k] {
			return nil, "$" + k + " is not an absolute path"
		}
	}
	if Disabled(c.Getenv, r.f.ResidentOff()) {
		return nil, "the resident helper is switched off"
	}
	return pol, ""
}

// finish is what the CLI would have written to stderr after a run of
// pol with timeout ended with res, and the status it would have exited
// with: the contract's, which the CLI's own runs use too. rep is the
// --report file, nil without one.
func finish(pol *policy.Policy, timeout time.Duration, res *Result, rep *contract.ReportFile) (stderr string, code int) {
	var b strings.Builder
	code = res.Outcome(pol, timeout).Finish(&b, rep.Save)
	return b.String(), code
}
