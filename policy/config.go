package policy

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/codexprofile"
	"github.com/pelletier/go-toml/v2"
)

// Config mirrors config.toml. Pointer fields distinguish "absent" from the
// zero value so that defaults, the config and Options layer correctly.
type Config struct {
	SandboxMode           *string               `toml:"sandbox_mode"`
	SandboxWorkspaceWrite WorkspaceWriteSection `toml:"sandbox_workspace_write"`
	Windows               WindowsSection        `toml:"windows"`
	Linux                 LinuxSection          `toml:"linux"`
	Network               NetworkSection        `toml:"network"`
	Filesystem            FilesystemSection     `toml:"filesystem"`
	// ShellEnvironmentPolicy is Codex's [shell_environment_policy].
	ShellEnvironmentPolicy ShellEnvSection `toml:"shell_environment_policy"`

	// DefaultPermissions and Permissions are Codex's permission-profile
	// language (default_permissions, [permissions.NAME]), read as Codex
	// documents it by internal/codexprofile; a file uses it or
	// sandbox_mode and [sandbox_workspace_write], not both.
	DefaultPermissions *string        `toml:"default_permissions"`
	Permissions        map[string]any `toml:"permissions"`

	// Path is the file the config was read from, for error messages.
	Path string `toml:"-"`

	// profile is the selected permission profile, translated.
	profile *codexprofile.Plan
}

// WorkspaceWriteSection is [sandbox_workspace_write].
type WorkspaceWriteSection struct {
	WritableRoots       []string `toml:"writable_roots"`
	NetworkAccess       *bool    `toml:"network_access"`
	ExcludeTmpdirEnvVar *bool    `toml:"exclude_tmpdir_env_var"`
	ExcludeSlashTmp     *bool    `toml:"exclude_slash_tmp"`
	// ShareSlashTmp makes the host's /tmp and $TMPDIR (%TEMP%) writable
	// roots of the command, as they were before agentbox gave each
	// workspace private ones (see [PrivateTemp]).
	ShareSlashTmp *bool `toml:"share_slash_tmp"`
	// ProtectedSubpaths replaces the default list of names kept read-only
	// inside every writable root ([DefaultProtectedNames]).
	ProtectedSubpaths []string `toml:"protected_subpaths"`
	// AllowUnixSockets are absolute paths of unix sockets outside the
	// sandbox that the command may connect to all the same (a daemon the
	// user deliberately hands it, such as /run/docker.sock); Linux.
	AllowUnixSockets []string `toml:"allow_unix_sockets"`
	// AllowGitWrites opens each .git directory for writing except what
	// makes git run a program or read another repository (the list is
	// in the README, "Git writes").
	AllowGitWrites *bool `toml:"allow_git_writes"`
	// ToolCaches is "overlay", "private" or "off"; see [ToolCacheMode].
	ToolCaches *string `toml:"tool_caches"`
}

// FilesystemSection is [filesystem], agentbox's addition: what the
// command must not read, in every mode.
type FilesystemSection struct {
	// DenyRead are paths or globs: "~" is the home, a relative pattern
	// matches under the workspace and every writable root, "*" matches
	// a leading dot, "**" any number of directories.
	DenyRead []string `toml:"deny_read"`
	// AllowRead re-open paths the rules hide, one path each.
	AllowRead []string `toml:"allow_read"`
	// DefaultDenyRead = false drops the built-in list of credential
	// files (internal/secrets; `agentbox doctor` prints it).
	DefaultDenyRead *bool `toml:"default_deny_read"`
	// GlobScanMaxDepth bounds how deep "**" reaches (Codex's key of the
	// same name); a tree deeper than that under a "**" pattern fails
	// the run rather than leave a match unhidden.
	GlobScanMaxDepth *int `toml:"glob_scan_max_depth"`
}

// ShellEnvSection is [shell_environment_policy], with Codex's keys and
// meaning; agentbox's default excludes are its secret-name patterns.
type ShellEnvSection struct {
	Inherit               *string           `toml:"inherit"` // all | core | none
	IgnoreDefaultExcludes *bool             `toml:"ignore_default_excludes"`
	Exclude               []string          `toml:"exclude"`
	IncludeOnly           []string          `toml:"include_only"`
	Set                   map[string]string `toml:"set"`
}

// WindowsSection is [windows].
type WindowsSection struct {
	Sandbox *string `toml:"sandbox"`
}

// LinuxSection is [linux].
type LinuxSection struct {
	// AllowDegraded opts into running with Landlock and seccomp only when
	// user namespaces are unavailable, accepting the guarantees that lost.
	AllowDegraded *bool `toml:"allow_degraded"`
	// Resident = false keeps `agentbox run` from using (and starting)
	// the per-user resident helper that holds prepared sandboxes; every
	// run then builds its own. It changes no confinement.
	Resident *bool `toml:"resident"`
}

// DefaultConfigPath returns the config file agentbox's CLI reads when
// none is named: $XDG_CONFIG_HOME/agentbox/config.toml (or
// ~/.config/agentbox/config.toml) on Unix,
// %APPDATA%\agentbox\config.toml on Windows; "" when the environment
// names no such place.
func DefaultConfigPath() string { return agentdirs.Config(os.Getenv) }

// LoadConfig reads and strictly validates a config file. Unknown keys, wrong
// types and invalid values are errors naming the key and the file.
func LoadConfig(path string) (*Config, error) {
	// A FIFO or device given as the config would block or never end.
	if fi, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("config %s: not a regular file", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return ParseConfig(path, data)
}

// ParseConfig is LoadConfig on bytes already read; path is used in messages.
func ParseConfig(path string, data []byte) (*Config, error) {
	var c Config
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, configError(path, err)
	}
	c.Path = path
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) validate() error {
	if c.SandboxMode != nil {
		if _, err := ParseMode(*c.SandboxMode); err != nil {
			return fmt.Errorf("config %s: key sandbox_mode: %w", c.Path, err)
		}
	}
	if c.Windows.Sandbox != nil {
		if _, err := ParseWindowsSandbox(*c.Windows.Sandbox); err != nil {
			return fmt.Errorf("config %s: key windows.sandbox: %w", c.Path, err)
		}
	}
	if v := c.SandboxWorkspaceWrite.ToolCaches; v != nil {
		if _, err := ParseToolCacheMode(*v); err != nil {
			return fmt.Errorf("config %s: key sandbox_workspace_write.tool_caches: %w", c.Path, err)
		}
	}
	for _, r := range c.SandboxWorkspaceWrite.WritableRoots {
		if r == "" {
			return fmt.Errorf("config %s: key sandbox_workspace_write.writable_roots: empty path", c.Path)
		}
	}
	if err := c.Network.validate(c.Path); err != nil {
		return err
	}
	if err := c.validateSecrets(); err != nil {
		return err
	}
	if err := c.validateProfile(); err != nil {
		return err
	}
	for _, p := range c.SandboxWorkspaceWrite.AllowUnixSockets {
		if err := validSocketPath(p); err != nil {
			return fmt.Errorf("config %s: key sandbox_workspace_write.allow_unix_sockets: %w", c.Path, err)
		}
	}
	for _, n := range c.SandboxWorkspaceWrite.ProtectedSubpaths {
		if err := validProtectedName(n); err != nil {
			return fmt.Errorf("config %s: key sandbox_workspace_write.protected_subpaths: %w", c.Path, err)
		}
	}
	return nil
}

// validProtectedName accepts a single path component: protection is applied
// to a name directly inside each writable root.
func validProtectedName(n string) error {
	if n == "" || n == "." || n == ".." || strings.ContainsAny(n, `/\`) || strings.ContainsRune(n, 0) {
		return fmt.Errorf("%q is not a single file name", n)
	}
	return nil
}

// validSocketPath accepts an absolute slash path: an allowed socket is
// matched against the real path of the socket a connect reaches, so a
// relative path would have no meaning.
func validSocketPath(p string) error {
	if !strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return fmt.Errorf("%q is not an absolute path", p)
	}
	return nil
}
