package sandbox

// Prepared reports whether the session's commands start from a sandbox
// prepared once (a zygote), rather than each as a lone [Cmd] (degraded
// mode, an allow-list, danger-full-access, other platforms). agentbox's
// resident helper serves only prepared sessions: for the others it would
// only add a hop.
func (s *Session) Prepared() bool { return s.impl != nil }
