package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/contract"
	"github.com/agentbox/agentbox/internal/mcpserver"
	"github.com/agentbox/agentbox/policy"
	"github.com/agentbox/agentbox/sandbox"
)

func newMCP(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var f contract.Flags
	cmd := &cobra.Command{
		Use:   "mcp [flags]",
		Short: "Serve MCP on stdin/stdout: one sandbox session, tool \"run\"",
		Long: `agentbox mcp is an MCP server (JSON-RPC 2.0 over stdio) for agents that
call tools: it prepares the sandbox once, from the same flags and config as
'agentbox run', and offers one tool, "run", with input
{"command": [argv...], "cwd"?: string, "stdin"?: string,
"timeout_seconds"?: number, "request_permissions"?: {"add_dirs": [...],
"allow_domains": [...], "reason": string}}; cwd is a directory inside the
workspace (relative to it, or absolute). request_permissions is granted
only by the user, asked through the client (MCP elicitation), for the call
or the rest of the session.
Each call runs as isolated as one 'agentbox run'. --timeout is the default
for calls that give none.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.Timeout < 0 {
				return failure("--timeout %v is negative", f.Timeout)
			}
			// Before anything reads stdin: an MCP client that started
			// the server in a directory that confines nothing (Claude
			// Desktop starts them in /) learns it from the exit.
			pol, err := resolve(&f, cmd)
			var re *policy.RootError
			if errors.As(err, &re) && !cmd.Flags().Changed("cd") && strings.HasPrefix(re.What, "workspace") {
				return failure("%w; agentbox mcp runs in the directory its client starts it in: add -C DIR (the project) to the server's arguments in the client's configuration", err)
			}
			if err != nil {
				return err
			}
			s, err := sandbox.NewSession(pol)
			if err != nil {
				var se *sandbox.StartError
				if errors.As(err, &se) {
					return &exitError{code: se.Code, err: se.Err}
				}
				return failure("%v", err)
			}
			defer s.Close()
			// A harness stops its server with a signal or by closing
			// stdin; either way the session ends with every command.
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			// A client that closed our stdout is a failed write, said
			// on stderr, not a SIGPIPE that kills us silently (caught,
			// not ignored: the sandbox's commands get the default).
			signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
			if err := mcpserver.Serve(ctx, s, stdin, stdout, mcpserver.Options{Version: version(), DefaultTimeout: f.Timeout}); err != nil {
				return failure("mcp: %v", err)
			}
			return nil
		},
	}
	f.Register(cmd, true)
	return cmd
}
