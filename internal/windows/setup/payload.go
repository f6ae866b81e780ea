package setup

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// PayloadVersion is the version of the request agentbox hands the elevated
// agentbox-setup on its command line.
const PayloadVersion = 2

// Modes of agentbox-setup.
const (
	ModeFull      = "full"       // users, secrets, firewall, runner, marker, then read grants
	ModeReadGrant = "read-grant" // the background read-grant pass only
	ModeCleanup   = "cleanup"    // remove everything
)

// Payload is what the unelevated agentbox asks the elevated agentbox-setup
// to do. The elevated process may run as another account (an
// administrator entering credentials at the UAC prompt), so everything it
// must know about the real user travels here rather than being read from
// its own environment.
type Payload struct {
	Version     int    `json:"version"`
	Mode        string `json:"mode"`
	RealUserSID string `json:"real_user_sid"`
	// Profile is the real user's profile directory (%USERPROFILE%).
	Profile string `json:"profile"`
	// Runner is the agentbox-runner.exe to install.
	Runner string `json:"runner,omitempty"`
	// ProxyPorts are loopback TCP ports to leave open for the Offline user.
	ProxyPorts []int `json:"proxy_ports,omitempty"`
	// ExtraReadRoots are more directories to grant read access on.
	ExtraReadRoots []string `json:"extra_read_roots,omitempty"`
	// RevokePaths (cleanup) are paths outside setup's own record that may
	// carry ACEs for the sandbox accounts: the writable roots agentbox
	// granted the sandbox group on, from the real user's state.
	RevokePaths []string `json:"revoke_paths,omitempty"`
	// LogID names the file the elevated process writes its report to
	// (started through the UAC prompt, it has no console the caller can
	// read): LogPath(BaseDir(), LogID), in the administrator-owned state
	// directory. Never a caller-chosen path: one in the user's %TEMP% (a
	// writable root of the sandbox) could be swapped for a link, and the
	// administrator would write wherever it points.
	LogID string `json:"log_id,omitempty"`
}

// Encode returns the payload as one command-line-safe argument
// (base64url of the JSON, so no quoting rules apply).
func (p *Payload) Encode() (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("setup payload: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// DecodePayload parses and validates an encoded payload.
func DecodePayload(s string) (*Payload, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("setup payload: %w", err)
	}
	p, err := decodeStrict[Payload](b, "setup payload")
	if err != nil {
		return nil, err
	}
	if p.Version != PayloadVersion {
		return nil, fmt.Errorf("setup payload version %d, this agentbox-setup speaks %d (mismatched binaries?)", p.Version, PayloadVersion)
	}
	switch p.Mode {
	case ModeFull, ModeReadGrant:
		if p.RealUserSID == "" || p.Profile == "" {
			return nil, fmt.Errorf("setup payload: mode %s needs real_user_sid and profile", p.Mode)
		}
	case ModeCleanup:
	default:
		return nil, fmt.Errorf("setup payload: unknown mode %q", p.Mode)
	}
	if p.LogID != "" && !ValidLogID(p.LogID) {
		return nil, fmt.Errorf("setup payload: bad log id %q", p.LogID)
	}
	if p.LogID != "" && !plainSID(p.RealUserSID) {
		// The SID goes into the log's SDDL.
		return nil, fmt.Errorf("setup payload: a log needs a plain real_user_sid, not %q", p.RealUserSID)
	}
	if p.Mode == ModeFull && p.Runner == "" {
		return nil, fmt.Errorf("setup payload: mode full needs the runner path")
	}
	for _, port := range p.ProxyPorts {
		if port < 1 || port > 65535 {
			return nil, fmt.Errorf("setup payload: proxy port %d out of range", port)
		}
	}
	return p, nil
}

// plainSID reports whether s is an S-1-... SID string and nothing more.
func plainSID(s string) bool {
	if len(s) < 5 || s[:4] != "S-1-" {
		return false
	}
	for _, c := range s[4:] {
		if !('0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
