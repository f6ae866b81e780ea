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
const Version = 1

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
