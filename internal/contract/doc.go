// Package contract is what `agentbox run` means, for every path a
// command takes (the CLI's lone run, the resident helper answering a
// lean client, the MCP server): its flags become a policy ([Flags]), and
// a run's outcome becomes one exit status (DESIGN.md: the command's, 128+N for
// signal N, 125/126/127 for agentbox's failures), the lines agentbox adds
// to the command's stderr (the run's notes, the refusals, the timeout,
// agentbox's own failure) and the run report ([ReportFile]), written
// once here.
package contract
