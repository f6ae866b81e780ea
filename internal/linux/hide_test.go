package linux

import (
	"slices"
	"testing"

	"github.com/agentbox/agentbox/policy"
)

// TestHidePlan: masks in the policy's order; the directories between a
// writable root and a hidden path inside it are pinned, those outside
// every root are not.
func TestHidePlan(t *testing.T) {
	hidden := []policy.Hidden{
		{Path: "/h/.aws", Kind: policy.Dir},
		{Path: "/h/.config/gh/hosts.yml", Kind: policy.File},
		{Path: "/h/.ssh", Kind: policy.Dir, Reopen: []string{"/h/.ssh/id.pub"}},
	}
	hides, pins := HidePlan(hidden, []string{"/h/.config", "/w"})
	if len(hides) != 3 || !hides[0].Dir || hides[1].Dir || !slices.Equal(hides[2].Reopen, []string{"/h/.ssh/id.pub"}) {
		t.Errorf("hides = %+v", hides)
	}
	if !slices.Equal(pins, []string{"/h/.config/gh"}) || !slices.Equal(hides[1].Pins, []string{"/h/.config/gh"}) || hides[0].Pins != nil {
		t.Errorf("pins = %q, hides = %+v", pins, hides)
	}
}
