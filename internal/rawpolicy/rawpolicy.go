// Package rawpolicy builds policy.Policy values field by field, for what
// policy.Resolve cannot produce: backends' unit tests (another platform's
// paths, hand-made protections) and backends that hand a planner a copy of
// a policy with one thing changed. Nothing is derived or checked: the
// caller keeps Protected consistent with WritableRoots. [Egress] gives
// backends the parsed allow-list, which package policy does not export.
package rawpolicy

import (
	"runtime"

	"github.com/agentbox/agentbox/internal/netpolicy"
	"github.com/agentbox/agentbox/internal/policyhook"
	"github.com/agentbox/agentbox/policy"
)

// Fields is the state of a policy.Policy; the accessor of the same name
// documents each field. It must stay identical to the struct package
// policy keeps (same fields, order and types), which TestFieldsMatch checks.
type Fields = struct {
	Mode             policy.Mode
	Cwd              string
	WritableRoots    []string
	Protected        []policy.Protected
	ProtectedNames   []string
	Network          bool
	Windows          policy.WindowsSandbox
	AllowDegraded    bool
	AllowUnixSockets []string
	Egress           *netpolicy.Rules
	Publish          []policy.PortMap
	HostPorts        []uint16
	ToolCacheMode    policy.ToolCacheMode
	ToolCaches       []policy.ToolCache
	AllowGitWrites   bool
	PrivateTemps     []policy.PrivateTemp
	SharedTemps      []string
}

// New returns the policy made of f (its slices copied).
func New(f Fields) *policy.Policy {
	return policyhook.New.(func(Fields) *policy.Policy)(f)
}

// Of returns p's fields (its slices copied).
func Of(p *policy.Policy) Fields {
	return policyhook.Fields.(func(*policy.Policy) Fields)(p)
}

// Edit returns a copy of p changed by edit.
func Edit(p *policy.Policy, edit func(*Fields)) *policy.Policy {
	f := Of(p)
	edit(&f)
	return New(f)
}

// Resolve is policy.Resolve with the environment read through getenv
// instead of os.Getenv, and the temp-directory rules of goos ("linux",
// "windows", ...) instead of this platform's.
func Resolve(o policy.Options, getenv func(string) string, goos string) (*policy.Policy, error) {
	return policyhook.Resolve.(func(policy.Options, func(string) string, string) (*policy.Policy, error))(o, getenv, goos)
}

// Egress is p's allow-list for agentbox's proxy when the command may
// reach only listed destinations; nil otherwise. Backends and the proxy
// use it; policy shows callers only the patterns as written. The rules
// are shared, not copied: callers must not change them.
func Egress(p *policy.Policy) *netpolicy.Rules {
	return Of(p).Egress
}

// Caller is what policy resolution reads of the process it resolves for
// (see [ResolveFor]).
type Caller = policyhook.Caller

// ResolveFor is policy.Resolve for the process c describes: the resident
// helper resolves a run on its client's behalf, from the client's
// environment, directory, executable and argv[0], as the client itself
// would have.
func ResolveFor(o policy.Options, c Caller) (*policy.Policy, error) {
	return policyhook.ResolveFor.(func(policy.Options, policyhook.Caller, string) (*policy.Policy, error))(o, c, runtime.GOOS)
}
