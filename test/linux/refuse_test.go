//go:build linux

package linux

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A workspace that confines nothing (/, the home or above it, a system
// directory itself) is refused in workspace-write mode, with 125 and a
// message naming the fix; read-only mode and danger-full-access still run
// there, and subdirectories (/var/tmp/x) are fine.

// TestRefuseSlashWorkspace: `cd / && agentbox run -- touch /usr/x` exits
// 125 and /usr/x does not appear (as root, it would be written otherwise),
// through a lone run and with the resident helper warm; -s read-only and
// danger-full-access from / still run.
func TestRefuseSlashWorkspace(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		target := filepath.Join("/usr", randName("abtest-"))
		t.Cleanup(func() { os.Remove(target) })
		fx := newFixture(t, u)
		re := newResidentEnv(t, fx)
		re.warm(t)
		for name, env := range map[string][]string{"lone": {"AGENTBOX_RESIDENT=0"}, "resident": nil} {
			r := execute(t, u, runOpts{dir: "/", env: append(re.env(), env...)}, binPath, "run", "--", "touch", target)
			if r.code != 125 {
				t.Errorf("%s: cd / && agentbox run -- touch %s: exit %d, want 125: %v", name, target, r.code, r)
			}
			for _, w := range []string{"workspace (-C) /", "confines nothing", "-C DIR", "-s read-only"} {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("%s: stderr %q does not name %q", name, r.stderr, w)
				}
			}
			assertAbsent(t, target)
		}
		if r := execute(t, u, runOpts{dir: "/", env: re.env()}, binPath, "run", "-s", "read-only", "--", "/bin/sh", "-c", "touch "+target+" 2>/dev/null; echo ran"); r.code != 0 || r.stdout != "ran\n" {
			t.Errorf("-s read-only from /: %v", r)
		}
		assertAbsent(t, target)
		if r := execute(t, u, runOpts{dir: "/", env: re.env()}, binPath, "run", "-s", "danger-full-access", "--", "true"); r.code != 0 {
			t.Errorf("danger-full-access from /: %v", r)
		}
		if r := execute(t, u, runOpts{dir: fx.ws, env: re.env()}, binPath, "run", "-C", fx.ws, "--add-dir", "/usr", "--", "true"); r.code != 125 || !strings.Contains(r.stderr, "--add-dir /usr is a system directory") {
			t.Errorf("--add-dir /usr: %v", r)
		}
	})
}

// TestRefuseMCPSlash: `agentbox mcp` started in / without -C (as Claude
// Desktop starts MCP servers) exits 125 at once, its input still open and
// unanswered, with a message naming -C.
func TestRefuseMCPSlash(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		needBin(t)
		cmd := command(u, runOpts{dir: "/"}, binPath, "mcp")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer stdin.Close()
		stdin.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}` + "\n"))
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if code := exitCode(cmd, err); code != 125 {
				t.Errorf("agentbox mcp from /: exit %d, want 125 (stderr %q)", code, stderr.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("agentbox mcp from / did not exit with its input open (stdout %q, stderr %q)", stdout.String(), stderr.String())
		}
		if stdout.Len() != 0 {
			t.Errorf("agentbox mcp from / answered: %q", stdout.String())
		}
		for _, w := range []string{"workspace (-C) /", "-C DIR", "server's arguments"} {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("stderr %q does not name %q", stderr.String(), w)
			}
		}
		// -s read-only from / still serves.
		cs, _, _ := mcpServerCmd(t, command(u, runOpts{dir: "/"}, binPath, "mcp", "-s", "read-only"))
		if m := mcpSh(t, cs, "echo ok"); m.Stdout != "ok\n" {
			t.Errorf("agentbox mcp -s read-only from /: %v", m)
		}
	})
}

// TestRefuseHomeWorkspace: the home directory (and a directory above it)
// as the workspace, named or the current directory, or as --add-dir, is
// refused; a subdirectory of it and a directory under /var/tmp are not.
func TestRefuseHomeWorkspace(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		sub := filepath.Join(fx.home, "project")
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		chownR(t, fx.home, u)
		env := append(fx.env(), "AGENTBOX_RESIDENT=0")
		for _, c := range []struct {
			name string
			dir  string
			args []string
			want string // "" = accepted
		}{
			{"-C home", fx.ws, []string{"-C", fx.home}, "is your home directory"},
			{"cwd home", fx.home, nil, "is your home directory"},
			{"-C above home", fx.ws, []string{"-C", fx.dir}, "contains your home directory"},
			{"--add-dir home", fx.ws, []string{"-C", fx.ws, "--add-dir", fx.home}, "--add-dir " + fx.home + " is your home directory"},
			{"subdirectory of home", sub, nil, ""},
			{"under /var/tmp", fx.ws, []string{"-C", fx.ws}, ""},
		} {
			args := append(append([]string{"run"}, c.args...), "--", "/bin/sh", "-c", `echo x > ran.txt && echo ran`)
			r := runWith(t, u, runOpts{dir: c.dir, env: env}, args...)
			if c.want == "" {
				if r.code != 0 || r.stdout != "ran\n" {
					t.Errorf("%s: refused: %v", c.name, r)
				}
				continue
			}
			if r.code != 125 || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, "confines nothing") {
				t.Errorf("%s: exit %d, want 125 naming %q: %v", c.name, r.code, c.want, r)
			}
		}
		assertAbsent(t, filepath.Join(fx.home, "ran.txt"))
		assertAbsent(t, filepath.Join(fx.dir, "ran.txt"))
		assertContent(t, filepath.Join(sub, "ran.txt"), "x\n")
	})
}
