package sandbox

import (
	"errors"
	"slices"
	"testing"
)

func TestCleanupStackOrder(t *testing.T) {
	var c cleanupStack
	var ran []int
	e1, e3 := errors.New("one"), errors.New("three")
	c.addErr(func() error { ran = append(ran, 1); return e1 })
	c.add(func() { ran = append(ran, 2) })
	c.addErr(func() error { ran = append(ran, 3); return e3 })
	err := c.run()
	if !slices.Equal(ran, []int{3, 2, 1}) {
		t.Errorf("steps ran in order %v, want last added first: [3 2 1]", ran)
	}
	if !errors.Is(err, e1) || !errors.Is(err, e3) {
		t.Errorf("run() = %v, want both steps' errors joined", err)
	}
	// Each step runs once: a second run has nothing left to do.
	ran = nil
	if err := c.run(); err != nil || len(ran) != 0 {
		t.Errorf("second run ran %v and returned %v, want nothing", ran, err)
	}
	c.add(func() { ran = append(ran, 4) })
	if c.run(); !slices.Equal(ran, []int{4}) {
		t.Errorf("a step added after a run: ran %v, want [4]", ran)
	}
}

// TestProcWaitReleasesThenReports: the report's sections are filled after
// every release step ran (a proxy's recorder is complete once it is
// closed), and a wait error still releases.
func TestProcWaitReleasesThenReports(t *testing.T) {
	p := newProc()
	closed := false
	p.cleanup.add(func() { closed = true })
	p.addReport(func(s *sections) {
		if !closed {
			t.Error("report ran before the release steps")
		}
		s.published = []NetworkPublished{{HostPort: 1, Port: 2, Count: 3}}
	})
	werr := errors.New("wait failed")
	p.wait = func() (*Status, error) { return &Status{Code: 1}, werr }
	if st, err := p.Wait(); st != nil || !errors.Is(err, werr) {
		t.Errorf("Wait() = %v, %v; want nil, the wait's error", st, err)
	}
	if !closed || len(p.sections.published) != 1 {
		t.Errorf("after a failed wait: released %v, sections %+v", closed, p.sections)
	}
	if p.sections.filesUnavailable == "" {
		t.Error("a backend that observes no file operations must say so")
	}
}
