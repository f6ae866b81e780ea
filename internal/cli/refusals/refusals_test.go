package refusals

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

func TestWrite(t *testing.T) {
	var b strings.Builder
	Write(&b, nil)
	Write(&b, &sandbox.RunReport{})
	if b.String() != "" {
		t.Fatalf("an empty report printed %q", b.String())
	}
	Write(&b, &sandbox.RunReport{Network: &sandbox.NetworkReport{
		Allowed: []sandbox.NetworkAllowed{{Host: "good.test", Port: 443, Count: 1}},
		Denied: []sandbox.NetworkDenied{
			{Host: "evil.test", Port: 80, Reason: "not in allowed_domains", Count: 1},
			{Host: "::1", Port: 22, Reason: "in denied_domains", Count: 3},
		}}})
	want := "agentbox: network: refused evil.test:80 (not in allowed_domains)\n" +
		"agentbox: network: refused [::1]:22 (in denied_domains, 3 times)\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
