package contract

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/policy"
	"github.com/agentbox/agentbox/sandbox"
)

// TestOutcome: each way a run ends gives one status and one set of
// stderr lines, whether the run ran here (Of) or in the resident helper
// (PartsOf, then Parts.Outcome on the client's side).
func TestOutcome(t *testing.T) {
	timedOut := "agentbox: command timed out after 2s and was killed with everything it started\n"
	// A nil policy is a run without network, on either side.
	refused := &sandbox.RunReport{Network: &sandbox.NetworkReport{Mode: sandbox.NetworkOff,
		Denied: []sandbox.NetworkDenied{{Host: "evil.test", Port: 80, Reason: policy.ReasonNetworkOff, Count: 1}}}}
	refusedLine := "agentbox: network is off: refused evil.test; allow a host with --allow-domain evil.test\n"
	for _, c := range []struct {
		name   string
		err    error
		rep    *sandbox.RunReport
		code   int
		stderr string
	}{
		{"ok", nil, nil, 0, ""},
		{"exit", &sandbox.ExitError{Status: &sandbox.Status{Code: 3}}, nil, 3, ""},
		{"signal", &sandbox.ExitError{Status: &sandbox.Status{Signal: 9}}, nil, 137, ""},
		{"timeout", &sandbox.ExitError{Status: &sandbox.Status{Signal: 9, TimedOut: true}}, nil, 137, timedOut},
		{"timeout+refusals", &sandbox.ExitError{Status: &sandbox.Status{Signal: 9, TimedOut: true}}, refused, 137, refusedLine + timedOut},
		{"wait-failed", fmt.Errorf("wait: %w", errors.New("boom")), nil, 125, "agentbox: wait: boom\n"},
		{"wait-failed+refusals", errors.New("boom"), refused, 125, refusedLine + "agentbox: boom\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			o := Of(nil, 2*time.Second, c.err, c.rep)
			if code := o.Finish(&b, nil); code != c.code || b.String() != c.stderr || o.Report == nil {
				t.Errorf("here: status %d, stderr %q, report %v; want %d, %q", code, b.String(), o.Report, c.code, c.stderr)
			}
			// The helper's way: the parts over the wire, the outcome
			// rebuilt, with the notes it collected first.
			p := PartsOf(c.err, c.rep)
			p.Diag = "note\n"
			b.Reset()
			if code := p.Outcome(nil, 2*time.Second).Finish(&b, nil); code != c.code || b.String() != "note\n"+c.stderr {
				t.Errorf("helper: status %d, stderr %q; want %d, %q", code, b.String(), c.code, "note\n"+c.stderr)
			}
		})
	}
}

// TestOutcomeStart: a start that failed is its status (the one exec
// table's, or 125) and one line naming the flag, not the option; a
// report that cannot be saved is a line before it, the status unchanged.
func TestOutcomeStart(t *testing.T) {
	var b strings.Builder
	err := &sandbox.StartError{Code: 127, Err: errors.New("nosuch: command not found")}
	o := Of(nil, 0, err, nil)
	if code := o.Finish(&b, nil); code != 127 || b.String() != "agentbox: nosuch: command not found\n" || o.Report.ExitCode != 127 {
		t.Errorf("status %d, stderr %q, report's %d", code, b.String(), o.Report.ExitCode)
	}
	b.Reset()
	o = Of(nil, 0, &sandbox.StartError{Code: 125, Err: errors.New("Options.Cwd /x does not exist")}, nil)
	save := func(*sandbox.RunReport) error { return errors.New("--report r.json: disk full") }
	if code := o.Finish(&b, save); code != 125 || b.String() != "agentbox: --report r.json: disk full\nagentbox: -C /x does not exist\n" {
		t.Errorf("status %d, stderr %q", code, b.String())
	}
}

// TestPartsCarryRefusals: the helper's parts hold the report's
// refusals, and the client's report has them back.
func TestPartsCarryRefusals(t *testing.T) {
	rep := &sandbox.RunReport{Network: &sandbox.NetworkReport{Denied: []sandbox.NetworkDenied{{Host: "a.test", Port: 443, Reason: policy.ReasonNotAllowed, Count: 2}}},
		Filesystem: &sandbox.FilesystemReport{Denied: []sandbox.FilesystemDenied{{Op: "write", Path: "/etc/x", Count: 1}}, Unavailable: ""}}
	p := PartsOf(nil, rep)
	o := p.Outcome(nil, 0)
	if len(o.Report.Network.Denied) != 1 || o.Report.Network.Denied[0].Host != "a.test" || len(o.Report.Filesystem.Denied) != 1 || o.Report.Filesystem.Denied[0].Path != "/etc/x" {
		t.Errorf("report rebuilt: %+v %+v", o.Report.Network, o.Report.Filesystem)
	}
}
