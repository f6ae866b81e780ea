package winapi

// JobLimits says which limits a sandbox job holds. Every job is
// kill-on-close and allows no breakaway; the UI restrictions depend on
// where agentbox runs.
//
// AssignProcessToJobObject documents that a process already in a job can
// join another only if that job "cannot have UI limits set"
// (https://learn.microsoft.com/windows/win32/api/jobapi2/nf-jobapi2-assignprocesstojobobject).
// A child inherits its creator's job, so when agentbox (or agentbox-runner,
// which CreateProcessWithLogonW puts in a job) is in one already - Task
// Scheduler, services, many terminals and CI runners do that - the
// sandbox job must go without UI restrictions or every run fails.
type JobLimits struct {
	// UI reports that JOBOBJECT_BASIC_UI_RESTRICTIONS are set.
	UI bool
	// Nested reports that this process was already in a job, so the
	// sandbox job is nested in it.
	Nested bool
}

// PlanJob returns the limits to ask for: UI restrictions unless this
// process is already in a job.
func PlanJob(inJob bool) JobLimits { return JobLimits{UI: !inJob, Nested: inJob} }

// String says which limits held, for diagnostics.
func (l JobLimits) String() string {
	if l.UI {
		return "kill-on-close job, no breakaway, UI restrictions (other windows, clipboard, global atoms, system settings, desktop switching, logoff)"
	}
	s := "kill-on-close job, no breakaway; NO UI restrictions"
	if l.Nested {
		s += " (agentbox already runs inside a job, and Windows refuses a nested job with UI limits)"
	}
	return s + "; the private desktop still keeps the command away from your windows"
}
