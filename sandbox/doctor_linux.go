package sandbox

import (
	"runtime"

	"github.com/agentbox/agentbox/policy"
)

func linuxDoctor(pol *policy.Policy) *Report {
	r := &Report{OS: runtime.GOOS, Backend: "namespaces", CanSandbox: true}
	if pol != nil {
		r.Mode = string(pol.Mode)
	}
	return r
}
