package cli

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/install"
)

// installFlags are install's and uninstall's flags.
type installFlags struct {
	scope   string
	dryRun  bool
	command string
	dir     string
}

func newInstall(stdout io.Writer, remove bool) *cobra.Command {
	var f installFlags
	use, short := "install", "Add agentbox to an agent's configuration (MCP server, shell routed or off)"
	if remove {
		use, short = "uninstall", "Take out what 'agentbox install' added to an agent's configuration"
	}
	cmd := &cobra.Command{
		Use:       use + " claude|codex|gemini|cursor",
		Short:     short,
		Args:      cobra.ExactArgs(1),
		ValidArgs: install.Agents,
		Long: short + `.

claude: the MCP server (~/.claude.json, or .mcp.json) and a PreToolUse hook
        on the Bash tool (~/.claude/settings.json, or .claude/settings.json)
        that rewrites every command to run under 'agentbox run'.
codex:  [mcp_servers.agentbox] and features.shell_tool = false,
        features.unified_exec = false in ~/.codex/config.toml (or
        .codex/config.toml).
gemini: the MCP server and run_shell_command in tools.exclude in
        ~/.gemini/settings.json (or .gemini/settings.json), and a policy
        file denying run_shell_command (policies/agentbox.toml beside it).
cursor: the MCP server in ~/.cursor/mcp.json (or .cursor/mcp.json) and a
        beforeShellExecution hook in hooks.json beside it that refuses
        Cursor's own shell, pointing the model at agentbox's run tool.

Files are merged: the rest stays as it was, the previous file is kept
beside it as FILE` + install.BackupSuffix + `, and uninstall removes exactly
what install added.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o := install.Options{Agent: args[0], Scope: install.Scope(f.scope), Getenv: os.Getenv}
			home, err := os.UserHomeDir()
			if err != nil {
				return failure("home directory: %v", err)
			}
			o.Home = home
			if o.Scope == install.Project {
				d := f.dir
				if d == "" {
					if d, err = os.Getwd(); err != nil {
						return failure("current directory: %v", err)
					}
				}
				if o.Project, err = filepath.Abs(d); err != nil {
					return failure("%v", err)
				}
			} else if cmd.Flags().Changed("cd") {
				return failure("-C/--cd names the project: use it with --scope project")
			}
			if !remove {
				if o.Command, err = agentboxCommand(f.command); err != nil {
					return err
				}
			}
			changes, err := install.Plan(o, remove, os.ReadFile)
			if err != nil {
				return failure("%s %s: %v", use, o.Agent, err)
			}
			if o.Scope == install.Project {
				if err := install.Confined(o.Project, changes); err != nil {
					return failure("%s %s: %v (nothing was changed)", use, o.Agent, err)
				}
			}
			if len(changes) == 0 {
				if remove {
					fmt.Fprintf(stdout, "agentbox: nothing of agentbox's in %s's %s configuration\n", o.Agent, o.Scope)
				} else {
					fmt.Fprintf(stdout, "agentbox: %s's %s configuration already has agentbox\n", o.Agent, o.Scope)
				}
				return nil
			}
			if f.dryRun {
				for _, c := range changes {
					io.WriteString(stdout, install.Diff(c))
				}
				return nil
			}
			if err := install.Apply(changes); err != nil {
				return failure("%s %s: %v", use, o.Agent, err)
			}
			for _, c := range changes {
				fmt.Fprintf(stdout, "agentbox: %s: %s\n", c.Path, c.Note)
				if c.Backup != "" {
					fmt.Fprintf(stdout, "agentbox:   the previous file is in %s\n", c.Backup)
				}
			}
			if !remove {
				fmt.Fprintf(stdout, "agentbox: restart %s to load it\n", o.Agent)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.scope, "scope", "user", "whose configuration: user (your home, every project) or project (the project directory)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "print the changes as a unified diff and write nothing")
	fs.StringVarP(&f.dir, "cd", "C", "", "the project directory, for --scope project (default: the current directory)")
	if !remove {
		fs.StringVar(&f.command, "command", "", "the agentbox program the agent runs (default: this one's absolute path)")
	}
	return cmd
}

// agentboxCommand is the agentbox program to write into configurations:
// flag as given, else this executable's absolute path.
func agentboxCommand(flag string) (string, error) {
	if flag != "" {
		if strings.ContainsRune(flag, 0) || strings.ContainsAny(flag, "\n\r") {
			return "", failure("--command: a program name cannot hold NUL or a newline")
		}
		return flag, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", failure("cannot find this program's path (%v): name it with --command", err)
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	return exe, nil
}

// newHook is `agentbox hook claude-pretooluse`, the command Claude Code's
// PreToolUse hook runs. Its contract with Claude Code is the JSON it
// prints; any failure of its own exits 2, which Claude Code treats as
// "block the tool call", never as "run it".
func newHook(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	hook := &cobra.Command{
		Use:    "hook",
		Short:  "Hooks agents call (see 'agentbox install')",
		Hidden: true,
	}
	var ask bool
	pre := &cobra.Command{
		Use:   "claude-pretooluse",
		Short: "Claude Code PreToolUse hook: rewrite a Bash command to run under agentbox",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			self, err := agentboxCommand("")
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			shell := "/bin/sh"
			if p, err := exec.LookPath("bash"); err == nil {
				if abs, err := filepath.Abs(p); err == nil {
					shell = abs
				}
			}
			// Bounded: a hook input is a tool call, not a file.
			in, err := io.ReadAll(io.LimitReader(stdin, 16<<20))
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("hook: reading stdin: %w", err)}
			}
			out := install.ClaudePreToolUse(in, install.HookEnv{
				Agentbox:   self,
				Shell:      shell,
				ProjectDir: os.Getenv("CLAUDE_PROJECT_DIR"),
				Ask:        ask,
			})
			if _, err := stdout.Write(out); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("hook: writing the answer: %w", err)}
			}
			return nil
		},
	}
	pre.Flags().BoolVar(&ask, "ask", false, "answer \"ask\" (Claude Code prompts, showing the rewritten command) instead of \"allow\"")
	cursor := &cobra.Command{
		Use:   "cursor-beforeshell",
		Short: "Cursor beforeShellExecution hook: refuse Cursor's own shell, pointing at agentbox's run tool",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			in, _ := io.ReadAll(io.LimitReader(stdin, 16<<20))
			if _, err := stdout.Write(install.CursorBeforeShell(in)); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("hook: writing the answer: %w", err)}
			}
			return nil
		},
	}
	hook.AddCommand(pre, cursor)
	return hook
}
