package setup

// Options tune [Run].
type Options struct {
	// ProxyPorts are loopback TCP ports to leave open to the Offline user
	// for the allow-list proxy; nil closes loopback too.
	ProxyPorts []int
	// ExtraReadRoots are directories beyond the profile and the system
	// roots that the sandbox users must be able to read.
	ExtraReadRoots []string
	// SetupExe and RunnerExe override where agentbox-setup.exe and
	// agentbox-runner.exe are found (default: next to the running
	// executable).
	SetupExe, RunnerExe string
}

// Login is what agentbox needs to start agentbox-runner as a sandbox user.
type Login struct {
	User, SID, Password string
	// GroupSID is the sandbox group, which must be granted write on the
	// writable roots (the runner's token is the sandbox user's, not the
	// real user's).
	GroupSID string
	// Runner is the agentbox-runner copy the sandbox users can execute.
	Runner string
}
