package policy

import (
	"strings"
	"testing"
)

func TestNetworkConfig(t *testing.T) {
	cases := []struct {
		name, toml string
		want       []string // substrings of the error; nil = success
	}{
		{"ok", "[network]\nallowed_domains = [\"github.com\", \"*.githubusercontent.com\", \"proxy.golang.org:443\", \"10.1.2.3\", \"192.168.0.0/16\"]\ndenied_domains = [\"gist.github.com\"]\nallow_local_binding = false\n", nil},
		{"unknown key", "[network]\nallowed_domain = []\n", []string{"unknown key", "network.allowed_domain"}},
		{"wrong type", "[network]\nallow_local_binding = \"no\"\n", []string{"cfg.toml", "allow_local_binding"}},
		{"bad allowed", "[network]\nallowed_domains = [\"ok.com\", \"**.x\"]\n", []string{"cfg.toml", "network.allowed_domains", `"**.x"`}},
		{"bad denied", "[network]\ndenied_domains = [\"10.0.0.1/8\"]\n", []string{"cfg.toml", "network.denied_domains", `"10.0.0.1/8"`, "host bits"}},
		{"empty", "[network]\nallowed_domains = [\"\"]\n", []string{"network.allowed_domains", "empty"}},
		{"scheme", "[network]\nallowed_domains = [\"https://x.com\"]\n", []string{"network.allowed_domains", "scheme"}},
		{"port", "[network]\nallowed_domains = [\"x.com:99999\"]\n", []string{"network.allowed_domains", "99999"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig("cfg.toml", []byte(c.toml))
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want error containing %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestResolveEgress(t *testing.T) {
	dir := realTemp(t)
	yes := true
	parse := func(s string) *Config {
		c, err := ParseConfig("c.toml", []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// Flags add to the config's list; deny and allow_local_binding come
	// from the config.
	pol, err := Resolve(Options{Cwd: dir, getenv: noEnv, AllowDomains: []string{"b.com"},
		Config: parse("[network]\nallowed_domains = [\"a.com\"]\ndenied_domains = [\"x.a.com\"]\nallow_local_binding = true\n")})
	if err != nil {
		t.Fatal(err)
	}
	if pol.Network() || pol.Egress() == nil || len(pol.Egress().Allowed) != 2 || len(pol.Egress().Denied) != 1 || !pol.Egress().AllowLocal {
		t.Fatalf("egress: network=%v %+v", pol.Network(), pol.Egress())
	}
	if !pol.Egress().Decide("b.com", 443).Allow || pol.Egress().Decide("x.a.com", 443).Allow {
		t.Errorf("merged rules decide wrongly")
	}
	// No allow-list: no egress.
	pol, err = Resolve(Options{Cwd: dir, getenv: noEnv})
	if err != nil || pol.Egress() != nil {
		t.Fatalf("no allow-list: %+v %v", pol, err)
	}
	errCases := []struct {
		name string
		o    Options
		want []string
	}{
		{"--network and --allow-domain", Options{Network: &yes, AllowDomains: []string{"a.com"}}, []string{"Options.Network", "Options.AllowDomains"}},
		{"network_access and allowed_domains", Options{Config: parse("[sandbox_workspace_write]\nnetwork_access = true\n[network]\nallowed_domains = [\"a.com\"]\n")},
			[]string{"network_access = true in c.toml", "network.allowed_domains"}},
		{"danger-full-access", Options{Mode: DangerFullAccess, AllowDomains: []string{"a.com"}}, []string{"danger-full-access", "Options.AllowDomains"}},
		{"bad flag", Options{AllowDomains: []string{"*"}}, []string{"Options.AllowDomains", `"*"`}},
		{"deny with full network", Options{Network: &yes, Config: parse("[network]\ndenied_domains = [\"a.com\"]\n")}, []string{"denied_domains", "Options.Network"}},
	}
	for _, c := range errCases {
		t.Run(c.name, func(t *testing.T) {
			c.o.Cwd, c.o.getenv = dir, noEnv
			_, err := Resolve(c.o)
			if err == nil {
				t.Fatalf("want an error naming %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
