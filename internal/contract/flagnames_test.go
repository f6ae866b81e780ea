package contract

import "testing"

func TestFlagNames(t *testing.T) {
	for in, want := range map[string]string{
		"workspace (Options.Cwd) /x does not exist":                          "workspace (-C) /x does not exist",
		"Options.Network together with an allow-list (Options.AllowDomains)": "--network together with an allow-list (--allow-domain)",
		"accept these gaps with Options.AllowDegraded":                       "accept these gaps with --allow-degraded",
		"Options.AddDirs /a: x; or with Options.Mode read-only":              "--add-dir /a: x; or with -s read-only",
		"no option here": "no option here",
	} {
		if got := FlagNames(in); got != want {
			t.Errorf("FlagNames(%q) = %q, want %q", in, got, want)
		}
	}
}
