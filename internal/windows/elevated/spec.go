package elevated

import "io"

// Spec is a command to run in the elevated sandbox.
type Spec struct {
	// Network selects the Online user (no firewall rules); false runs as
	// the Offline user, whose outbound traffic the firewall blocks.
	Network bool
	// ProxyPorts are the ports the run's allow-list proxy listens on
	// (nil without one): each must be among those setup left open on
	// 127.0.0.1, and Start then hands back the command's job
	// (Process.JobHandle) for the proxy's check of each connection.
	ProxyPorts []int
	// Path is the resolved executable, Args the command line (Args[0] is
	// what the command sees). CmdLine, when set, is used verbatim.
	Path    string
	Args    []string
	CmdLine string
	Dir     string
	Env     []string
	// SIDs are the synthetic sandbox SIDs to add as restricting SIDs (at
	// least one: the SID the writable roots are granted to). The writable
	// roots must also grant the sandbox group (setup.Login.GroupSID),
	// since the command runs as the sandbox user.
	SIDs []string
	// Stdin nil means no input (NUL). Stdout and Stderr nil discard.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}
