package sandbox

import (
	"fmt"
	"slices"

	"github.com/agentbox/agentbox/policy"
)

// tmpChecks describes, for doctor, where the command's temporary
// directories are: private (remapped says whether the backend shows them
// at /tmp and $TMPDIR, or only points the variable at them), the host's
// own with share_slash_tmp, or none.
func tmpChecks(pol *policy.Policy, remapped bool) []Check {
	if pol == nil || pol.Mode() != policy.WorkspaceWrite {
		return nil
	}
	pts := pol.PrivateTemps()
	if len(pts) == 0 {
		detail := "none writable: /tmp and $TMPDIR are excluded, or no state directory can be named ($HOME and $XDG_STATE_HOME unset)"
		if slices.Contains(pol.WritableRoots(), "/tmp") || slices.Contains(pol.WritableRoots(), "/private/tmp") {
			detail = "the host's, shared (share_slash_tmp = true): a server a command leaves listening there reaches your own programs"
		}
		return []Check{{Name: "temporary directories", OK: true, Detail: detail}}
	}
	var out []Check
	for _, t := range pts {
		name := "private " + t.Path
		if t.Env != "" {
			name = "private $" + t.Env
		}
		detail := fmt.Sprintf("%s is %s on the host (this workspace's, kept between runs; agentbox cleanup removes it)", t.Path, t.Dir)
		if !remapped {
			detail = fmt.Sprintf("the host's %s stays read-only; the command's TMPDIR (%%TEMP%%) is %s (this workspace's, kept between runs; agentbox cleanup removes it)", t.Path, pol.TempDirFor())
		}
		out = append(out, Check{Name: name, OK: true, Detail: detail})
	}
	return out
}
