package spelling

import "testing"

func TestNearest(t *testing.T) {
	cands := []string{"network", "allow-domain", "allow-degraded", "allow-git-writes", "add-dir", "json"}
	for _, c := range []struct{ in, want string }{
		{"netwrok", "network"},
		{"network", "network"},
		{"allow-domian", "allow-domain"},
		{"allow_git_writes", "allow-git-writes"},
		{"allow-git-write", "allow-git-writes"},
		{"jsn", "json"},
		{"js", ""},
		{"frobnicate", ""},
		{"Network", "network"},
		{"add-dirs", "add-dir"},
	} {
		if got := Nearest(c.in, cands); got != c.want {
			t.Errorf("Nearest(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
