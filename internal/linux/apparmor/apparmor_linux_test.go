package apparmor

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProfileParses runs the installed apparmor_parser over the profile
// without loading it. Only AppArmor 4 parsers know `abi <abi/4.0>` and
// `userns`; an older one checks everything else (the structure and the
// quoted attachment) on a copy with those two lines changed, and the test
// says what it could not check.
func TestProfileParses(t *testing.T) {
	parser, err := findParser()
	if err != nil {
		t.Skip("no apparmor_parser installed: the profile's syntax is checked only by the golden file here")
	}
	if _, err := os.Stat("/etc/apparmor.d/tunables/global"); err != nil {
		t.Skipf("%s has no /etc/apparmor.d/tunables/global to include", parser)
	}
	_, err = os.Stat("/etc/apparmor.d/abi/4.0")
	v4 := err == nil
	for _, exe := range []string{"/usr/local/bin/agentbox", "/opt/my tools/a,b@c#d/agentbox"} {
		p, err := Profile(exe)
		if err != nil {
			t.Fatal(err)
		}
		if !v4 {
			p = strings.Replace(p, "abi <abi/4.0>,", "abi <abi/3.0>,", 1)
			p = strings.Replace(p, "  userns,\n", "", 1)
		}
		f := filepath.Join(t.TempDir(), "agentbox")
		if err := os.WriteFile(f, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
		// -Q: compile only, never load; -K: no cache.
		out, err := exec.Command(parser, "-Q", "-K", f).CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if err != nil {
			t.Errorf("%s -Q -K rejects the profile for %q: %v\n%s\n%s", parser, exe, err, out, p)
		}
	}
	if !v4 {
		t.Logf("%s predates AppArmor 4 (no abi/4.0): checked the profile with `abi <abi/3.0>` and without `userns,`; those two lines are checked by the golden file only", parser)
	}
}

// fakeHost is a machine where AppArmor restricts user namespaces, with the
// profile directory, the cache and the kernel's profile list in dir, and
// an apparmor_parser that logs its arguments and "loads" by writing that
// list (unless dir/noload exists).
func fakeHost(t *testing.T, euid *int, restrict string) (h *Host, dir string, proofs *int) {
	t.Helper()
	dir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "apparmor.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	parser := filepath.Join(dir, "apparmor_parser")
	script := "#!/bin/sh\necho \"$@\" >> " + dir + "/parser.log\n" +
		"[ -e " + dir + "/noload ] && exit 0\n" +
		"case \"$1\" in -r) echo 'agentbox (unconfined)' > " + dir + "/profiles;; -R) : > " + dir + "/profiles;; esac\n"
	if err := os.WriteFile(parser, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	profile := filepath.Join(dir, "apparmor.d", "agentbox")
	fixed := map[string]string{enabledParam: "Y\n", restrictSysctl: restrict + "\n"}
	sys := System{
		ReadFile: func(name string) ([]byte, error) {
			switch {
			case name == loadedProfiles:
				return os.ReadFile(filepath.Join(dir, "profiles"))
			case name == profile:
				return os.ReadFile(name)
			}
			if s, ok := fixed[name]; ok {
				return []byte(s), nil
			}
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		},
		Geteuid:     func() int { return *euid },
		ProfilePath: profile,
	}
	os.WriteFile(filepath.Join(dir, "profiles"), []byte("other (enforce)\n"), 0o644)
	proofs = new(int)
	h = &Host{System: sys, CacheDir: filepath.Join(dir, "cache"), Parser: parser,
		Prove:    func(context.Context, io.Writer, string) error { *proofs++; return nil },
		Confined: func() []int { return nil }}
	return h, dir, proofs
}

func parserLog(t *testing.T, dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "parser.log"))
	return string(b)
}

// TestSetupFlow: setup writes, loads and proves the profile, is
// idempotent, repairs a profile for another binary, refuses a file it did
// not write; cleanup unloads and removes it and its cache; both need root.
func TestSetupFlow(t *testing.T) {
	const exe = "/usr/local/bin/agentbox"
	euid := 1000
	h, dir, proofs := fakeHost(t, &euid, "1")
	profile := h.ProfilePath
	var out strings.Builder
	ctx := context.Background()

	if err := h.Setup(ctx, &out, exe); !errors.Is(err, ErrNotRoot) {
		t.Errorf("setup as a user: %v, want ErrNotRoot", err)
	}
	if _, err := os.Stat(profile); err == nil {
		t.Errorf("setup as a user wrote %s", profile)
	}

	euid = 0
	want, _ := Profile(exe)
	for i := range 2 {
		out.Reset()
		if err := h.Setup(ctx, &out, exe); err != nil {
			t.Fatalf("setup %d: %v", i, err)
		}
		if b, _ := os.ReadFile(profile); string(b) != want {
			t.Errorf("setup %d: profile =\n%s", i, b)
		}
		if *proofs != i+1 {
			t.Errorf("setup %d: proven %d times", i, *proofs)
		}
	}
	if !strings.Contains(out.String(), "up to date") {
		t.Errorf("second setup said %q", out.String())
	}
	if got := parserLog(t, dir); got != "-r "+profile+"\n-r "+profile+"\n" {
		t.Errorf("parser calls:\n%s", got)
	}
	if ok, detail := Inspect(h.System, exe).Check(); !ok || !strings.Contains(detail, "loaded") {
		t.Errorf("doctor after setup: %v %s", ok, detail)
	}

	// The binary moved: setup points the profile at the new path.
	if err := h.Setup(ctx, &out, "/opt/agentbox"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(profile); ProfileBinary(b) != "/opt/agentbox" {
		t.Errorf("profile not repaired:\n%s", b)
	}

	// A parser that reports success without loading anything.
	os.WriteFile(filepath.Join(dir, "noload"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "profiles"), nil, 0o644)
	if err := h.Setup(ctx, &out, exe); err == nil || !strings.Contains(err.Error(), "lists no profile") {
		t.Errorf("setup with a profile that did not load: %v", err)
	}
	os.Remove(filepath.Join(dir, "noload"))
	if err := h.Setup(ctx, &out, exe); err != nil {
		t.Fatal(err)
	}

	euid = 1000
	if err := h.Remove(ctx, &out); !errors.Is(err, ErrNotRoot) {
		t.Errorf("cleanup as a user: %v, want ErrNotRoot", err)
	}
	euid = 0
	cache := filepath.Join(h.CacheDir, "abc123.0")
	os.MkdirAll(cache, 0o755)
	os.WriteFile(filepath.Join(cache, "agentbox"), nil, 0o644)
	os.WriteFile(filepath.Join(cache, "other"), nil, 0o644)
	os.Truncate(filepath.Join(dir, "parser.log"), 0)
	// In use by a running agentbox (another user's, maybe): kept, and
	// said so.
	h.Confined = func() []int { return []int{4321} }
	out.Reset()
	if err := h.Remove(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if !fileExists(profile) || parserLog(t, dir) != "" || !strings.Contains(out.String(), "kept AppArmor profile") || !strings.Contains(out.String(), "4321") {
		t.Errorf("cleanup with the profile in use: profile %v, parser %q, out %q", fileExists(profile), parserLog(t, dir), out.String())
	}
	h.Confined = func() []int { return nil }
	if err := h.Remove(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if got := parserLog(t, dir); got != "-R "+profile+"\n" {
		t.Errorf("cleanup parser calls:\n%s", got)
	}
	for _, p := range []string{profile, filepath.Join(cache, "agentbox")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("cleanup left %s", p)
		}
	}
	if _, err := os.Stat(filepath.Join(cache, "other")); err != nil {
		t.Errorf("cleanup removed another profile's cache: %v", err)
	}
	if err := h.Remove(ctx, &out); err != nil {
		t.Errorf("second cleanup: %v", err)
	}

	// A file agentbox did not write is neither replaced nor removed.
	os.WriteFile(profile, []byte("abi <abi/4.0>,\nprofile agentbox /x {}\n"), 0o644)
	if err := h.Setup(ctx, &out, exe); err == nil {
		t.Errorf("setup replaced a file it did not write")
	}
	if err := h.Remove(ctx, &out); err != nil || !fileExists(profile) {
		t.Errorf("cleanup of a file it did not write: %v", err)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestSetupNotNeeded: no restriction, nothing written, nothing run.
func TestSetupNotNeeded(t *testing.T) {
	euid := 0
	h, dir, proofs := fakeHost(t, &euid, "0")
	var out strings.Builder
	if err := h.Setup(context.Background(), &out, "/usr/local/bin/agentbox"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "nothing to set up") || fileExists(h.ProfilePath) || parserLog(t, dir) != "" || *proofs != 0 {
		t.Errorf("setup without the restriction: %q, profile %v, parser %q, proofs %d", out.String(), fileExists(h.ProfilePath), parserLog(t, dir), *proofs)
	}
}
