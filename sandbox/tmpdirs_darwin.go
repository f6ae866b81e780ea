package sandbox

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/policy"
)

// privateTemps creates the workspace's private temporary directories the
// profile makes writable and points TMPDIR at the one standing for
// $TMPDIR (or /tmp): Seatbelt cannot show it at the host's path. One
// inside another (a $TMPDIR under /tmp) is made through an os.Root of the
// outer one, which the command writes, so no link it planted is followed
// out of it.
func privateTemps(pol *policy.Policy, env []string) ([]string, error) {
	var own []string
	for _, t := range pol.PrivateTemps() {
		outer := ""
		for _, o := range own {
			if fspath.Within(t.Dir, o) {
				outer = o
			}
		}
		if outer == "" {
			if err := os.MkdirAll(t.Dir, 0o700); err != nil {
				return nil, fmt.Errorf("private temporary directory for %s: %w", t.Path, err)
			}
			own = append(own, t.Dir)
			continue
		}
		root, err := os.OpenRoot(outer)
		if err != nil {
			return nil, fmt.Errorf("private temporary directory for %s: %w", t.Path, err)
		}
		rel, _ := filepath.Rel(outer, t.Dir)
		err = root.MkdirAll(rel, 0o700)
		root.Close()
		if err != nil {
			return nil, fmt.Errorf("private temporary directory %s for $%s: %w (remove it, or run agentbox cleanup)", t.Dir, t.Env, err)
		}
	}
	if dir := pol.TempDirFor(); dir != "" {
		env = setEnv(env, "TMPDIR="+dir)
	}
	return env, nil
}
