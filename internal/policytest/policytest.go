// Package policytest builds policy.Policy values field by field through
// policy's public encoding, for what policy.Resolve cannot produce:
// backends' unit tests (another platform's paths, hand-made protections),
// and backends handing a planner a variant of a policy with one thing
// changed. Nothing is derived or checked beyond what policy.Unmarshal
// checks: the caller keeps Protected consistent with WritableRoots.
package policytest

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/agentbox/agentbox/policy"
)

// Fields is a policy.Policy as its encoding (policy.Policy.MarshalBinary)
// spells it; the accessor of the same name documents each field (Egress
// is policy.Policy.AllowList). Its fields must be the encoding's, in its
// order: a drift makes New and Of panic, which TestFields shows.
type Fields struct {
	Mode             policy.Mode
	Cwd              string
	WritableRoots    []string
	Protected        []policy.Protected
	ProtectedNames   []string
	Network          bool
	Windows          policy.WindowsSandbox
	AllowDegraded    bool
	AllowUnixSockets []string
	Egress           *policy.AllowList
	Publish          []policy.PortMap
	HostPorts        []uint16
	ToolCacheMode    policy.ToolCacheMode
	ToolCaches       []policy.ToolCache
	AllowGitWrites   bool
	PrivateTemps     []policy.PrivateTemp
	SharedTemps      []string
	Hidden           []policy.Hidden
	HideRules        []policy.HideRule
	AllowRead        []string
	GlobScanMaxDepth int
	Env              policy.EnvPolicy
}

// New returns the policy made of f. It panics when f is not a policy's
// encoding (a tool cache this build does not know, an allow-list pattern
// not as its parser makes it, Fields out of step with the encoding):
// that is a mistake in the calling code, not in its input.
func New(f Fields) *policy.Policy {
	b, err := json.Marshal(f)
	if err != nil {
		panic(fmt.Sprintf("policytest: %v", err))
	}
	p, err := policy.Unmarshal(b)
	if err != nil {
		panic(fmt.Sprintf("policytest: %v", err))
	}
	return p
}

// Of returns p's fields.
func Of(p *policy.Policy) Fields {
	b, err := p.MarshalBinary()
	if err != nil {
		panic(fmt.Sprintf("policytest: %v", err))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f Fields
	if err := dec.Decode(&f); err != nil {
		panic(fmt.Sprintf("policytest: the policy's encoding has changed: %v", err))
	}
	return f
}

// Edit returns a copy of p changed by edit (p itself is unchanged).
func Edit(p *policy.Policy, edit func(*Fields)) *policy.Policy {
	f := Of(p)
	edit(&f)
	return New(f)
}

// Resolve is policy.Resolve with the environment read through getenv
// instead of os.Getenv.
func Resolve(o policy.Options, getenv func(string) string) (*policy.Policy, error) {
	return policy.ResolveFor(o, policy.Caller{Getenv: getenv})
}
