package sandbox

import (
	"errors"
	"os"
	"runtime"
	"sync"

	"github.com/agentbox/agentbox/internal/fsreport"
	"github.com/agentbox/agentbox/internal/netproxy"
)

// proc is a started command, for every backend and run path: the
// backend's wait, signal, kill and pid, what the run holds (a stack of
// release steps), and the report's sections as data. A run path that
// holds more than its backend (a session's prepared sandbox, say) pushes
// a step of its own instead of wrapping the process, so there is no
// wrapper to forget a report section or a release.
type proc struct {
	// wait blocks until the command and its whole tree are gone.
	wait   func() (*Status, error)
	signal func(os.Signal) error
	// kill ends the whole tree at once.
	kill func() error
	// pid is Process.Pid.
	pid int

	// cleanup releases what the run holds, once it has ended, or when
	// Start fails after the backend took something.
	cleanup cleanupStack
	// reports fill sections once the command has ended and cleanup
	// has run (a proxy's recorder is complete once the proxy is
	// closed), in the order added; see addReport.
	reports  []func(*sections)
	sections sections
}

// sections are the report's parts a backend observes.
type sections struct {
	network   netproxy.Report    // what the proxy, name server and connect supervisor saw
	published []NetworkPublished // the published ports' connections
	// files are the refused file operations; filesUnavailable says why
	// they were not observed, when they were not.
	files            []fsreport.Denied
	filesUnavailable string
}

func newProc() *proc {
	return &proc{sections: sections{filesUnavailable: "refused file operations are not observed on " + runtime.GOOS}}
}

// Wait waits for the command, then releases what the run held and fills
// the report's sections. The release steps' errors are joined to the
// wait's.
func (p *proc) Wait() (*Status, error) {
	st, err := p.wait()
	if cerr := p.cleanup.run(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	for _, f := range p.reports {
		f(&p.sections)
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// addReport adds f to what fills the report's sections: a backend and a
// part of the run it did not start itself (a proxy) each add their own,
// and none replaces another's.
func (p *proc) addReport(f func(*sections)) { p.reports = append(p.reports, f) }

func (p *proc) Signal(sig os.Signal) error { return p.signal(sig) }
func (p *proc) Kill() error                { return p.kill() }

// cleanupStack is an ordered stack of release steps: the last added runs
// first (what was taken last depends on what was taken before it), each
// runs once, and their errors are joined.
type cleanupStack struct {
	mu    sync.Mutex
	steps []func() error
}

// add pushes a step that cannot fail (the Release methods).
func (c *cleanupStack) add(f func()) { c.addErr(func() error { f(); return nil }) }

// addErr pushes a step whose error run reports.
func (c *cleanupStack) addErr(f func() error) {
	c.mu.Lock()
	c.steps = append(c.steps, f)
	c.mu.Unlock()
}

// run runs the steps added so far, last first, and forgets them: a
// second run runs only the steps added since.
func (c *cleanupStack) run() error {
	c.mu.Lock()
	steps := c.steps
	c.steps = nil
	c.mu.Unlock()
	var errs []error
	for i := len(steps) - 1; i >= 0; i-- {
		errs = append(errs, steps[i]())
	}
	return errors.Join(errs...)
}
