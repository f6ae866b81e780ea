package linux

import (
	"path/filepath"
	"slices"

	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/policy"
)

// HidePlan is the masks for the hidden paths, in the policy's order (a
// directory before what lies inside it, so that a path hidden inside a
// re-opened one is masked on top), and the directories to pin before
// them: those between a writable root and a hidden path inside it. A
// mask is a mount point, which cannot be renamed, but its directory
// could be, and the next command, hiding the rule's path, would find
// nothing there while the secret sat under another name.
func HidePlan(hidden []policy.Hidden, roots []string) (hides []spec.Hide, pins []string) {
	for _, h := range hidden {
		hd := spec.Hide{Path: h.Path, Dir: h.Kind == policy.Dir, Reopen: h.Reopen}
		if root := fspath.InnermostRoot(h.Path, roots); root != "" {
			for a := filepath.Dir(h.Path); a != root && fspath.Within(a, root); a = filepath.Dir(a) {
				hd.Pins = append(hd.Pins, a)
				if !slices.Contains(pins, a) {
					pins = append(pins, a)
				}
			}
			slices.SortFunc(hd.Pins, byDepth)
		}
		hides = append(hides, hd)
	}
	slices.SortFunc(pins, byDepth)
	return hides, pins
}
