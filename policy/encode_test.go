package policy

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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
	// The allow-list is encoded as written and parsed again: a pattern
	// the parser refuses, or a field it does not know, is refused.
	forge := func(old, new string) string {
		f := bytes.Replace(b, []byte(old), []byte(new), 1)
		if bytes.Equal(f, b) {
			t.Fatalf("the encoding has no %s to forge: %s", old, b)
		}
		return string(f)
	}
	malformed := forge(`"Allowed":["good.test"]`, `"Allowed":["*"]`)
	unknown := forge(`"Allowed":["good.test"]`, `"Allowed":["good.test"],"Name":"evil.test"`)
	emptyList := forge(`"Denied":null`, `"Denied":[]`)
	for name, b := range map[string]string{
		"unknown field":          `{"Mode":"read-only","Extra":1}`,
		"not canonical":          `{"Cwd":"/x","Mode":"read-only"}`,
		"trailing data":          `{} {}`,
		"unknown cache":          `{"ToolCaches":[{"Name":"nope"}]}`,
		"a malformed pattern":    malformed,
		"an allow-list field":    unknown,
		"an empty list not null": emptyList,
		"not json at all":        `x`,
	} {
		if _, err := Unmarshal([]byte(b)); err == nil {
			t.Errorf("%s: Unmarshal(%s) succeeded", name, b)
		}
	}
}

// A path that is not UTF-8 has no encoding: JSON would decode it as
// another path. A real U+FFFD and a backslash before "ufffd" in a path
// are kept as they are.
func TestMarshalRefusesInvalidUTF8(t *testing.T) {
	for _, tc := range []struct {
		cwd string
		ok  bool
	}{
		{"/w/\xff", false},
		{"/w/\\\xff", false},
		{"/w/\ufffd", true},
		{`/w/\ufffd`, true},
		{`/w/\\ufffd`, true},
	} {
		p := ReadOnlyAt(tc.cwd)
		b, err := p.MarshalBinary()
		if (err == nil) != tc.ok {
			t.Errorf("MarshalBinary(Cwd %q) = %s, %v; want ok %v", tc.cwd, b, err, tc.ok)
			continue
		}
		if err != nil {
			continue
		}
		q, err := Unmarshal(b)
		if err != nil || q.Cwd() != tc.cwd {
			t.Errorf("Cwd %q came back as %q, %v", tc.cwd, q.Cwd(), err)
		}
	}
}

// A variant changes what it says and nothing else, and leaves p alone.
func TestVariants(t *testing.T) {
	p, err := resolveEnv(Options{Cwd: t.TempDir(), AllowDomains: []string{"good.test"}}, func(string) string { return "" }, "linux")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := p.MarshalBinary()
	if q := p.WithAllowDegraded(true); !q.AllowDegraded() || q.Cwd() != p.Cwd() {
		t.Errorf("WithAllowDegraded: %v %q", q.AllowDegraded(), q.Cwd())
	}
	if q := p.WithoutWrites(); q.Mode() != ReadOnly || len(q.WritableRoots()) != 0 || len(q.Protected()) != 0 {
		t.Errorf("WithoutWrites: %s %q %v", q.Mode(), q.WritableRoots(), q.Protected())
	}
	if q := p.WithAllowList(nil); q.AllowList() != nil || q.Network() {
		t.Errorf("WithAllowList(nil): %v %v", q.AllowList(), q.Network())
	}
	if q := p.WithWritableRoot("/x"); !slices.Contains(q.WritableRoots(), "/x") {
		t.Errorf("WithWritableRoot: %q", q.WritableRoots())
	}
	if q := p.WithProtected(nil); len(q.Protected()) != 0 {
		t.Errorf("WithProtected(nil): %v", q.Protected())
	}
	if after, _ := p.MarshalBinary(); !bytes.Equal(before, after) {
		t.Error("a variant changed the policy it was made from")
	}
}
