package contract

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agentbox/agentbox/internal/exitcode"
	"github.com/agentbox/agentbox/internal/fsreport"
	"github.com/agentbox/agentbox/internal/netproxy"
	"github.com/agentbox/agentbox/policy"
	"github.com/agentbox/agentbox/sandbox"
)

// Outcome is the end of one run, however it ran: what the exit status,
// the lines agentbox adds to stderr and the report are made of.
type Outcome struct {
	// Code is the exit status: the command's, 128+N when signal N
	// ended it, 125/126/127 when agentbox failed to run it.
	Code int
	// TimedOut: the run's timeout (Timeout) killed the command.
	TimedOut bool
	Timeout  time.Duration
	// Failure is agentbox's own failure (a start or a wait that
	// failed); nil when the command ran to its end.
	Failure error
	// Notes are the run's notes not yet written (the post-run checks'
	// lines a helper collected); a run in this process wrote its own.
	Notes string
	// Report is the run report; never nil.
	Report *sandbox.RunReport
}

// Of is the outcome of a sandbox.Cmd that ran in this process under pol:
// err is what its Start, Wait or Run returned, rep its Report (nil when
// it has none; a report of pol and the status stands in).
func Of(pol *policy.Policy, timeout time.Duration, err error, rep *sandbox.RunReport) *Outcome {
	o := &Outcome{Timeout: timeout, Report: rep}
	var ee *sandbox.ExitError
	var se *sandbox.StartError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		o.Code, o.TimedOut = ee.ExitCode(), ee.TimedOut
	case errors.As(err, &se):
		o.Code, o.Failure = se.Code, se.Err
	default:
		o.Code, o.Failure = exitcode.SandboxFailure, err
	}
	if o.Report == nil {
		o.Report = sandbox.NewRunReport(pol, o.Code)
	}
	return o
}

// Parts is an outcome as the resident helper collects it from a
// session's command, its refusals capped to what a reply carries: the
// status by its parts and the report's refusals.
type Parts struct {
	Code     int  `json:"code,omitempty"`
	Signal   int  `json:"signal,omitempty"`
	TimedOut bool `json:"timed_out,omitempty"`
	// Failed is set when the command's end could not be learnt
	// (agentbox's own failure, 125).
	Failed string `json:"failed,omitempty"`
	// Diag is the run's notes for stderr (git-writes checks).
	Diag string `json:"diag,omitempty"`
	// Denied is what the network refused the command (with the network
	// off: the names it looked up, the hosts it asked the proxy for).
	Denied []netproxy.Denied `json:"denied,omitempty"`
	// Files is what the sandbox refused the command's file operations;
	// FilesUnavailable says why nothing was observed (the run report's
	// "filesystem" section).
	Files            []fsreport.Denied `json:"files,omitempty"`
	FilesUnavailable string            `json:"files_unavailable,omitempty"`
}

// PartsOf is the Parts of a sandbox.Cmd's Wait error err and Report rep,
// for a client to rebuild the outcome with [Parts.Outcome].
func PartsOf(err error, rep *sandbox.RunReport) Parts {
	var p Parts
	var ee *sandbox.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		p.Code, p.Signal, p.TimedOut = ee.Code, ee.Signal, ee.TimedOut
	default:
		p.Failed = err.Error()
	}
	if rep != nil && rep.Network != nil {
		for _, d := range rep.Network.Denied {
			p.Denied = append(p.Denied, netproxy.Denied(d))
		}
	}
	if rep != nil && rep.Filesystem != nil {
		for _, d := range rep.Filesystem.Denied {
			p.Files = append(p.Files, fsreport.Denied(d))
		}
		p.FilesUnavailable = rep.Filesystem.Unavailable
	}
	return p
}

// Outcome is the outcome p carries, for a run of pol with timeout.
func (p *Parts) Outcome(pol *policy.Policy, timeout time.Duration) *Outcome {
	o := &Outcome{Code: p.Code, TimedOut: p.TimedOut, Timeout: timeout, Notes: p.Diag}
	switch {
	case p.Failed != "":
		o.Code, o.Failure = exitcode.SandboxFailure, errors.New(p.Failed)
	case p.Signal != 0:
		o.Code = 128 + p.Signal
	}
	o.Report = sandbox.NewRunReport(pol, o.Code)
	for _, d := range p.Denied {
		o.Report.Network.Denied = append(o.Report.Network.Denied, sandbox.NetworkDenied(d))
	}
	o.Report.SetFilesystem(p.Files, p.FilesUnavailable)
	o.Report.SetSuggest()
	return o
}

// Finish writes what agentbox adds to the command's stderr once the run
// is over, in this order: the notes, the refusals, a failure to save the
// report, the timeout, agentbox's own failure; and returns the exit
// status. save stores the report (nil: nowhere); its error names where.
func (o *Outcome) Finish(stderr io.Writer, save func(*sandbox.RunReport) error) int {
	io.WriteString(stderr, o.Notes)
	WriteRefusals(stderr, o.Report)
	if save != nil {
		if err := save(o.Report); err != nil {
			fmt.Fprintf(stderr, "agentbox: %v\n", err)
		}
	}
	if o.TimedOut {
		fmt.Fprintf(stderr, "agentbox: command timed out after %v and was killed with everything it started\n", o.Timeout)
	}
	if o.Failure != nil {
		fmt.Fprintf(stderr, "agentbox: %s\n", FlagNames(o.Failure.Error()))
	}
	return o.Code
}
