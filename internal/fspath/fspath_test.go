package fspath

import "testing"

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		p, r string
		want bool
	}{{"/a", "/a", true}, {"/a/b", "/a", true}, {"/ab", "/a", false}, {"/a", "/", true}, {"/", "/a", false}} {
		if got := Within(c.p, c.r); got != c.want {
			t.Errorf("Within(%q, %q) = %v", c.p, c.r, got)
		}
	}
}
