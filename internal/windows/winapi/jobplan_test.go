package winapi

import (
	"strings"
	"testing"
)

// Issue: inside a job (CreateProcessWithLogonW, Task Scheduler, services,
// terminals), a job with UI limits cannot be joined and every run failed.
func TestPlanJob(t *testing.T) {
	if l := PlanJob(false); !l.UI || l.Nested {
		t.Errorf("not in a job: %+v, want UI restrictions", l)
	}
	l := PlanJob(true)
	if l.UI || !l.Nested {
		t.Errorf("already in a job: %+v, want no UI restrictions (Windows refuses them on nested jobs)", l)
	}
	if s := l.String(); !strings.Contains(s, "NO UI restrictions") || !strings.Contains(s, "private desktop") {
		t.Errorf("nested report %q does not say which limits held", s)
	}
}

// Session 0, services, OpenSSH: no interactive station, so agentbox must
// make one the command can connect to.
func TestNeedOwnStation(t *testing.T) {
	if NeedOwnStation(_WSF_VISIBLE) {
		t.Error("interactive WinSta0 needs no station of our own")
	}
	if !NeedOwnStation(0) {
		t.Error("a non-interactive station (service, OpenSSH) is used as is: USER32 children die with 0xC0000142")
	}
}
