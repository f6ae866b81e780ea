package apparmor

import (
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestProfileGolden(t *testing.T) {
	got, err := Profile("/usr/local/bin/agentbox")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "agentbox.profile")
	if *update {
		os.WriteFile(golden, []byte(got), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("Profile =\n%s\nwant (%s)\n%s", got, golden, want)
	}
	if bin := ProfileBinary([]byte(got)); bin != "/usr/local/bin/agentbox" {
		t.Errorf("ProfileBinary = %q", bin)
	}
}

func TestProfilePaths(t *testing.T) {
	for _, c := range []struct {
		path, attach string // attach "" = refused
	}{
		{"/home/u/go/bin/agentbox", `"/home/u/go/bin/agentbox"`},
		{"/opt/my tools/agentbox", `"/opt/my tools/agentbox"`},
		{"/opt/a,b@c#d/agentbox", `"/opt/a,b@c#d/agentbox"`},
		{"relative/agentbox", ""},
		{"/opt/../agentbox", ""},
		{"/opt/*/agentbox", ""},
		{"/opt/a?b", ""},
		{"/opt/[ab]", ""},
		{"/opt/{a,b}", ""},
		{"/opt/^a", ""},
		{`/opt/a"b`, ""},
		{`/opt/a\b`, ""},
		{"/opt/a\nb", ""},
		{"/opt/a\x7fb", ""},
	} {
		got, err := Profile(c.path)
		if c.attach == "" {
			if err == nil {
				t.Errorf("Profile(%q) accepted:\n%s", c.path, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("Profile(%q): %v", c.path, err)
			continue
		}
		if want := "profile agentbox " + c.attach + " flags=(unconfined) {"; !strings.Contains(got, want) {
			t.Errorf("Profile(%q) lacks %q:\n%s", c.path, want, got)
		}
		if ProfileBinary([]byte(got)) != c.path {
			t.Errorf("ProfileBinary of Profile(%q) = %q", c.path, ProfileBinary([]byte(got)))
		}
	}
	if ProfileBinary([]byte("abi <abi/4.0>,\nprofile x /x {}\n")) != "" {
		t.Error("a profile agentbox did not write counts as agentbox's")
	}
}

// fakeSystem is a machine described by file contents; absent files do not
// exist.
func fakeSystem(euid int, files map[string]string) System {
	return System{
		ReadFile: func(name string) ([]byte, error) {
			if s, ok := files[name]; ok {
				return []byte(s), nil
			}
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		},
		Geteuid: func() int { return euid },
	}
}

// TestDoctorCheck: doctor's AppArmor line on machines with and without the
// restriction, with and without the profile.
func TestDoctorCheck(t *testing.T) {
	const exe = "/usr/local/bin/agentbox"
	profile, _ := Profile(exe)
	stale, _ := Profile("/old/agentbox")
	restricted := map[string]string{enabledParam: "Y\n", restrictSysctl: "1\n"}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, c := range []struct {
		name   string
		euid   int
		files  map[string]string
		ok     bool
		needed bool
		want   []string // regexps the detail must match
	}{
		{"no apparmor", 1000, map[string]string{}, true, false, []string{`not active`}},
		{"apparmor, sysctl absent", 1000, map[string]string{enabledParam: "Y\n"}, true, false, []string{`does not restrict`, `no profile needed`}},
		{"apparmor, unrestricted", 1000, map[string]string{enabledParam: "Y\n", restrictSysctl: "0\n"}, true, false, []string{`does not restrict`}},
		{"sysctl set, apparmor off", 1000, map[string]string{enabledParam: "N\n", restrictSysctl: "1\n"}, true, false, []string{`not active`}},
		{"restricted, no profile", 1000, restricted, false, true,
			[]string{`kernel\.apparmor_restrict_unprivileged_userns = 1`, `no agentbox profile`, "sudo " + regexp.QuoteMeta(exe) + " setup"}},
		{"restricted, no profile, root", 0, restricted, true, true, []string{`root is exempt`, `sudo .* setup`}},
		{"restricted, profile loaded", 1000, with(restricted, ProfilePath, profile, loadedProfiles, "nvidia_modprobe (enforce)\nagentbox (unconfined)\n"), true, false,
			[]string{`profile for /usr/local/bin/agentbox is installed, loaded`}},
		{"restricted, profile not loaded", 1000, with(restricted, ProfilePath, profile, loadedProfiles, "other (enforce)\n"), false, true,
			[]string{`installed but not loaded`, `apparmor_parser -r /etc/apparmor.d/agentbox`}},
		{"restricted, profile list unreadable", 1000, with(restricted, ProfilePath, profile), true, false, []string{`unknown`}},
		{"restricted, stale profile", 1000, with(restricted, ProfilePath, stale, loadedProfiles, "agentbox (unconfined)\n"), false, true,
			[]string{`is for /old/agentbox, not this binary`, `setup`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := Inspect(fakeSystem(c.euid, c.files), exe)
			ok, detail := st.Check()
			if ok != c.ok {
				t.Errorf("ok = %v, want %v: %s", ok, c.ok, detail)
			}
			if st.Needed() != c.needed {
				t.Errorf("Needed = %v, want %v", st.Needed(), c.needed)
			}
			for _, w := range c.want {
				if !regexp.MustCompile(w).MatchString(detail) {
					t.Errorf("detail %q does not match %q", detail, w)
				}
			}
		})
	}
}
