package policy

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestMarshalUnmarshalRoundTrip(t *testing.T) {
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := map[string]string{"HOME": home, "XDG_STATE_HOME": filepath.Join(home, "state"), "GOCACHE": filepath.Join(home, "gocache")}
	getenv := func(k string) string { return env[k] }
	for _, o := range []Options{
		{Cwd: ws, AddDirs: []string{t.TempDir()}},
		{Cwd: ws, AllowDomains: []string{"*.example.com", "10.0.0.0/8", "bücher.example"}},
	} {
		p, err := resolveEnv(o, getenv, "linux")
		if err != nil {
			t.Fatal(err)
		}
		if len(p.ToolCaches()) == 0 {
			t.Fatal("want tool caches in the policy, so that their rules are carried over")
		}
		b, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		q, err := Unmarshal(b)
		if err != nil {
			t.Fatal(err)
		}
		// A cache's relocation rule is found by its name
		// (ToolCache.EnvValue), so equal caches relocate alike.
		if !reflect.DeepEqual(p.ToolCaches(), q.ToolCaches()) {
			t.Errorf("decoded tool caches %+v, want %+v", q.ToolCaches(), p.ToolCaches())
		}
		if !reflect.DeepEqual(p.AllowList(), q.AllowList()) {
			t.Errorf("decoded allow-list %+v, want %+v", q.AllowList(), p.AllowList())
		}
		b2, _ := q.MarshalBinary()
		if !bytes.Equal(b, b2) {
			t.Error("decoded policy encodes differently")
		}
	}
}

func TestUnmarshalRefuses(t *testing.T) {
	p, err := resolveEnv(Options{Cwd: t.TempDir(), AllowDomains: []string{"good.test"}}, func(string) string { return "" }, "linux")
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// The pattern's parsed name no longer matches what it says it is.
	forged := bytes.Replace(b, []byte(`"Name":"good.test"`), []byte(`"Name":"evil.test"`), 1)
	if bytes.Equal(forged, b) {
		t.Fatalf("the encoding has no parsed name to forge: %s", b)
	}
	for name, b := range map[string]string{
		"unknown field":          `{"Mode":"read-only","Extra":1}`,
		"not canonical":          `{"Cwd":"/x","Mode":"read-only"}`,
		"trailing data":          `{} {}`,
		"unknown cache":          `{"ToolCaches":[{"Name":"nope"}]}`,
		"a pattern not as typed": string(forged),
		"not json at all":        `x`,
	} {
		if _, err := Unmarshal([]byte(b)); err == nil {
			t.Errorf("%s: Unmarshal(%s) succeeded", name, b)
		}
	}
}
