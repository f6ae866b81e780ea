//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExecErrorsAgree: the same bad command gets the same status on every
// path, the one table of internal/exitcode (POSIX and bash): 127 for a
// command that is not there (ENOENT, ENOTDIR), 126 for one the kernel
// would not run (EACCES, ENOEXEC, a directory, ELOOP, E2BIG), in a lone
// run, a run served by the resident helper (its stderr a pipe), a
// session (`agentbox mcp`) and without a sandbox. Before, a file of garbage with
// its x bits was 125 without a sandbox (os/exec's ENOEXEC was not in
// that path's table), and an argument over the kernel's limit was 125 in
// a session (the zygote's table had no E2BIG) but 126 under a session
// command's init; a link to itself was 127 on every path (the PATH
// lookup called any stat error but EACCES "not found"; bash says 126).
func TestExecErrorsAgree(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, noCodex)
		write := func(name, body string, mode os.FileMode) string {
			p := filepath.Join(fx.ws, name)
			if err := os.WriteFile(p, []byte(body), mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(p, u.uid, u.gid); err != nil {
				t.Fatal(err)
			}
			return p
		}
		plain := write("plain.sh", "#!/bin/sh\necho ran\n", 0o644)
		// x bits, but neither ELF nor #!: execve says ENOEXEC (the
		// shell would read it as a script; agentbox does not).
		garbage := write("garbage", "\x00\x01\x02 echo ran\n", 0o755)
		// A link to itself: stat says ELOOP, which exec would say too.
		loop := filepath.Join(fx.ws, "loop")
		if err := os.Symlink("loop", loop); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name string
			argv []string
			want int
		}{
			{"ENOENT", []string{filepath.Join(fx.ws, "absent")}, 127},
			{"ENOTDIR", []string{filepath.Join(plain, "below")}, 127},
			{"not-found-on-PATH", []string{"agentbox-no-such-cmd"}, 127},
			{"EACCES", []string{plain}, 126},
			{"ENOEXEC", []string{garbage}, 126},
			{"directory", []string{fx.ws}, 126},
			{"ELOOP", []string{loop}, 126},
		}
		paths := argvPaths(t, fx)
		for _, p := range paths {
			// The control: the path runs commands at all.
			if code, out, errs := p.run("sh", "-c", "echo ran"); code != 0 || out != "ran\n" {
				t.Fatalf("%s: sh -c: exit %d, stdout %q, stderr %q", p.how, code, out, errs)
			}
			for _, c := range cases {
				code, out, errs := p.run(c.argv...)
				if code != c.want || strings.Contains(out, "ran") {
					t.Errorf("%s: %s (%s): exit %d, stdout %q, stderr %q; want %d", p.how, c.name, c.argv[0], code, out, errs, c.want)
				}
			}
		}
		// E2BIG: one argument over MAX_ARG_STRLEN (32 pages). Only a
		// session can carry it: agentbox's own exec would refuse it
		// on the other paths.
		session := paths[len(paths)-1]
		if code, _, errs := session.run("/bin/echo", strings.Repeat("x", 200<<10)); code != 126 || !strings.Contains(errs, "argument list too long") {
			t.Errorf("session: E2BIG: exit %d, stderr %q; want 126, argument list too long", code, errs)
		}
	})
}
