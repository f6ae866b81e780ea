package winenv

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/git"
)

// GitSafeDirectories returns env with each of dirs added to git's
// safe.directory list through git's environment configuration
// (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_<n>, GIT_CONFIG_VALUE_<n>; see
// git-config(1), "ENVIRONMENT").
//
// Elevated mode needs it: the command runs as a sandbox user inside the
// user's repository, which that account does not own, and git then
// refuses to work ("detected dubious ownership"). Each directory is given
// with forward slashes, the form Git for Windows compares, and as "dir/*",
// which also covers repositories below it (git 2.46 and later; older
// versions ignore the pattern and still honour the plain entry).
//
// Entries the caller already set are kept: the new ones are numbered from
// the existing GIT_CONFIG_COUNT. A GIT_CONFIG_COUNT that is not a
// non-negative number is an error, since git itself would refuse it.
func GitSafeDirectories(env []string, dirs ...string) ([]string, error) {
	n := 0
	if v, ok := Get(env, git.EnvCount); ok && strings.TrimSpace(v) != "" {
		c, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || c < 0 {
			return nil, fmt.Errorf("GIT_CONFIG_COUNT=%q is not a count of git config entries; fix or unset it", v)
		}
		n = c
	}
	var values []string
	seen := map[string]bool{}
	for _, d := range dirs {
		d = strings.TrimRight(strings.ReplaceAll(d, `\`, "/"), "/")
		if d == "" {
			continue
		}
		for _, v := range []string{d, d + "/*"} {
			if k := strings.ToLower(v); !seen[k] {
				seen[k] = true
				values = append(values, v)
			}
		}
	}
	if len(values) == 0 {
		return env, nil
	}
	for _, v := range values {
		env = Set(env, git.EnvKey(n), "safe.directory")
		env = Set(env, git.EnvValue(n), v)
		n++
	}
	return Set(env, git.EnvCount, strconv.Itoa(n)), nil
}
