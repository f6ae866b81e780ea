package secrets

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDefaultsHaveReasons(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range Defaults() {
		if e.Why == "" || e.Path == "" || strings.HasPrefix(e.Path, "/") {
			t.Errorf("entry %+v: want a relative path and a reason", e)
		}
		if seen[e.Path] {
			t.Errorf("entry %s twice", e.Path)
		}
		seen[e.Path] = true
	}
	for _, want := range []string{".ssh", ".aws", ".codex/auth.json", ".config/gh/hosts.yml", ".netrc"} {
		if !seen[want] {
			t.Errorf("default list lacks %s", want)
		}
	}
	if seen[".gitconfig"] {
		t.Error(".gitconfig must stay readable")
	}
}

func TestSecretNames(t *testing.T) {
	for _, n := range []string{"GITHUB_TOKEN", "openai_api_key", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "PGPASSWORD", "DB_PASSWD", "MY_APIKEY", "GOOGLE_APPLICATION_CREDENTIALS", "STRIPE_KEY", "AZURE_DEVOPS_PAT"} {
		if !IsSecretName(n) {
			t.Errorf("%s passes, want it withheld", n)
		}
	}
	for _, n := range []string{"PATH", "HOME", "LANG", "LC_ALL", "TERM", "SSH_AUTH_SOCK", "KEYBOARD", "GOPATH", "USER"} {
		if IsSecretName(n) {
			t.Errorf("%s withheld, want it passed", n)
		}
	}
}

func TestFilterEnv(t *testing.T) {
	env := []string{"PATH=/bin", "HOME=/h", "LANG=C", "GITHUB_TOKEN=t", "AWS_REGION=x", "AWS_PROFILE=p", "FOO=1", "FOO=2"}
	cases := []struct {
		name         string
		p            EnvPolicy
		want, wantWH []string
	}{
		{"defaults", EnvPolicy{}, []string{"PATH=/bin", "HOME=/h", "LANG=C", "AWS_REGION=x", "AWS_PROFILE=p", "FOO=2"}, []string{"GITHUB_TOKEN"}},
		{"ignore defaults", EnvPolicy{IgnoreDefaultExcludes: true}, []string{"PATH=/bin", "HOME=/h", "LANG=C", "GITHUB_TOKEN=t", "AWS_REGION=x", "AWS_PROFILE=p", "FOO=2"}, nil},
		{"exclude", EnvPolicy{Exclude: []string{"aws_*"}}, []string{"PATH=/bin", "HOME=/h", "LANG=C", "FOO=2"}, []string{"AWS_PROFILE", "AWS_REGION", "GITHUB_TOKEN"}},
		{"core", EnvPolicy{Inherit: InheritCore}, []string{"PATH=/bin", "HOME=/h"}, []string{"AWS_PROFILE", "AWS_REGION", "FOO", "GITHUB_TOKEN", "LANG"}},
		{"none+set", EnvPolicy{Inherit: InheritNone, Set: []EnvVar{{Name: "CI", Value: "1"}}}, []string{"CI=1"}, []string{"AWS_PROFILE", "AWS_REGION", "FOO", "GITHUB_TOKEN", "HOME", "LANG", "PATH"}},
		{"set overrides", EnvPolicy{Set: []EnvVar{{Name: "FOO", Value: "s"}}}, []string{"PATH=/bin", "HOME=/h", "LANG=C", "AWS_REGION=x", "AWS_PROFILE=p", "FOO=s"}, []string{"GITHUB_TOKEN"}},
		// include_only comes after set, as in Codex: it filters set's names too.
		{"include_only", EnvPolicy{IncludeOnly: []string{"PATH", "ci"}, Set: []EnvVar{{Name: "CI", Value: "1"}, {Name: "X", Value: "2"}}}, []string{"PATH=/bin", "CI=1"}, []string{"AWS_PROFILE", "AWS_REGION", "FOO", "GITHUB_TOKEN", "HOME", "LANG"}},
		{"pass", EnvPolicy{Pass: []string{"GITHUB_TOKEN", "ABSENT"}}, []string{"PATH=/bin", "HOME=/h", "LANG=C", "AWS_REGION=x", "AWS_PROFILE=p", "FOO=2", "GITHUB_TOKEN=t"}, nil},
		{"pass through include_only", EnvPolicy{IncludeOnly: []string{"PATH"}, Pass: []string{"LANG"}}, []string{"PATH=/bin", "LANG=C"}, []string{"AWS_PROFILE", "AWS_REGION", "FOO", "GITHUB_TOKEN", "HOME"}},
	}
	for _, c := range cases {
		got, wh := FilterEnv(c.p, env, "linux")
		if !slices.Equal(got, c.want) || !slices.Equal(wh, c.wantWH) {
			t.Errorf("%s: got %q withheld %q, want %q withheld %q", c.name, got, wh, c.want, c.wantWH)
		}
	}
	// Windows compares names without case.
	got, _ := FilterEnv(EnvPolicy{Inherit: InheritCore}, []string{"Path=C:\\x", "SystemRoot=C:\\Windows", "Foo=1", "=C:=C:\\w"}, "windows")
	if !slices.Equal(got, []string{"Path=C:\\x", "SystemRoot=C:\\Windows"}) {
		t.Errorf("windows core = %q", got)
	}
	if _, err := ParseInherit("some"); err == nil || !strings.Contains(err.Error(), `"some"`) {
		t.Errorf("ParseInherit(some) = %v", err)
	}
}

func touch(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestExpand(t *testing.T) {
	d := t.TempDir()
	touch(t, filepath.Join(d, "a.pem"), filepath.Join(d, ".hidden.pem"), filepath.Join(d, "x/y/z.pem"),
		filepath.Join(d, "x/.env"), filepath.Join(d, "x/y/.env"), filepath.Join(d, "x/notpem"))
	rel := func(ps []string) []string {
		var out []string
		for _, p := range ps {
			r, _ := filepath.Rel(d, p)
			out = append(out, filepath.ToSlash(r))
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		pat  string
		want []string
	}{
		{"**/*.pem", []string{".hidden.pem", "a.pem", "x/y/z.pem"}},
		{"*.pem", []string{".hidden.pem", "a.pem"}},
		{"**/.env", []string{"x/.env", "x/y/.env"}},
		{"x/*/z.pem", []string{"x/y/z.pem"}},
		{"x/**", []string{"x", "x/.env", "x/notpem", "x/y", "x/y/.env", "x/y/z.pem"}},
	} {
		base, rest := SplitBase(c.pat)
		got, err := Expand(filepath.Join(d, base), rest, Bounds{})
		if err != nil {
			t.Fatal(err)
		}
		got = slices.Compact(rel(got))
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.pat, got, c.want)
		}
	}
	// Over a bound: an error, not a partial list.
	if _, err := Expand(d, "**/*.pem", Bounds{MaxDepth: 1, MaxEntries: 100, MaxMatches: 100}); !errors.Is(err, ErrBound) {
		t.Errorf("depth bound: %v", err)
	}
	if _, err := Expand(d, "**/*.pem", Bounds{MaxDepth: 10, MaxEntries: 3, MaxMatches: 100}); !errors.Is(err, ErrBound) {
		t.Errorf("entries bound: %v", err)
	}
	if _, err := Expand(d, "**/*.pem", Bounds{MaxDepth: 10, MaxEntries: 100, MaxMatches: 2}); !errors.Is(err, ErrBound) {
		t.Errorf("match bound: %v", err)
	}
	// A symlinked directory is not walked into.
	if err := os.Symlink(filepath.Join(d, "x"), filepath.Join(d, "link")); err != nil {
		t.Fatal(err)
	}
	got, err := Expand(d, "**/z.pem", Bounds{})
	if err != nil || len(got) != 1 {
		t.Errorf("through a link: %q %v", got, err)
	}
	if err := ValidPattern("a/[b"); err == nil {
		t.Error("unclosed [ accepted")
	}
}
