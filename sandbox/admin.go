package sandbox

import (
	"context"
	"io"

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
func Doctor(pol *policy.Policy) *Report { return doctor(pol) }

// Setup does the one-time machine preparation a backend needs (Windows
// elevated mode); elsewhere it reports that nothing is needed.
func Setup(ctx context.Context, pol *policy.Policy, out io.Writer) error { return setup(ctx, pol, out) }

// Cleanup removes everything agentbox ever left on the machine and reports
// what it removed and what it could not.
func Cleanup(ctx context.Context, out io.Writer) error { return cleanup(ctx, out) }

// StateDir is the directory agentbox keeps its own bookkeeping in ("" when
// there is none). [policy.Resolve] protects it in every writable root, so
// a sandboxed command cannot change how the next one is sandboxed.
func StateDir() string { return stateDir() }
