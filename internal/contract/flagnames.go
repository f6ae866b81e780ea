package contract

// The CLI's flag names in library messages. The policy and sandbox
// packages name an option as Options.Field, which means nothing to
// someone who typed a flag; the CLI and its MCP server rewrite those
// names wherever they show a library message.

import "strings"

// replacer maps each policy.Options field a message can name to its flag.
var replacer = strings.NewReplacer(
	"Options.Mode", "-s",
	"Options.Cwd", "-C",
	"Options.AddDirs", "--add-dir",
	"Options.Network", "--network",
	"Options.AllowDomains", "--allow-domain",
	"Options.Publish", "--publish",
	"Options.HostPorts", "--host-port",
	"Options.AllowDegraded", "--allow-degraded",
	"Options.AllowGitWrites", "--allow-git-writes",
	"Options.DenyRead", "--deny-read",
	"Options.AllowRead", "--allow-read",
	"Options.PassEnv", "--env",
)

// FlagNames returns s with policy.Options field names replaced by flags.
func FlagNames(s string) string { return replacer.Replace(s) }
