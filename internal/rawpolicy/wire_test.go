package rawpolicy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/agentbox/agentbox/internal/rawpolicy"
	"github.com/agentbox/agentbox/policy"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := map[string]string{"HOME": home, "XDG_STATE_HOME": filepath.Join(home, "state"), "GOCACHE": filepath.Join(home, "gocache")}
	p, err := rawpolicy.Resolve(policy.Options{Cwd: ws, AddDirs: []string{t.TempDir()}}, func(k string) string { return env[k] }, "linux")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.ToolCaches()) == 0 {
		t.Fatal("want tool caches in the policy, so that their rules are carried over")
	}
	b, err := rawpolicy.Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := rawpolicy.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	// A cache's relocation rule is found by its name (policyhook.CacheEnvValue), so
	// equal caches relocate alike.
	if !reflect.DeepEqual(p.ToolCaches(), q.ToolCaches()) {
		t.Errorf("decoded tool caches %+v, want %+v", q.ToolCaches(), p.ToolCaches())
	}
	b2, _ := rawpolicy.Encode(q)
	if !bytes.Equal(b, b2) {
		t.Error("decoded policy encodes differently")
	}
}

func TestDecodeRefuses(t *testing.T) {
	for name, b := range map[string]string{
		"unknown field":   `{"Mode":"read-only","Extra":1}`,
		"not canonical":   `{"Cwd":"/x","Mode":"read-only"}`,
		"trailing data":   `{} {}`,
		"unknown cache":   `{"ToolCaches":[{"Name":"nope"}]}`,
		"an allow-list":   `{"Egress":{"Allowed":null,"Denied":null,"AllowLocal":false}}`,
		"not json at all": `x`,
	} {
		if _, err := rawpolicy.Decode([]byte(b)); err == nil {
			t.Errorf("%s: Decode(%s) succeeded", name, b)
		}
	}
}
