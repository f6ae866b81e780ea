package netproxy

import (
	"strings"
	"testing"
)

func TestRecorder(t *testing.T) {
	r := NewRecorder()
	r.Allow("a.com", 443)
	r.Allow("a.com", 443)
	r.Deny("evil.example", 443, "not in allowed_domains")
	r.Deny("b.com", 80, "not in allowed_domains")
	rep := r.Report()
	if len(rep.Allowed) != 1 || rep.Allowed[0] != (Allowed{"a.com", 443, 2}) {
		t.Errorf("allowed: %+v", rep.Allowed)
	}
	if len(rep.Denied) != 2 || rep.Denied[0].Host != "b.com" || rep.Denied[1].Count != 1 {
		t.Errorf("denied: %+v", rep.Denied)
	}
	for i := range maxEntries + 10 {
		r.Deny(strings.Repeat("x", i%50+1)+".com", uint16(i%60000+1), "not in allowed_domains")
	}
	if n := len(r.Report().Denied); n > maxEntries+1 {
		t.Errorf("recorder grew to %d entries", n)
	}
	if e := NewRecorder().Report(); e.Allowed == nil || e.Denied == nil {
		t.Errorf("empty report has nil lists: %+v", e)
	}
}
