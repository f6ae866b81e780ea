package secrets

import (
	"path"
	"strings"
)

// SecretVarPatterns returns the patterns (case-insensitive globs) of the
// environment variables withheld from a command by default: the names
// tokens, passwords and keys go by. PATH, HOME, the locale and
// everything else pass. The README's "Secrets" section lists them.
func SecretVarPatterns() []string { return append([]string(nil), secretVarPatterns...) }

var secretVarPatterns = []string{
	"*TOKEN*",       // GITHUB_TOKEN, HF_TOKEN, CI_JOB_TOKEN, *_AUTH_TOKEN
	"*SECRET*",      // AWS_SECRET_ACCESS_KEY, CLIENT_SECRET
	"*PASSWORD*",    // PGPASSWORD, DB_PASSWORD
	"*PASSWD*",      // MYSQL_PWD's cousins, *_PASSWD
	"*PASSPHRASE*",  // GPG and key passphrases
	"*API_KEY*",     // OPENAI_API_KEY, ANTHROPIC_API_KEY
	"*APIKEY*",      // spellings without the underscore
	"*ACCESS_KEY*",  // AWS_ACCESS_KEY_ID
	"*PRIVATE_KEY*", // PEM keys passed inline
	"*CREDENTIAL*",  // GOOGLE_APPLICATION_CREDENTIALS, *_CREDENTIALS
	"*_KEY",         // SIGNING_KEY, ENCRYPTION_KEY, STRIPE_KEY
	"*COOKIE*",      // session cookies
	"*_PAT",         // personal access tokens (AZURE_DEVOPS_PAT)
	"MYSQL_PWD",     // MySQL's password variable
}

// MatchName reports whether the environment variable name matches the
// glob pattern ("*", "?", "[...]"), case-insensitively, as Codex's
// shell_environment_policy patterns do.
func MatchName(pattern, name string) bool {
	pattern, name = strings.ToUpper(pattern), strings.ToUpper(name)
	// The common shapes (every default pattern is one) without
	// path.Match, whose backtracking over a leading "*" made filtering a
	// 40-variable environment cost 0.18 ms, on every command.
	core := strings.TrimPrefix(pattern, "*")
	lead := len(core) < len(pattern)
	tail := strings.HasSuffix(core, "*")
	if tail {
		core = core[:len(core)-1]
	}
	if !strings.ContainsAny(core, `*?[\`) {
		switch {
		case lead && tail:
			return strings.Contains(name, core)
		case lead:
			return strings.HasSuffix(name, core)
		case tail:
			return strings.HasPrefix(name, core)
		default:
			return name == core
		}
	}
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

// ValidNamePattern reports a malformed pattern (an unclosed "[").
func ValidNamePattern(pattern string) error {
	_, err := path.Match(strings.ToUpper(pattern), "")
	return err
}

// IsSecretName reports whether name matches a default secret pattern.
func IsSecretName(name string) bool { return matchAny(secretVarPatterns, name) }

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if MatchName(p, name) {
			return true
		}
	}
	return false
}
