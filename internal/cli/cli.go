// Package cli implements the agentbox command line: run, mcp, doctor,
// setup, cleanup, install, uninstall and version, with the exit-status contract of DESIGN.md.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentbox/agentbox/internal/contract"
	"github.com/agentbox/agentbox/internal/spelling"
	"github.com/agentbox/agentbox/policy"
	"github.com/agentbox/agentbox/sandbox"
)

// Version is agentbox's release; `agentbox version` adds the commit and
// the Go toolchain it was built from.
const Version = "0.3.0"

// commit may be stamped at build time (scripts/release.sh:
// -ldflags "-X github.com/agentbox/agentbox/internal/cli.commit=..."),
// for builds without VCS information; else the build's own stamp says.
var commit = ""

// exitError carries an exit status out of a cobra command.
type exitError struct {
	code int
	err  error // printed when non-nil
}

func (e *exitError) Unwrap() error { return e.err }

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

// failure is an agentbox failure: status 125 with a message.
func failure(format string, args ...any) error {
	return &exitError{code: sandbox.CodeSandboxFailure, err: fmt.Errorf(format, args...)}
}

// Main runs the CLI and returns the process exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	defer func() {
		// A panic is a bug, but the user still gets one line and 125,
		// not a trace: the contract says agentbox failures are 125.
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "agentbox: internal error: %v (please report this)\n", r)
			code = sandbox.CodeSandboxFailure
		}
	}()
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	return exitStatus(root.Execute(), stderr)
}

// exitStatus is the status the CLI exits with for err (what a command
// returned), and writes err's message.
func exitStatus(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stderr, "agentbox: %s\n", contract.FlagNames(ee.err.Error()))
		}
		return ee.code
	}
	// cobra's own errors: unknown flag, missing argument, bad value.
	fmt.Fprintf(stderr, "agentbox: %v\n", err)
	fmt.Fprintln(stderr, "agentbox: see 'agentbox help' for usage")
	return sandbox.CodeSandboxFailure
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "agentbox",
		Short: "Run commands in an OS-enforced sandbox for AI coding agents",
		Long: `agentbox runs a command so that it, and every process it starts, may read
what you can read, write only inside the workspace and the roots you allow
(.git, .codex and .agents stay read-only), and reach no network unless
allowed.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newRun(stdin, stdout, stderr), newMCP(stdin, stdout, stderr), newDoctor(stdout), newSetup(stdout), newCleanup(stdout), newVersion(stdout), newResident(), newInstall(stdout, false), newInstall(stdout, true), newHook(stdin, stdout, stderr))
	// Subcommands without a function of their own use their parent's.
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return flagError(root, c, err) })
	return root
}

// unknownFlagRe matches pflag's message for an unknown long flag.
var unknownFlagRe = regexp.MustCompile(`^unknown flag: --([^\s=]+)$`)

// flagError adds to pflag's "unknown flag: --x" the flag of c it is near
// ("did you mean --network?"), or else the subcommands that have it;
// cobra suggests commands, not flags.
func flagError(root, c *cobra.Command, err error) error {
	m := unknownFlagRe.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	name := m[1]
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	if near := spelling.Nearest(name, names); near != "" {
		return fmt.Errorf("%w (did you mean --%s?)", err, near)
	}
	var others []string
	for _, o := range root.Commands() {
		if o != c && !o.Hidden && o.Flags().Lookup(name) != nil {
			others = append(others, "agentbox "+o.Name())
		}
	}
	if len(others) > 0 {
		return fmt.Errorf("%w (a flag of %s)", err, strings.Join(others, ", "))
	}
	return err
}

// resolve builds the policy from the flags cmd parsed (package
// contract) and the config; errors are 125.
func resolve(f *contract.Flags, cmd *cobra.Command) (*policy.Policy, error) {
	pol, err := f.Resolve(cmd, policy.Caller{})
	if err != nil {
		return nil, failure("%w", err)
	}
	return pol, nil
}

// resolveMachine is resolve for doctor and setup, which are about the
// machine: run where the workspace would be refused (the home directory,
// /), they go on with the read-only policy of the same directory and
// return the refusal.
func resolveMachine(f *contract.Flags, cmd *cobra.Command) (pol *policy.Policy, refused *policy.RootError, err error) {
	pol, err = resolve(f, cmd)
	if !errors.As(err, &refused) {
		return pol, nil, err
	}
	pol, err = resolve(f.ReadOnly(), cmd)
	return pol, refused, err
}

func newRun(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var f contract.Flags
	cmd := &cobra.Command{
		Use:   "run [flags] -- COMMAND [ARG...]",
		Short: "Run a command in the sandbox",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.Timeout < 0 {
				return failure("--timeout %v is negative", f.Timeout)
			}
			rep, err := openReport(f.Report)
			if err != nil {
				return err
			}
			defer rep.Close()
			pol, err := resolve(&f, cmd)
			if err != nil {
				reportFailed(rep, err)
				return err
			}
			return runCommand(pol, f.Timeout, args, stdin, stdout, stderr, rep, !f.ResidentOff())
		},
	}
	f.RegisterRun(cmd)
	return cmd
}

func runCommand(pol *policy.Policy, timeout time.Duration, args []string, stdin io.Reader, stdout, stderr io.Writer, rep *contract.ReportFile, mayResident bool) error {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	c := sandbox.CommandContext(ctx, pol, args[0], args[1:]...)
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	c.Diagnostics = stderr

	// Catch the signals a user or harness sends to stop a command and pass
	// them on; agentbox itself waits for the command to finish.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, contract.Forwarded...)
	// Stopped off the exit path: each signal Stop disables waits for the
	// runtime's signal thread (0.05-0.2 ms in all in a fresh process),
	// and the process exits right after; a caller that goes on has them
	// stopped moments later.
	defer func() { go signal.Stop(sigs) }()

	if mayResident {
		spawnResident(pol, stdin, stdout, stderr)
	}
	restore := saveTerminal(stdin)
	defer restore()
	if err := c.Start(); err != nil {
		return finish(contract.Of(pol, timeout, err, nil), stderr, rep)
	}
	defer contract.Relay(sigs, func(s os.Signal) { c.Signal(s) })()
	err := c.Wait()
	return finish(contract.Of(c.Policy, timeout, err, c.Report), stderr, rep)
}

// finish says on stderr what the contract adds for a run's outcome o,
// saves its report in rep, and returns its status.
func finish(o *contract.Outcome, stderr io.Writer, rep *contract.ReportFile) error {
	if code := o.Finish(stderr, rep.Save); code != 0 {
		return &exitError{code: code}
	}
	return nil
}

func newDoctor(stdout io.Writer) *cobra.Command {
	var f contract.Flags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Report what this machine can enforce",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			pol, refused, err := resolveMachine(&f, cmd)
			if err != nil {
				return err
			}
			rep := sandbox.Doctor(pol)
			if refused != nil {
				// What the machine can enforce is still worth saying;
				// the run would be refused here, and why.
				rep.Checks = append([]sandbox.Check{{Name: "workspace", Detail: refused.Error() + " (this report is for -s read-only)"}}, rep.Checks...)
			}
			rep = withFlagNames(rep)
			if asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return failure("%v", err)
				}
			} else {
				printReport(stdout, rep)
			}
			if !rep.CanSandbox {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	f.Register(cmd, false)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// withFlagNames returns the report with the library's option names in its
// text replaced by the CLI's flags.
func withFlagNames(r *sandbox.Report) *sandbox.Report {
	c := *r
	c.Backend = contract.FlagNames(r.Backend)
	c.Checks = slices.Clone(r.Checks)
	for i := range c.Checks {
		c.Checks[i].Detail = contract.FlagNames(c.Checks[i].Detail)
	}
	c.Missing = append([]string{}, r.Missing...) // [] rather than null
	for i := range c.Missing {
		c.Missing[i] = contract.FlagNames(c.Missing[i])
	}
	return &c
}

func printReport(w io.Writer, r *sandbox.Report) {
	fmt.Fprintf(w, "os:       %s\n", r.OS)
	fmt.Fprintf(w, "backend:  %s\n", r.Backend)
	fmt.Fprintf(w, "mode:     %s\n", r.Mode)
	warnings := 0
	for _, c := range r.Checks {
		mark := "ok  "
		switch {
		case !c.OK:
			mark = "FAIL"
		case c.Warning:
			mark = "warn"
			warnings++
		}
		fmt.Fprintf(w, "  [%s] %-22s %s\n", mark, c.Name, c.Detail)
	}
	switch {
	case len(r.Missing) == 0 && warnings > 0:
		fmt.Fprintln(w, "every guarantee of the policy can be enforced (see the recommendations marked warn)")
	case len(r.Missing) == 0:
		fmt.Fprintln(w, "every guarantee of the policy can be enforced")
	default:
		fmt.Fprintln(w, "not enforced here:")
		for _, m := range r.Missing {
			fmt.Fprintf(w, "  - %s\n", m)
		}
	}
	if !r.CanSandbox {
		fmt.Fprintln(w, "no sandbox is possible on this machine")
	}
	fmt.Fprintln(w, "built-in hidden list (under $HOME and your account's home):")
	for _, h := range r.Builtin {
		line := "  " + h.Path + "  (" + h.Why
		if len(h.Reopen) > 0 {
			line += "; except " + strings.Join(h.Reopen, ", ")
		}
		fmt.Fprintln(w, line+")")
	}
	fmt.Fprintf(w, "hidden from commands here (%d paths; [filesystem] deny_read adds, allow_read re-opens, default_deny_read = false drops the built-in list):\n", len(r.Hidden))
	for _, h := range r.Hidden {
		line := "  " + h.Path + "  (" + h.Why
		if len(h.Reopen) > 0 {
			var names []string
			for _, o := range h.Reopen {
				names = append(names, strings.TrimPrefix(o, h.Path+string(filepath.Separator)))
			}
			line += "; readable: " + strings.Join(names, ", ")
		}
		fmt.Fprintln(w, line+")")
	}
	fmt.Fprintf(w, "variables withheld (names, case-insensitive; [shell_environment_policy], --env NAME passes one): %s\n", strings.Join(r.SecretVariables, " "))
}

func newSetup(stdout io.Writer) *cobra.Command {
	var f contract.Flags
	cmd := &cobra.Command{
		Use:   "setup",
		Short: "One-time machine setup (Windows elevated mode); elsewhere says what is needed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			pol, _, err := resolveMachine(&f, cmd)
			if err != nil {
				return err
			}
			if err := sandbox.Setup(context.Background(), pol, stdout); err != nil {
				return failure("setup: %v", err)
			}
			return nil
		},
	}
	f.Register(cmd, false)
	return cmd
}

func newCleanup(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "cleanup",
		Short: "Remove what agentbox left on this machine, keeping (and naming) what is in use",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// The resident helper first: it holds sessions whose
			// placeholders cleanup would otherwise find in use. Only
			// an idle one is stopped: what runs in it may be another
			// agent's, or another user's (root's is every root
			// session's).
			if err := stopResident(stdout); err != nil {
				return failure("cleanup: %v", err)
			}
			if err := sandbox.Cleanup(context.Background(), stdout); err != nil {
				return failure("cleanup: %v", err)
			}
			return nil
		},
	}
}

func newVersion(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the agentbox version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			c := commit
			if c == "" {
				bi, _ := debug.ReadBuildInfo()
				c = commitOf(bi)
			}
			fmt.Fprintf(stdout, "agentbox %s (%s, %s %s/%s)\n", Version, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}

// version is what the MCP server reports to clients.
func version() string { return Version }

// pseudoRev is the revision at the end of a pseudo-version
// (v0.0.0-20261201150642-154ea866b2b2, v0.3.1-0.20261201150642-...).
var pseudoRev = regexp.MustCompile(`[-.][0-9]{14}-([0-9a-f]{12})$`)

// commitOf is the commit a build is from: its VCS stamp (a checkout's
// go build or go install), shortened, with "-dirty" when the tree had
// changes; the revision of its pseudo-version (go install of a commit
// from the module proxy, which stamps no VCS information); else
// "unknown commit".
func commitOf(bi *debug.BuildInfo) string {
	if bi == nil {
		return "unknown commit"
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += "-dirty"
		}
		return rev
	}
	if m := pseudoRev.FindStringSubmatch(bi.Main.Version); m != nil {
		return m[1]
	}
	return "unknown commit"
}
