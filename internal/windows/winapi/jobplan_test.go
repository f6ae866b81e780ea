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
