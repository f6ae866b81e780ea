package linux

import (
	"github.com/agentbox/agentbox/internal/linux/spec"
	"testing"
)

// Every string of the spec but Argv and Env is checked, nested ones
// included: a new field is covered without being listed.
func TestSpecNonUTF8(t *testing.T) {
	ok := &spec.Spec{
		Command: spec.Command{Path: "/bin/sh", Argv: []string{"\xff"}, Env: []string{"A=\xff"}, Cwd: "/w"},
		FS:      spec.FS{Mounts: []spec.Mount{{Path: "/w"}}},
		Walls:   spec.Walls{WritableRoots: []string{"/w"}},
	}
	if bad := ok.NonUTF8(); bad != "" {
		t.Fatalf("a spec whose only invalid bytes are in argv and env refused: %q", bad)
	}
	for name, s := range map[string]*spec.Spec{
		"Cwd":           {Command: spec.Command{Cwd: "/caf\xe9"}},
		"Mounts":        {FS: spec.FS{Mounts: []spec.Mount{{Path: "/ok"}, {Path: "/caf\xe9"}}}},
		"WritableRoots": {Walls: spec.Walls{WritableRoots: []string{"/ok", "/caf\xe9"}}},
		"Caches":        {FS: spec.FS{Caches: []spec.CacheMount{{Target: "/caf\xe9"}}}},
		"Path":          {Command: spec.Command{Path: "/caf\xe9"}},
		"Degraded":      {Degraded: spec.Degraded{ProxyAddrs: []string{"/caf\xe9"}}},
	} {
		if bad := s.NonUTF8(); bad != "/caf\xe9" {
			t.Errorf("%s: got %q", name, bad)
		}
	}
}
