package sandbox

import "github.com/agentbox/agentbox/internal/windows/unelevated"

// stateDir is %LOCALAPPDATA%\agentbox, where the synthetic SIDs and the
// record of granted paths live.
func stateDir() string {
	d, err := unelevated.StateDir()
	if err != nil {
		return ""
	}
	return d
}
