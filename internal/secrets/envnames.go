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
	return compileName(pattern).match(strings.ToUpper(name))
}

// namePattern is a pattern made ready for many names: upper-cased once
// and its shape known, so that filtering an environment folds each name
// once instead of once for each pattern (a session filters one for every
// command).
type namePattern struct {
	pat   string // upper-cased, for path.Match when shape is glob
	core  string // the literal between the leading and trailing "*"
	shape byte
}

const (
	shapeGlob     byte = iota // anything else: path.Match
	shapeEqual                // NAME
	shapePrefix               // NAME*
	shapeSuffix               // *NAME
	shapeContains             // *NAME*
)

func compileName(pattern string) namePattern {
	pattern = strings.ToUpper(pattern)
	// The common shapes (every default pattern is one) without
	// path.Match, whose backtracking over a leading "*" made filtering a
	// 40-variable environment cost 0.18 ms, on every command.
	core := strings.TrimPrefix(pattern, "*")
	lead := len(core) < len(pattern)
	tail := strings.HasSuffix(core, "*")
	if tail {
		core = core[:len(core)-1]
	}
	np := namePattern{pat: pattern, core: core}
	if !strings.ContainsAny(core, `*?[\`) {
		switch {
		case lead && tail:
			np.shape = shapeContains
		case lead:
			np.shape = shapeSuffix
		case tail:
			np.shape = shapePrefix
		default:
			np.shape = shapeEqual
		}
	}
	return np
}

func compileNames(patterns []string) []namePattern {
	out := make([]namePattern, len(patterns))
	for i, p := range patterns {
		out[i] = compileName(p)
	}
	return out
}

// match reports whether name, upper-cased by the caller, matches.
func (p namePattern) match(name string) bool {
	switch p.shape {
	case shapeContains:
		return strings.Contains(name, p.core)
	case shapeSuffix:
		return strings.HasSuffix(name, p.core)
	case shapePrefix:
		return strings.HasPrefix(name, p.core)
	case shapeEqual:
		return name == p.core
	}
	ok, err := path.Match(p.pat, name)
	return err == nil && ok
}

// ValidNamePattern reports a malformed pattern (an unclosed "[").
func ValidNamePattern(pattern string) error {
	_, err := path.Match(strings.ToUpper(pattern), "")
	return err
}

var secretNamePatterns = compileNames(secretVarPatterns)

// IsSecretName reports whether name matches a default secret pattern.
func IsSecretName(name string) bool { return matchAny(secretNamePatterns, strings.ToUpper(name)) }

// matchAny reports whether name, upper-cased by the caller, matches one
// of patterns.
func matchAny(patterns []namePattern, name string) bool {
	for _, p := range patterns {
		if p.match(name) {
			return true
		}
	}
	return false
}
