package darwin

import (
	"strings"
	"testing"
)

// hiddenInput is a workspace-write policy with the default hidden list's
// kind of entries and the rules a Codex profile's "**/*.env" = "none"
// and an allow_read make.
var hiddenInput = Input{
	WritableRoots:  []string{"/Users/dev/project"},
	ProtectedNames: names,
	Hidden:         []string{"/Users/dev/.ssh", "/Users/dev/.aws", "/Users/dev/project/.env", "/Users/dev/project/app/prod.env"},
	Reopen:         []string{"/Users/dev/.ssh/id_ed25519.pub", "/Users/dev/.ssh/known_hosts", "/Users/dev/project/config/public.env"},
	HideRules: []HideRule{
		{Base: "/Users/dev/.ssh", Keep: []string{"*.pub", "known_hosts*", "config"}},
		{Base: "/Users/dev/.aws"},
		{Base: "/Users/dev", Pattern: ".*_history"},
		{Base: "/Users/dev/project", Pattern: "**/*.env"},
		{Base: "/Users/dev/project", Pattern: "secrets/**"},
	},
}

func TestHiddenDecisions(t *testing.T) {
	m := modelOf(t, hiddenInput)
	const ws = "/Users/dev/project"
	m.check(t, []decision{
		{"file-read-data", "/Users/dev/.ssh/id_ed25519", false},
		{"file-read-data", "/Users/dev/.ssh", false},
		{"file-read-metadata", "/Users/dev/.ssh", true}, // on the way to its public keys
		{"file-read-metadata", "/Users/dev/.aws", false},
		{"file-read-metadata", "/Users/dev/.aws/credentials", false},
		{"file-read-data", "/Users/dev/.aws/sso/cache/x.json", false},
		// Kept and re-opened entries read; a public key made later too.
		{"file-read-data", "/Users/dev/.ssh/id_ed25519.pub", true},
		{"file-read-data", "/Users/dev/.ssh/new.pub", true},
		{"file-read-data", "/Users/dev/.ssh/known_hosts.old", true},
		{"file-read-data", "/Users/dev/.ssh/config", true},
		{"file-read-data", "/Users/dev/.ssh/config.d/x", false},
		// Patterns, on what exists and what appears later, at any depth.
		{"file-read-data", ws + "/.env", false},
		{"file-read-data", ws + "/a/b/c/d/e/late.env", false},
		{"file-read-data", ws + "/secrets", false},
		{"file-read-data", ws + "/secrets/deep/key", false},
		{"file-read-data", "/Users/dev/.bash_history", false},
		{"file-read-data", "/Users/dev/.zsh_history", false},
		{"file-read-data", ws + "/config/public.env", true}, // allow_read
		// Near misses read.
		{"file-read-data", ws + "/main.go", true},
		{"file-read-data", ws + "/env", true},
		{"file-read-data", ws + "/.env.example", true},
		{"file-read-data", ws + "/secretsx/key", true},
		{"file-read-data", "/Users/dev/sub/.bash_history", true}, // one level only
		{"file-read-data", "/Users/dev/.gitconfig", true},
		{"file-read-data", "/Users/dev/project2/.env", true},
		{"file-read-data", "/etc/passwd", true},
		// Found at start: not writable, not movable; the workspace still is.
		{"file-write-data", ws + "/.env", false},
		{"file-write-unlink", ws + "/app/prod.env", false},
		{"file-write-unlink", ws + "/app", false},
		{"file-write-unlink", ws, false},
		{"file-write-create", ws + "/new.env", true},
		{"file-write-data", ws + "/main.go", true},
		{"file-write-unlink", ws + "/main.go", true},
	})
}

func TestHiddenPatternText(t *testing.T) {
	// Hostile characters in a pattern never reach the text as syntax:
	// the profile parses, has no backslash, and still hides the match.
	for _, pat := range []string{`*"x`, `a\b*`, `)(deny default`, "na\u00efve*.key", `[!a]*.pem`, `a^b]c`, `{x}.y`, "ctl\x01"} {
		in := Input{HideRules: []HideRule{{Base: "/Users/dev", Pattern: "**/" + pat}}}
		profile, params, err := Profile(in)
		if err != nil {
			t.Fatalf("%q: %v", pat, err)
		}
		if strings.Contains(profile, `\`) {
			t.Errorf("%q: a backslash in the profile", pat)
		}
		m := newModel(t, profile, params)
		name := strings.NewReplacer("*", "zz", "[!a]", "b", "{x}", "{x}").Replace(pat)
		if m.allowed(t, "file-read-data", "/Users/dev/sub/"+name) {
			t.Errorf("%q: /Users/dev/sub/%s readable\n%s", pat, name, profile)
		}
		if !m.allowed(t, "file-read-data", "/Users/dev/other") {
			t.Errorf("%q: unrelated file hidden", pat)
		}
	}
	for _, bad := range []Input{
		{Hidden: []string{"/"}},
		{Hidden: []string{"rel"}},
		{HideRules: []HideRule{{Base: "/"}}},
		{HideRules: []HideRule{{Base: "/x", Pattern: "a/../b"}}},
		{HideRules: []HideRule{{Base: "/x", Keep: []string{"a/b"}}}},
	} {
		if _, _, err := Profile(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
