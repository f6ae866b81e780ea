package sandbox

import (
	"fmt"
	"strings"

	"github.com/agentbox/agentbox/internal/cacheplan"
	"github.com/agentbox/agentbox/policy"
)

// cacheChecks describes, for doctor, where each tool cache goes.
func cacheChecks(pol *policy.Policy, overlays bool) []Check {
	if pol == nil || pol.Mode() != policy.WorkspaceWrite {
		return nil
	}
	if pol.ToolCacheMode() == policy.CachesOff {
		return []Check{{Name: "tool caches", OK: true, Detail: "off: caches under $HOME stay read-only"}}
	}
	var out []Check
	for _, d := range cacheplan.Decide(pol, overlays) {
		c := d.Cache
		var detail string
		switch d.How {
		case cacheplan.Overlay:
			detail = fmt.Sprintf("overlay at %s: host cache read-only below, changes in %s", c.Host, cacheplan.UpperDir(c))
		case cacheplan.Private:
			detail = fmt.Sprintf("private: %s (host %s untouched)", cacheplan.PrivateEnv(c, nil), c.Host)
		default:
			detail = fmt.Sprintf("untouched (%s): %s", c.Host, d.Why)
		}
		out = append(out, Check{Name: "cache " + c.Name, OK: true, Detail: detail})
	}
	return out
}

// setEnv returns env with kv's variable replaced (or added).
func setEnv(env []string, kv string) []string {
	name, _, _ := strings.Cut(kv, "=")
	out := make([]string, 0, len(env)+1)
	for _, e := range env {
		if k, _, ok := strings.Cut(e, "="); ok && k == name {
			continue
		}
		out = append(out, e)
	}
	return append(out, kv)
}
