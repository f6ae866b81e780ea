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

// TestWriteNetworkOff: with the network off, one line for all the
// refusals, naming the host asked for most and how to allow it.
func TestWriteNetworkOff(t *testing.T) {
	for _, c := range []struct {
		denied []sandbox.NetworkDenied
		want   string
	}{
		{nil, ""},
		{[]sandbox.NetworkDenied{{Host: "registry.npmjs.org", Reason: "network off", Count: 2}},
			"agentbox: network is off: refused registry.npmjs.org; allow a host with --allow-domain registry.npmjs.org\n"},
		{[]sandbox.NetworkDenied{
			{Host: "a.example", Reason: "network off", Count: 1},
			{Host: "registry.npmjs.org", Reason: "network off", Count: 2},
			{Host: "registry.npmjs.org", Port: 443, Reason: "network off", Count: 1},
			{Host: `"bad host"`, Port: 443, Reason: "malformed host name (control byte or space)", Count: 9},
			{Host: "93.184.215.14", Port: 443, Reason: "network off", Count: 1},
		}, "agentbox: network is off: refused registry.npmjs.org (and 3 more); allow a host with --allow-domain registry.npmjs.org\n"},
		{[]sandbox.NetworkDenied{{Host: `"x y"`, Port: 80, Reason: "malformed host name (control byte or space)", Count: 1}},
			"agentbox: network is off: refused \"x y\"\n"},
	} {
		var b strings.Builder
		Write(&b, &sandbox.RunReport{Network: &sandbox.NetworkReport{Mode: sandbox.NetworkOff, Denied: c.denied}})
		if b.String() != c.want {
			t.Errorf("%+v:\n got %q\nwant %q", c.denied, b.String(), c.want)
		}
	}
}

func TestGitWritesHint(t *testing.T) {
	var b strings.Builder
	GitWritesHint(&b, "/ws/.git/index.lock")
	want := "agentbox: a write to /ws/.git/index.lock was refused: .git is read-only in the sandbox; to let git commit, run with --allow-git-writes (or set allow_git_writes = true in [sandbox_workspace_write])\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
