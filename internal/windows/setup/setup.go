// Package setup is agentbox's one-time, elevated preparation of a Windows
// machine for the elevated sandbox, and its undoing.
//
// agentbox-setup (its own executable, the only one with a
// requireAdministrator manifest) runs [Main]. It creates the sandbox users
// AgentboxSandboxOffline and AgentboxSandboxOnline and their group, with
// fresh crypto/rand passwords on every run, stores the passwords
// DPAPI-encrypted where the sandbox users cannot read them, makes the
// firewall block all outbound traffic of the Offline user (and of no other
// account), copies agentbox-runner where the sandbox users can run it but
// not replace it, grants the sandbox group read access to the user's tools
// and profile (minus credential stores) in the background, and writes a
// versioned marker. [Cleanup] removes all of it.
//
// # State
//
// Everything lives under %ProgramData%\agentbox (machine-wide, like the
// users and the firewall rules): state\ (marker, granted paths, progress;
// readable by everyone), secrets\ (the encrypted passwords; the sandbox
// group is denied) and bin\ (the runner; writable by administrators only).
//
// The formats, the firewall rules, the payload that carries the request to
// the elevated process and the read-grant plan are platform-free and
// tested on every OS; the Win32 calls live in the _windows files.
package setup

import "errors"

// Version is the setup version. Bump it whenever what setup puts on the
// machine changes; agentbox then refuses elevated runs until setup is
// re-run ([ErrOutdated]).
//
// Version 3: the Offline user may reach TCP 127.0.0.1 on a fixed range of
// proxy ports (the marker's ProxyPorts, by default loopguard's), and no
// other loopback address or port; the runner reports its job's handle.
const Version = 3

// Names of what setup creates.
const (
	OfflineUser = "AgentboxSandboxOffline"
	OnlineUser  = "AgentboxSandboxOnline"
	Group       = "AgentboxSandboxUsers"
)

// Layout under the base directory (%ProgramData%\agentbox).
const (
	StateDir    = `state`
	SecretsDir  = `secrets`
	BinDir      = `bin`
	MarkerFile  = `state\setup.json`
	GrantsFile  = `state\grants.json`
	ProgressLog = `state\read-grants.log`
	LogsDir     = `logs`
	CredsFile   = `secrets\users.json`
	RunnerName  = `agentbox-runner.exe`
	SetupName   = `agentbox-setup.exe`
)

// Exit codes of agentbox-setup, so the unelevated side can tell outcomes
// apart without parsing text.
const (
	ExitOK      = 0
	ExitFailed  = 1
	ExitUsage   = 2
	ExitPartial = 3 // cleanup: some items could not be removed
)

var (
	// ErrMissing means elevated setup never ran (or was cleaned up).
	ErrMissing = errors.New("elevated sandbox is not set up: run `agentbox setup` (it asks for administrator rights once)")
	// ErrOutdated means setup ran with an older (or newer) agentbox.
	ErrOutdated = errors.New("elevated sandbox setup is outdated: run `agentbox setup` again")
	// ErrCancelled is returned when the user declined the UAC prompt.
	ErrCancelled = errors.New("agentbox setup was cancelled at the administrator prompt")
)

// ValidLogID reports whether id can name a setup log: 32 lowercase hex
// digits (16 random bytes), so it can never make a path reach elsewhere.
func ValidLogID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// LogPath is where agentbox-setup writes the report of the run whose
// payload has LogID id: base\logs\setup-<id>.log.
func LogPath(base, id string) string {
	return base + `\` + LogsDir + `\setup-` + id + `.log`
}

// logSDDL is the setup log's security descriptor: the administrators and
// SYSTEM own it; the real user may read it and delete it (agentbox reads
// the report, then removes it).
func logSDDL(realUserSID string) string {
	return "O:BAD:P(A;;FA;;;SY)(A;;FA;;;BA)(A;;0x130089;;;" + realUserSID + ")"
}
