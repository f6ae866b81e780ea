package contract

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/agentbox/agentbox/policy"
	"github.com/agentbox/agentbox/sandbox"
)

// ReportFile is the --report FILE, opened before the command starts and
// written through that descriptor afterwards: a command that replaces the
// path with a symlink meanwhile (it may lie in the workspace) cannot make
// agentbox write anywhere else. The resident helper writes a lean
// client's through the descriptor the client opened and passed.
type ReportFile struct {
	f    *os.File
	path string
}

// OpenReport opens path as `agentbox run --report` does; nil for "".
func OpenReport(path string) (*ReportFile, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--report: %w", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("--report %s: not a regular file", path)
	}
	return &ReportFile{f: f, path: path}, nil
}

// ReportTo is the report file path that another process opened as f.
func ReportTo(f *os.File, path string) *ReportFile { return &ReportFile{f: f, path: path} }

// Close closes the file (nothing without one).
func (r *ReportFile) Close() {
	if r != nil {
		r.f.Close()
	}
}

// Save writes rep to the file (nothing without one); its error names
// the file.
func (r *ReportFile) Save(rep *sandbox.RunReport) error {
	if r == nil {
		return nil
	}
	if err := r.write(rep); err != nil {
		return fmt.Errorf("--report %s: %w", r.path, err)
	}
	return nil
}

func (r *ReportFile) write(rep *sandbox.RunReport) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if err := r.f.Truncate(0); err != nil {
		return err
	}
	if _, err := r.f.WriteAt(b, 0); err != nil {
		return err
	}
	return r.f.Sync()
}

// Failed writes the report of a run of pol (nil: none resolved) that
// did not start and exits with code.
func (r *ReportFile) Failed(pol *policy.Policy, code int) {
	if r == nil {
		return
	}
	r.write(sandbox.NewRunReport(pol, code))
}
