package policy

import (
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParsePort(t *testing.T) {
	for _, ok := range []string{"1", "80", "5432", "65535"} {
		if _, err := ParsePort(ok); err != nil {
			t.Errorf("ParsePort(%q): %v", ok, err)
		}
	}
	// Nothing but one port: the host-port relay must not be turned into
	// reaching another port, a range, an address or a name.
	for _, bad := range []string{"", "0", "00", "65536", "99999", "123456", "-1", "+80", " 80", "80 ", "0x50", "1-100", "80,81",
		"localhost", "localhost:5432", "127.0.0.1:5432", "[::1]:5432", "::1", "5432/tcp", "٣٠٠٠"} {
		if p, err := ParsePort(bad); err == nil {
			t.Errorf("ParsePort(%q) = %d, want an error", bad, p)
		}
	}
}

func TestParsePublish(t *testing.T) {
	for in, want := range map[string]PortMap{"3000": {3000, 3000}, "8080:3000": {8080, 3000}, "1:65535": {1, 65535}} {
		if got, err := ParsePublish(in); err != nil || got != want {
			t.Errorf("ParsePublish(%q) = %v, %v; want %v", in, got, err, want)
		}
		if got := want.String(); got != in {
			t.Errorf("%v.String() = %q, want %q", want, got, in)
		}
	}
	for _, bad := range []string{"", ":", "8080:", ":3000", "0:3000", "8080:0", "127.0.0.1:8080:3000", "[::1]:8080", "0.0.0.0:80",
		"a:b", "8080:3000:1", "3000-3005", "65536:1"} {
		if m, err := ParsePublish(bad); err == nil {
			t.Errorf("ParsePublish(%q) = %v, want an error", bad, m)
		}
	}
}

func TestResolvePorts(t *testing.T) {
	dir := realTemp(t)
	yes := true
	parse := func(s string) *Config {
		c, err := ParseConfig("c.toml", []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	pol, err := resolveEnv(Options{Cwd: dir, Publish: []string{"9000:3001"}, HostPorts: []string{"6379"},
		Config: parse("[network]\npublish = [3000, \"8080:8000\"]\nhost_ports = [5432]\n")}, noEnv, runtime.GOOS)
	if err != nil {
		t.Fatal(err)
	}
	if want := []PortMap{{3000, 3000}, {8080, 8000}, {9000, 3001}}; !slices.Equal(pol.Publish(), want) {
		t.Errorf("Publish = %v, want %v", pol.Publish(), want)
	}
	if want := []uint16{5432, 6379}; !slices.Equal(pol.HostPorts(), want) {
		t.Errorf("HostPorts = %v, want %v", pol.HostPorts(), want)
	}
	// With an allow-list too.
	if _, err := resolveEnv(Options{Cwd: dir, Publish: []string{"3000"}, HostPorts: []string{"5432"}, AllowDomains: []string{"a.com"}}, noEnv, runtime.GOOS); err != nil {
		t.Errorf("with an allow-list: %v", err)
	}
	for _, c := range []struct {
		name string
		o    Options
		want []string
	}{
		{"network on", Options{Network: &yes, Publish: []string{"3000"}}, []string{"Options.Publish", "Options.Network"}},
		{"network on, host port", Options{Network: &yes, HostPorts: []string{"5432"}}, []string{"Options.HostPorts", "Options.Network"}},
		{"danger-full-access", Options{Mode: DangerFullAccess, HostPorts: []string{"5432"}}, []string{"Options.HostPorts", "danger-full-access"}},
		{"duplicate publish", Options{Publish: []string{"3000", "3000:4000"}}, []string{"Options.Publish", "3000", "twice"}},
		{"duplicate across", Options{Publish: []string{"3000"}, Config: parse("[network]\npublish = [3000]\n")}, []string{"Options.Publish", "key network.publish"}},
		{"duplicate host port", Options{HostPorts: []string{"5432", "5432"}}, []string{"Options.HostPorts", "5432", "twice"}},
		{"host port published", Options{HostPorts: []string{"8080"}, Publish: []string{"8080:3000"}}, []string{"8080", "also published"}},
		{"host port inner", Options{HostPorts: []string{"3000"}, Publish: []string{"8080:3000"}}, []string{"3000", "inner"}},
		{"bad flag", Options{HostPorts: []string{"0"}}, []string{"Options.HostPorts", "out of range"}},
		{"name flag", Options{HostPorts: []string{"localhost:5432"}}, []string{"Options.HostPorts", "not a port number"}},
		{"bad publish", Options{Publish: []string{"127.0.0.1:80:80"}}, []string{"Options.Publish", "no address"}},
		{"too many", Options{HostPorts: manyPorts(maxPorts + 1)}, []string{"at most 64"}},
	} {
		c.o.Cwd = dir
		_, err := resolveEnv(c.o, noEnv, runtime.GOOS)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v; want it to name %q", c.name, err, w)
			}
		}
	}
}

func TestConfigPorts(t *testing.T) {
	for _, c := range []struct{ toml, want string }{
		{"[network]\npublish = [0]\n", "network.publish"},
		{"[network]\npublish = [70000]\n", "out of range"},
		{"[network]\npublish = [1.5]\n", "float64"},
		{"[network]\npublish = [true]\n", "want a port number"},
		{"[network]\npublish = [\"x:1\"]\n", "network.publish"},
		{"[network]\nhost_ports = [\"localhost\"]\n", "network.host_ports"},
		{"[network]\nhost_ports = [-1]\n", "network.host_ports"},
		{"[network]\nhost_ports = [\"1-1024\"]\n", "not a port number"},
		{"[network]\nhost_ports = 5432\n", "host_ports"},
	} {
		_, err := ParseConfig("cfg.toml", []byte(c.toml))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "cfg.toml") {
			t.Errorf("%q: %v; want an error naming cfg.toml and %q", c.toml, err, c.want)
		}
	}
}

func manyPorts(n int) []string {
	var out []string
	for i := range n {
		out = append(out, strconv.Itoa(1000+i))
	}
	return out
}
