package git

import "strconv"

// Git's configuration from the environment (git-config(1),
// "ENVIRONMENT"): EnvCount variables, the n-th (from 0) named by
// [EnvKey] with its value in [EnvValue].
const EnvCount = "GIT_CONFIG_COUNT"

// EnvKey is the variable naming the n-th configuration variable of the
// environment.
func EnvKey(n int) string { return "GIT_CONFIG_KEY_" + strconv.Itoa(n) }

// EnvValue is the variable holding the n-th one's value.
func EnvValue(n int) string { return "GIT_CONFIG_VALUE_" + strconv.Itoa(n) }
