package cacheplan

import (
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/policy"
)

// TestPrivateEnv checks the paths derived from a cache's layer and the
// variable that relocates it, Maven's keeping what MAVEN_OPTS held.
func TestPrivateEnv(t *testing.T) {
	layer := filepath.Join("/state", "caches", "ws", "maven")
	mv := policy.ToolCache{Name: "maven", Env: "MAVEN_OPTS", Layer: layer}
	if got, want := PrivateDir(mv), filepath.Join("/state", "caches", "ws", "private", "maven"); got != want {
		t.Errorf("PrivateDir = %q, want %q", got, want)
	}
	if got, want := UpperDir(mv), filepath.Join(layer, "upper"); got != want {
		t.Errorf("UpperDir = %q, want %q", got, want)
	}
	if got, want := PrivateEnv(mv, []string{"MAVEN_OPTS=-Xmx1g"}), "MAVEN_OPTS=-Xmx1g -Dmaven.repo.local="+PrivateDir(mv); got != want {
		t.Errorf("PrivateEnv = %q, want %q", got, want)
	}
	gb := policy.ToolCache{Name: "go-build", Env: "GOCACHE", Layer: layer}
	if got := PrivateEnvAt(gb, "/in/sandbox", []string{"GOCACHE=/old"}); got != "GOCACHE=/in/sandbox" {
		t.Errorf("PrivateEnvAt = %q", got)
	}
	if got := PrivateEnv(policy.ToolCache{Name: "cargo-registry", Layer: layer}, nil); got != "" {
		t.Errorf("a cache without a variable got %q", got)
	}
}
