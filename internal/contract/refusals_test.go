package contract

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

func TestWriteRefusals(t *testing.T) {
	var b strings.Builder
	WriteRefusals(&b, nil)
	WriteRefusals(&b, &sandbox.RunReport{})
	if b.String() != "" {
		t.Fatalf("an empty report printed %q", b.String())
	}
	WriteRefusals(&b, &sandbox.RunReport{Network: &sandbox.NetworkReport{
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
func TestWriteRefusalsNetworkOff(t *testing.T) {
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
		WriteRefusals(&b, &sandbox.RunReport{Network: &sandbox.NetworkReport{Mode: sandbox.NetworkOff, Denied: c.denied}})
		if b.String() != c.want {
			t.Errorf("%+v:\n got %q\nwant %q", c.denied, b.String(), c.want)
		}
	}
}

func TestWriteRefusalsFiles(t *testing.T) {
	d := func(op, path, reason string, n int) sandbox.FilesystemDenied {
		return sandbox.FilesystemDenied{Op: op, Path: path, Reason: reason, Count: n}
	}
	rep := func(code int, ds ...sandbox.FilesystemDenied) *sandbox.RunReport {
		return &sandbox.RunReport{ExitCode: code, Filesystem: &sandbox.FilesystemReport{Denied: ds}}
	}
	for _, c := range []struct {
		r    *sandbox.RunReport
		want string
	}{
		{rep(0, d("write", "/etc/x", sandbox.FileReasonOutside, 1)), ""},
		{rep(1, d("write", "/etc/x", sandbox.FileReasonOutside, 1)),
			"agentbox: filesystem: refused write /etc/x (outside the writable roots; --add-dir /etc to allow)\n"},
		{rep(1, d("create", "/ws/.git/index.lock", sandbox.FileReasonGit, 2)),
			"agentbox: filesystem: refused create /ws/.git/index.lock (.git is read-only, 2 times; --allow-git-writes to allow)\n"},
		{rep(2, d("create", "/ws/.agents/x", "protected path .agents", 1), d("delete", "/x", sandbox.FileReasonOutside, 1)),
			"agentbox: filesystem: refused create /ws/.agents/x (protected path .agents)\n" +
				"agentbox: filesystem: refused delete /x (outside the writable roots)\n"},
		{rep(1, d("read", "/home/u/.netrc", sandbox.FileReasonHidden, 2), d("write", "/home/u/.aws/x", sandbox.FileReasonHidden, 1)),
			"agentbox: filesystem: refused read /home/u/.netrc (hidden, 2 times; --allow-read /home/u/.netrc to allow)\n" +
				"agentbox: filesystem: refused write /home/u/.aws/x (hidden)\n"},
		{rep(1, d("create", "/my dir/it's", sandbox.FileReasonOutside, 1)),
			"agentbox: filesystem: refused create /my dir/it's (outside the writable roots; --add-dir '/my dir' to allow)\n"},
		{rep(1, d("write", "/a/1", sandbox.FileReasonOutside, 1), d("write", "/a/2", sandbox.FileReasonOutside, 1),
			d("write", "/a/3", sandbox.FileReasonOutside, 1), d("write", "/a/4", sandbox.FileReasonOutside, 1),
			d("write", "/a/5", sandbox.FileReasonOutside, 1), d("write", "/a/6", sandbox.FileReasonOutside, 1)),
			"agentbox: filesystem: refused write /a/1 (outside the writable roots; --add-dir /a to allow)\n" +
				"agentbox: filesystem: refused write /a/2 (outside the writable roots; --add-dir /a to allow)\n" +
				"agentbox: filesystem: refused write /a/3 (outside the writable roots; --add-dir /a to allow)\n" +
				"agentbox: filesystem: refused write /a/4 (outside the writable roots; --add-dir /a to allow)\n" +
				"agentbox: filesystem: refused 2 more (--report FILE lists them)\n"},
	} {
		var b strings.Builder
		WriteRefusals(&b, c.r)
		if b.String() != c.want {
			t.Errorf("%+v:\n got %q\nwant %q", c.r.Filesystem.Denied, b.String(), c.want)
		}
	}
}
