package contract

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/policy"
)

// Flags are the sandbox's flags of `agentbox run` (and of mcp, doctor
// and setup), and their resolution into a policy: one parser for the
// CLI and for the resident helper resolving a lean client's run.
type Flags struct {
	mode          string
	cwd           string
	addDirs       []string
	publish       []string
	hostPorts     []string
	network       bool
	config        string
	allowDegraded bool
	allowGit      bool
	allowDomains  []string
	denyRead      []string
	allowRead     []string
	passEnv       []string
	// Timeout and Report are run's --timeout and --report (with
	// withRunOnly).
	Timeout time.Duration
	Report  string
	// Config is the config file Resolve read (nil: none).
	Config *policy.Config
}

// Register gives cmd the flags; withRunOnly adds --timeout and --report.
func (f *Flags) Register(cmd *cobra.Command, withRunOnly bool) {
	fs := cmd.Flags()
	fs.StringVarP(&f.mode, "sandbox", "s", "", "sandbox mode: read-only, workspace-write (default) or danger-full-access")
	fs.StringVarP(&f.cwd, "cd", "C", "", "workspace and working directory (default: the current directory)")
	fs.StringArrayVar(&f.addDirs, "add-dir", nil, "another writable root (repeatable)")
	fs.BoolVar(&f.network, "network", false, "allow network access")
	fs.StringArrayVar(&f.allowDomains, "allow-domain", nil, "allow egress to PATTERN only, through agentbox's proxy (repeatable: name, *.suffix, name:port, IP, CIDR)")
	fs.StringArrayVar(&f.publish, "publish", nil, "Linux: offer the command's listener on the sandbox's 127.0.0.1:INNER at the host's 127.0.0.1:PORT while it runs (PORT[:INNER], repeatable; [network] publish)")
	fs.StringArrayVar(&f.hostPorts, "host-port", nil, "Linux: let the command connect to the host's 127.0.0.1:PORT and [::1]:PORT, and no other host port (repeatable; [network] host_ports)")
	fs.StringVar(&f.config, "config", "", "config file (default: $XDG_CONFIG_HOME/agentbox/config.toml)")
	fs.BoolVar(&f.allowDegraded, "allow-degraded", false, "Linux: run with the guarantees this machine can give when user namespaces are unavailable")
	fs.BoolVar(&f.allowGit, "allow-git-writes", false, "let git write .git (commit, branch, stash), except what makes git run a program ([sandbox_workspace_write] allow_git_writes)")
	fs.StringArrayVar(&f.denyRead, "deny-read", nil, "hide PATH or glob from the command (repeatable; ~ is the home, a relative pattern matches under the workspace and every writable root)")
	fs.StringArrayVar(&f.allowRead, "allow-read", nil, "re-open one PATH the built-in list or deny_read hides (repeatable)")
	fs.StringArrayVar(&f.passEnv, "env", nil, "pass the environment variable NAME although it looks secret or the config withholds it (repeatable)")
	if withRunOnly {
		fs.DurationVar(&f.Timeout, "timeout", 0, "kill the command and everything it started after this long (e.g. 30s, 5m)")
		fs.StringVar(&f.Report, "report", "", "write a JSON run report (exit code, network destinations allowed and refused) to FILE")
	}
}

// RegisterRun gives cmd the run command's flags, as `agentbox run`
// parses them: everything after the command belongs to it, flags
// included.
func (f *Flags) RegisterRun(cmd *cobra.Command) {
	cmd.Flags().SetInterspersed(false)
	f.Register(cmd, true)
}

// ReadOnly is f with -s read-only.
func (f *Flags) ReadOnly() *Flags {
	ro := *f
	ro.mode = string(policy.ReadOnly)
	return &ro
}

// ResidentOff reports whether the config Resolve read switches the
// resident helper off ([linux] resident = false).
func (f *Flags) ResidentOff() bool {
	return f.Config != nil && f.Config.Linux.Resident != nil && !*f.Config.Linux.Resident
}

// Resolve builds the policy from the flags cmd parsed and the config,
// for the process c describes (this one when c is empty: a server
// resolving on a client's behalf passes the client's, see
// [policy.ResolveFor]). Its errors are agentbox's failures (125).
func (f *Flags) Resolve(cmd *cobra.Command, c policy.Caller) (*policy.Policy, error) {
	getenv := c.Env()
	// An empty path would silently mean the current directory: a writable
	// root nobody asked for.
	for _, d := range f.addDirs {
		if d == "" {
			return nil, errors.New("--add-dir: empty path (name a directory)")
		}
	}
	if cmd.Flags().Changed("cd") && f.cwd == "" {
		return nil, errors.New("-C/--cd: empty path (name a directory, or leave the flag out for the current directory)")
	}
	if cmd.Flags().Changed("config") && f.config == "" {
		return nil, errors.New("--config: empty path (name a file, or leave the flag out for the default config)")
	}
	// Not filepath.Abs: it would cancel "link/../x" textually while
	// the kernel, opening the file, follows the link first.
	configPath := f.config
	if configPath != "" && !filepath.IsAbs(configPath) {
		d, err := c.Wd()
		if err != nil {
			return nil, fmt.Errorf("current directory: %v", err)
		}
		configPath = d + string(filepath.Separator) + configPath
	}
	var cfg *policy.Config
	if configPath != "" {
		// Opened as named here (messages name it so), from the
		// client's directory for a client.
		load := f.config
		if c.Dir != "" {
			load = configPath
		}
		c, err := policy.LoadConfig(load)
		if err != nil {
			return nil, err
		}
		cfg = c
	} else if path := agentdirs.Config(getenv); path != "" {
		c, err := policy.LoadConfig(path)
		switch {
		case err == nil:
			cfg = c
		case errors.Is(err, os.ErrNotExist):
		default:
			return nil, err
		}
	}
	f.Config = cfg
	o := policy.Options{Mode: policy.Mode(f.mode), Cwd: f.cwd, AddDirs: f.addDirs, Config: cfg, AllowDomains: f.allowDomains,
		DenyRead: f.denyRead, AllowRead: f.allowRead, PassEnv: f.passEnv}
	// A --config file decides how the next command is sandboxed too; the
	// default config and state directories are protected by Resolve.
	if configPath != "" {
		o.ExtraProtected = append(o.ExtraProtected, configPath)
	}
	if cmd.Flags().Changed("network") {
		o.Network = &f.network
	}
	o.Publish, o.HostPorts = f.publish, f.hostPorts
	if cmd.Flags().Changed("allow-degraded") {
		o.AllowDegraded = &f.allowDegraded
	}
	if cmd.Flags().Changed("allow-git-writes") {
		o.AllowGitWrites = &f.allowGit
	}
	return policy.ResolveFor(o, c)
}
