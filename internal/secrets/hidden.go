// Package secrets holds what agentbox keeps from a sandboxed command by
// default: the credential files under the caller's home, the names of
// secret-looking environment variables, and the environment filter of
// Codex's shell_environment_policy. It is data and pure functions;
// package policy resolves them for a command and the backends enforce
// them.
package secrets

// Entry is one default hidden path, relative to a home directory.
type Entry struct {
	// Path is a slash path under the home. Its last element may be a
	// glob ("*" also matches a leading dot).
	Path string
	// Keep are name patterns of a directory's direct entries that stay
	// readable although the directory is hidden (.ssh's public keys).
	Keep []string
	// Why says what the entry holds, for doctor and messages.
	Why string
}

// Defaults returns the built-in hidden list (config [filesystem]
// default_deny_read = false drops it). Every entry is a credential, a
// key, a token store or a history that holds them; the README's
// "Secrets" section prints the same list.
func Defaults() []Entry {
	out := make([]Entry, len(defaults))
	for i, e := range defaults {
		e.Keep = append([]string(nil), e.Keep...)
		out[i] = e
	}
	return out
}

var defaults = []Entry{
	// ssh private keys; public keys, known hosts and the client config
	// stay readable so that ssh and git still work with an agent.
	{Path: ".ssh", Keep: []string{"*.pub", "known_hosts*", "config"}, Why: "ssh private keys"},
	// AWS CLI credentials, config and SSO token cache.
	{Path: ".aws", Why: "AWS credentials"},
	// Azure CLI tokens and service-principal secrets.
	{Path: ".azure", Why: "Azure credentials"},
	// gcloud's credential database and application-default credentials.
	{Path: ".config/gcloud", Why: "Google Cloud credentials"},
	// kubeconfig files carry cluster certificates and bearer tokens.
	{Path: ".kube", Why: "Kubernetes credentials"},
	// Registry auths (base64 user:password) of docker login.
	{Path: ".docker/config.json", Why: "Docker registry credentials"},
	// GnuPG secret keys (the public keyring stays readable for verify).
	{Path: ".gnupg/private-keys-v1.d", Why: "GnuPG private keys"},
	{Path: ".gnupg/secring.gpg", Why: "GnuPG private keys (GnuPG 1)"},
	// Passwords for ftp, curl, git over https.
	{Path: ".netrc", Why: "netrc passwords"},
	// git credential-store's plain-text file, in both its places.
	{Path: ".git-credentials", Why: "git credentials"},
	{Path: ".config/git/credentials", Why: "git credentials"},
	// GitHub CLI's OAuth token.
	{Path: ".config/gh/hosts.yml", Why: "GitHub CLI token"},
	// npm, PyPI, Cargo, RubyGems publish tokens.
	{Path: ".npmrc", Why: "npm token"},
	{Path: ".pypirc", Why: "PyPI token"},
	{Path: ".cargo/credentials*", Why: "crates.io token"},
	{Path: ".gem/credentials", Why: "RubyGems API key"},
	// HashiCorp Vault and Terraform Cloud tokens.
	{Path: ".vault-token", Why: "Vault token"},
	{Path: ".terraform.d/credentials*", Why: "Terraform Cloud token"},
	// The agents' own logins: a command that reads them can act as the agent.
	{Path: ".codex/auth.json", Why: "Codex login"},
	{Path: ".claude/.credentials.json", Why: "Claude Code login"},
	{Path: ".gemini/oauth_creds.json", Why: "Gemini CLI login"},
	{Path: ".config/github-copilot", Why: "GitHub Copilot login"},
	// Password stores and keyrings.
	{Path: ".password-store", Why: "pass password store"},
	{Path: ".local/share/keyrings", Why: "GNOME keyring"},
	{Path: ".local/share/kwalletd", Why: "KDE wallet"},
	{Path: "Library/Keychains", Why: "macOS keychains"},
	// Browser profiles: cookies, saved passwords, session tokens.
	{Path: ".mozilla", Why: "Firefox profiles"},
	{Path: ".config/google-chrome", Why: "Chrome profiles"},
	{Path: ".config/chromium", Why: "Chromium profiles"},
	{Path: ".config/BraveSoftware", Why: "Brave profiles"},
	{Path: ".config/microsoft-edge", Why: "Edge profiles"},
	{Path: "Library/Application Support/Google/Chrome", Why: "Chrome profiles (macOS)"},
	{Path: "Library/Application Support/Firefox", Why: "Firefox profiles (macOS)"},
	{Path: "Library/Cookies", Why: "Safari cookies (macOS)"},
	// Shell and REPL histories: pasted tokens and typed passwords end
	// up there (.bash_history, .zsh_history, .python_history,
	// .node_repl_history, .psql_history, .mysql_history, ...).
	{Path: ".*_history", Why: "shell and REPL history"},
	{Path: ".zhistory", Why: "zsh history"},
	{Path: ".histfile", Why: "zsh history"},
	{Path: ".local/share/fish/fish_history", Why: "fish history"},
}
