package policy

import (
	"strings"
	"testing"
)

// TestConfigMessages: a config error names the TOML key, the file and the
// line, says what was expected and what was found, and never shows Go's
// names for the config's types; an unknown key says where it belongs
// when it is another section's, or the near spelling it may have meant.
func TestConfigMessages(t *testing.T) {
	for _, c := range []struct{ toml, want string }{
		{"allow_git_writes = true\n",
			"config cfg.toml:1:1: unknown key allow_git_writes; it belongs in [sandbox_workspace_write]"},
		{"[network]\nallow_git_writes = true\n",
			"config cfg.toml:2:1: unknown key network.allow_git_writes; it belongs in [sandbox_workspace_write]"},
		{"[sandbox_workspace_write]\nsandbox_mode = \"read-only\"\n",
			"config cfg.toml:2:1: unknown key sandbox_workspace_write.sandbox_mode; it belongs at the top, before any [section]"},
		{"[sandbox_workspace_write]\nalow_git_writes = true\n",
			"config cfg.toml:2:1: unknown key sandbox_workspace_write.alow_git_writes (did you mean allow_git_writes?)"},
		{"[sandbox_workspace_write]\nallow-git-writes = true\n",
			"config cfg.toml:2:1: unknown key sandbox_workspace_write.allow-git-writes (did you mean allow_git_writes?)"},
		{"[network]\nallowed_domain = [\"x\"]\n",
			"config cfg.toml:2:1: unknown key network.allowed_domain (did you mean allowed_domains?)"},
		{"[netwrok]\nallowed_domains = []\n",
			"config cfg.toml:1:2: unknown section [netwrok] (did you mean [network]?)"},
		{"bogus_key = 1\n",
			"config cfg.toml:1:1: unknown key bogus_key (remove it or check the spelling)"},
		{"sandbox_mode = \"read-only\"\nbogus = 1\n[network]\nallowed_domian = []\n",
			"config cfg.toml:2:1: unknown key bogus (remove it or check the spelling); config cfg.toml:4:1: unknown key network.allowed_domian (did you mean allowed_domains?)"},
		{"[sandbox_workspace_write]\nallow_git_writes = \"yes\"\n",
			"config cfg.toml:2:20: key sandbox_workspace_write.allow_git_writes: want a boolean (true or false), got a string"},
		{"sandbox_mode = 3\n",
			"config cfg.toml:1:16: key sandbox_mode: want a string, got an integer"},
		{"[network]\nallowed_domains = \"x\"\n",
			"config cfg.toml:2:19: key network.allowed_domains: want an array of strings, got a string"},
		{"[sandbox_workspace_write]\nwritable_roots = [1]\n",
			"config cfg.toml:2:19: key sandbox_workspace_write.writable_roots: want an array of strings, got an integer in the array"},
		{"network = 1\n",
			"config cfg.toml:1:11: key network: want a table ([network]), got an integer"},
		{"[linux]\nallow_degraded = 1.5\n",
			"config cfg.toml:2:18: key linux.allow_degraded: want a boolean (true or false), got a float"},
	} {
		_, err := ParseConfig("cfg.toml", []byte(c.toml))
		if err == nil {
			t.Errorf("%q: no error", c.toml)
			continue
		}
		if err.Error() != c.want {
			t.Errorf("%q:\n got %s\nwant %s", c.toml, err, c.want)
		}
		for _, leak := range []string{"struct field", "policy.", "Section", "[]string", "*bool"} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("%q: message shows Go's names (%q): %s", c.toml, leak, err)
			}
		}
	}
}
