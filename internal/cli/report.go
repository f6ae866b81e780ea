package cli

import (
	"errors"

	"github.com/agentbox/agentbox/internal/contract"
	"github.com/agentbox/agentbox/sandbox"
)

// openReport is contract.OpenReport, its error the CLI's 125.
func openReport(path string) (*contract.ReportFile, error) {
	rep, err := contract.OpenReport(path)
	if err != nil {
		return nil, failure("%w", err)
	}
	return rep, nil
}

// reportFailed writes the report of a run that did not start, with the
// status err gives.
func reportFailed(rep *contract.ReportFile, err error) {
	code := sandbox.CodeSandboxFailure
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	rep.Failed(nil, code)
}
