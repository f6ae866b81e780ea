package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/agentbox/agentbox/policy"
	"github.com/agentbox/agentbox/sandbox"
)

// reportFile is the --report FILE, opened before the command starts and
// written through that descriptor afterwards: a command that replaces the
// path with a symlink meanwhile (it may lie in the workspace) cannot make
// agentbox write anywhere else.
type reportFile struct {
	f    *os.File
	path string
}

func openReport(path string) (*reportFile, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, failure("--report: %v", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, failure("--report %s: not a regular file", path)
	}
	return &reportFile{f: f, path: path}, nil
}

func (r *reportFile) Close() {
	if r != nil {
		r.f.Close()
	}
}

// save writes rep to the file (nothing without one); its error names
// the file.
func (r *reportFile) save(rep *sandbox.RunReport) error {
	if r == nil {
		return nil
	}
	if err := r.write(rep); err != nil {
		return fmt.Errorf("--report %s: %w", r.path, err)
	}
	return nil
}

func (r *reportFile) write(rep *sandbox.RunReport) error {
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

// failed writes the report of a run that did not start.
func (r *reportFile) failed(pol *policy.Policy, err error) {
	if r == nil {
		return
	}
	code := sandbox.CodeSandboxFailure
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	r.write(sandbox.NewRunReport(pol, code))
}
