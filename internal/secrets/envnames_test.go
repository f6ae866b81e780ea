package secrets

import (
	"path"
	"strings"
	"testing"
)

// TestMatchNameFastPath: the shapes MatchName answers without path.Match
// answer as path.Match does (case folded).
func TestMatchNameFastPath(t *testing.T) {
	patterns := append([]string{"*", "**", "", "A", "a*", "*a", "*a*", "*_KEY", "MYSQL_PWD", "AWS_*", "*tok?n*", "[A-C]*", `A\*B`, "*[", "x*y"}, secretVarPatterns...)
	names := []string{"", "A", "a", "AB", "BA", "GITHUB_TOKEN", "my_token_x", "SIGNING_KEY", "KEY", "MYSQL_PWD", "mysql_pwd", "AWS_SECRET", "A*B", "AxB", "TOKN", "xay", "x"}
	for _, p := range patterns {
		for _, n := range names {
			want, err := path.Match(strings.ToUpper(p), strings.ToUpper(n))
			want = want && err == nil
			if got := MatchName(p, n); got != want {
				t.Errorf("MatchName(%q, %q) = %v, path.Match says %v", p, n, got, want)
			}
		}
	}
}
