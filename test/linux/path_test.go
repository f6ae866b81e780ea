//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPathUnsearchableDir: a PATH whose first directory the user cannot
// search (as `sudo -u` leaves root's /root/bin in it) finds commands in
// the later ones, and a command found nowhere is "command not found",
// 127, as the shell says, in a lone run, through the resident helper, in
// a session and without a sandbox (danger-full-access, where the lookup
// was os/exec's, in agentbox's own PATH). A file found but not executable stays 126. Before, every
// lookup past such a directory that found nothing was 126 "permission
// denied (not executable)".
func TestPathUnsearchableDir(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, noCodex)
		// Owned by another user, mode 0700: not searchable by u, nor
		// by root inside the sandbox (no capabilities there).
		locked := filepath.Join(fx.dir, "locked")
		if err := os.MkdirAll(filepath.Join(locked, "bin"), 0o700); err != nil {
			t.Fatal(err)
		}
		owner := 0
		if u.root() {
			owner = 65534
		}
		for _, p := range []string{locked, filepath.Join(locked, "bin")} {
			if err := os.Chown(p, owner, owner); err != nil {
				t.Fatal(err)
			}
		}
		// A later directory with a file that is not executable.
		plain := filepath.Join(fx.dir, "plain")
		if err := os.Mkdir(plain, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(plain, "notexec-agentbox"), []byte("#!/bin/sh\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		path := "PATH=" + filepath.Join(locked, "bin") + ":" + plain + ":" + hostPATH
		// The control: the directory really is unsearchable in the
		// sandbox, for this user.
		if r := runWith(t, u, runOpts{env: append(fx.env(), path, "AGENTBOX_RESIDENT=0"), dir: fx.ws}, "run", "-C", fx.ws, "--", "/bin/sh", "-c", "ls "+locked+"/bin"); r.code == 0 {
			t.Logf("%s can search %s inside the sandbox: this user tests nothing here (%v)", u.name, locked, r)
		}

		for _, p := range argvPaths(t, fx, path) {
			how, run := p.how, p.run
			if code, out, errs := run("sh", "-c", "echo ran"); code != 0 || out != "ran\n" {
				t.Errorf("%s: sh -c: exit %d, stdout %q, stderr %q", how, code, out, errs)
			}
			code, _, errs := run("nosuchcmd-agentbox")
			if code != 127 || !strings.Contains(errs, "nosuchcmd-agentbox: command not found") || strings.Contains(errs, "permission denied") {
				t.Errorf("%s: nosuchcmd: exit %d, stderr %q; want 127, command not found", how, code, errs)
			}
			code, _, errs = run("notexec-agentbox")
			if code != 126 || !strings.Contains(errs, "permission denied") {
				t.Errorf("%s: a file that is not executable: exit %d, stderr %q; want 126", how, code, errs)
			}
		}
	})
}

// argvPath is one way a command given as argv runs (trust_test.go's
// runPath runs a script): a lone run, one without a sandbox,
// one the resident helper serves, a session's.
type argvPath struct {
	how string
	run func(argv ...string) (code int, stdout, stderr string)
}

// argvPaths are the paths `agentbox run -C ws -- argv` and the MCP run
// tool take for fx's user, each with env added to the fixture's.
func argvPaths(t *testing.T, fx *fixture, env ...string) []argvPath {
	t.Helper()
	u := fx.u
	lone := runOpts{env: append(append(fx.env(), env...), "AGENTBOX_RESIDENT=0"), dir: fx.ws}
	cli := func(o runOpts, flags ...string) func(argv ...string) (int, string, string) {
		return func(argv ...string) (int, string, string) {
			r := execute(t, u, o, binPath, append(append([]string{"run", "-C", fx.ws}, flags...), append([]string{"--"}, argv...)...)...)
			return r.code, r.stdout, r.stderr
		}
	}
	re := newResidentEnv(t, fx, env...)
	re.warm(t)
	served := cli(runOpts{env: re.env(), dir: fx.ws})
	cs, _, _ := mcpServerCmd(t, command(u, runOpts{env: append(fx.env(), env...), dir: fx.ws}, binPath, "mcp", "-C", fx.ws))
	return []argvPath{
		{"lone run", cli(lone)},
		{"danger-full-access", cli(lone, "-s", "danger-full-access")},
		{"resident helper", func(argv ...string) (int, string, string) {
			// Served, or the check is of a lone run again.
			if ok, r := re.served(t, runOpts{}, nil, "true"); !ok {
				t.Fatalf("not served by the helper: %v", r)
			}
			return served(argv...)
		}},
		{"session", func(argv ...string) (int, string, string) {
			r := mcpRun(t, cs, map[string]any{"command": argv})
			return r.ExitCode, r.Stdout, r.Stderr
		}},
	}
}
