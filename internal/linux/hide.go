package linux

import (
	"path/filepath"
	"slices"

	"github.com/agentbox/agentbox/internal/fspath"
	"github.com/agentbox/agentbox/policy"
)

// Hide is one mask of the sandbox: an empty read-only file over a
// hidden file, an empty read-only directory over a hidden directory
// (policy.Hidden), applied last, over the plan, the tool caches and the
// sandbox's own files, so that nothing mounted later shows the hidden
// bytes again.
type Hide struct {
	Path string `json:"path"`
	Dir  bool   `json:"dir,omitempty"`
	// Reopen are paths beneath a hidden directory shown again inside
	// its mask: bound from what the sandbox showed there before the
	// mask, or recreated as the same symbolic link.
	Reopen []string `json:"reopen,omitempty"`
}

// HidePlan is the masks for the hidden paths, in the policy's order (a
// directory before what lies inside it, so that a path hidden inside a
// re-opened one is masked on top), and the directories to pin before
// them: those between a writable root and a hidden path inside it. A
// mask is a mount point, which cannot be renamed, but its directory
// could be, and the next command, hiding the rule's path, would find
// nothing there while the secret sat under another name.
func HidePlan(hidden []policy.Hidden, roots []string) (hides []Hide, pins []string) {
	for _, h := range hidden {
		hides = append(hides, Hide{Path: h.Path, Dir: h.Kind == policy.Dir, Reopen: h.Reopen})
		root := fspath.InnermostRoot(h.Path, roots)
		if root == "" {
			continue
		}
		for a := filepath.Dir(h.Path); a != root && fspath.Within(a, root); a = filepath.Dir(a) {
			if !slices.Contains(pins, a) {
				pins = append(pins, a)
			}
		}
	}
	slices.SortFunc(pins, byDepth)
	return hides, pins
}

// Paths of the mask templates: every mask is a bind of one of them (or,
// for a directory that re-opens entries, of a directory of the same
// scratch file system), so a path is masked exactly when it is on their
// file system. A session's mounter clones them for the masks of a later
// command. They live in the sandbox's read-only /dev.
const (
	hiddenFileTemplate = "/dev/.agentbox-hidden"
	hiddenDirTemplate  = "/dev/.agentbox-hidden-dir"
)
