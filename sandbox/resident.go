package sandbox

import (
	"github.com/agentbox/agentbox/internal/sessionhook"
	"github.com/agentbox/agentbox/policy"
)

func init() {
	sessionhook.NewInitSession = func(pol *policy.Policy, init string) (*Session, error) {
		if pol == nil || init == "" {
			return NewSession(pol)
		}
		return newSessionInit(pol, init)
	}
}

// Prepared reports whether the session's commands start from a sandbox
// prepared once (a zygote), rather than each as a lone [Cmd] (degraded
// mode, an allow-list, danger-full-access, other platforms). agentbox's
// resident helper serves only prepared sessions: for the others it would
// only add a hop.
func (s *Session) Prepared() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.impl != nil
}
