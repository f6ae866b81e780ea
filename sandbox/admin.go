package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/agentbox/agentbox/internal/gitguard"
	"github.com/agentbox/agentbox/policy"
)

// Check is one line of a doctor report.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Report says what this machine can enforce.
type Report struct {
	OS      string  `json:"os"`
	Backend string  `json:"backend"` // what `run` would use, e.g. "namespaces+landlock+seccomp"
	Mode    string  `json:"mode"`    // the policy mode doctor evaluated
	Checks  []Check `json:"checks"`
	// Missing lists guarantees the policy asks for that this machine cannot
	// give; `run` refuses such a policy unless degraded mode is allowed.
	Missing []string `json:"missing"`
	// CanSandbox is false when no sandbox at all is possible here.
	CanSandbox bool `json:"can_sandbox"`
}

// Doctor inspects the machine for pol (which may be nil for the default
// policy) without running anything sandboxed.
func Doctor(pol *policy.Policy) *Report {
	r := doctor(pol)
	r.Checks = append(r.Checks, gitBareCheck())
	return r
}

// gitBareCheck reports whether the user's git refuses repositories planted
// without a .git (safe.bareRepository=explicit). A sandboxed command may
// write HEAD, objects/, refs/ and a config naming a core.pager in any
// directory it can write; without the setting, the user's next `git log`
// there runs that pager on the host. Only git can refuse it.
func gitBareCheck() Check {
	c := Check{Name: "git safe.bareRepository"}
	v, file, err := gitguard.SafeBareRepository(os.Getenv)
	switch {
	case err != nil:
		c.Detail = fmt.Sprintf("cannot read your git config: %v", err)
	case v == "explicit":
		c.OK = true
		c.Detail = "explicit (" + file + "): git refuses repositories a command plants without a .git"
	default:
		if v == "" {
			v = "unset (git's default: all)"
		}
		c.Detail = v + ": a repository skeleton a sandboxed command plants (HEAD, objects/, refs/, config) runs its core.pager or fsmonitor when you run git there; fix: git config --global safe.bareRepository explicit (git 2.38 or later)"
	}
	return c
}

// Setup does the one-time machine preparation a backend needs (Windows
// elevated mode); elsewhere it reports that nothing is needed.
func Setup(ctx context.Context, pol *policy.Policy, out io.Writer) error {
	if err := setup(ctx, pol, out); err != nil {
		return err
	}
	// agentbox does not edit the user's git config itself; it says the
	// one command that closes the planted-repository vector.
	if c := gitBareCheck(); !c.OK {
		fmt.Fprintln(out, "agentbox: recommended: git config --global safe.bareRepository explicit\n"+
			"  (otherwise a repository a sandboxed command plants, HEAD, objects/, refs/ and a config,\n"+
			"  runs its core.pager when you run git in that directory; git 2.38 or later)")
	}
	return nil
}

// Cleanup removes everything agentbox ever left on the machine and reports
// what it removed and what it could not.
func Cleanup(ctx context.Context, out io.Writer) error { return cleanup(ctx, out) }
