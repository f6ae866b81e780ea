//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Codex's permission profiles (issue 24): Codex's own documented example
// keeps the workspace writable, reads elsewhere working and the .env
// files hidden, through lone runs, the resident helper and MCP
// sessions, as root and as a plain user.

const codexExample = `default_permissions = "workspace"

[permissions.workspace.filesystem]
":project_roots" = { "." = "write", "**/*.env" = "none" }
glob_scan_max_depth = 3
`

// codexFixture writes the example config beside the workspace and plants
// .env files in it: one at the top, one deeper than glob_scan_max_depth,
// and one outside the workspace, which the profile does not hide.
func codexFixture(t *testing.T, u *testUser) (fx *fixture, cfg string) {
	t.Helper()
	fx = newFixture(t, u)
	cfg = filepath.Join(fx.dir, "codex.toml")
	files := map[string]string{
		cfg:                          codexExample,
		filepath.Join(fx.ws, ".env"): secretMark + " top\n",
		filepath.Join(fx.ws, "sub/a/b/c/d/x.env"): secretMark + " deep\n",
		filepath.Join(fx.out, "other.env"):        "OUTSIDEENV\n",
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	chownR(t, fx.dir, u)
	return fx, cfg
}

// codexScript reads the hidden files every way, writes the workspace and
// reads outside it.
const codexScript = `exec 2>/dev/null
cat "$WS/.env" "$WS/sub/a/b/c/d/x.env" /proc/self/root"$WS/.env"
cp "$WS/.env" "$WS/copied"; cat "$WS/copied"
ln -s .env "$WS/link.txt"; cat "$WS/link.txt"; ln "$WS/.env" "$WS/hard.txt"; cat "$WS/hard.txt"; rm -f "$WS/link.txt" "$WS/hard.txt"
echo tampered > "$WS/.env"; mv "$WS/.env" "$WS/moved.env"; cat "$WS/moved.env"
grep -r SECRETBYTES "$WS"
exec 2>&1
echo written > "$WS/sub/new.txt" && echo WROTE
cat "$OUT/file.txt" "$OUT/other.env" /etc/hostname >/dev/null && echo READ-ELSEWHERE
cat "$OUT/other.env"
`

func checkCodexRun(t *testing.T, fx *fixture, out string) {
	t.Helper()
	if strings.Contains(out, secretMark) {
		t.Errorf("a hidden .env reached the command:\n%s", out)
	}
	for _, want := range []string{"WROTE", "READ-ELSEWHERE", "OUTSIDEENV"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s missing:\n%s", want, out)
		}
	}
	assertContent(t, filepath.Join(fx.ws, "sub/new.txt"), "written\n")
	assertContent(t, filepath.Join(fx.ws, ".env"), secretMark+" top\n")
	assertContent(t, filepath.Join(fx.ws, "sub/a/b/c/d/x.env"), secretMark+" deep\n")
	if b, err := os.ReadFile(filepath.Join(fx.ws, "copied")); err == nil && strings.Contains(string(b), secretMark) {
		t.Errorf("the copy holds the secret")
	}
	os.Remove(filepath.Join(fx.ws, "sub/new.txt"))
}

func TestCodexProfileExample(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		t.Run("lone", func(t *testing.T) {
			fx, cfg := codexFixture(t, u)
			// Control: on the host the script reads the secret.
			if r := host(t, u, runOpts{env: fx.env(), dir: fx.ws}, "/bin/sh", "-c", `cat "$WS/.env"`); !strings.Contains(r.stdout, secretMark) {
				t.Fatalf("control: %v", r)
			}
			r := runWith(t, u, runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0"), dir: fx.ws}, "run", "--config", cfg, "-C", fx.ws, "--", "/bin/sh", "-c", codexScript)
			if r.code != 0 {
				t.Fatalf("run: %v", r)
			}
			checkCodexRun(t, fx, r.stdout)
		})
		t.Run("helper", func(t *testing.T) {
			fx, cfg := codexFixture(t, u)
			re := newResidentEnv(t, fx)
			extra := []string{"--config", cfg}
			re.warm(t, extra...)
			ok, r := re.served(t, runOpts{}, extra, codexScript)
			if !ok || r.code != 0 {
				t.Fatalf("served %v: %v", ok, r)
			}
			checkCodexRun(t, fx, r.stdout)
		})
		t.Run("mcp", func(t *testing.T) {
			fx, cfg := codexFixture(t, u)
			cs, _, _ := mcpServer(t, u, fx, "--config", cfg)
			r := mcpSh(t, cs, codexScript)
			if r.ExitCode != 0 {
				t.Fatalf("mcp: %v", r)
			}
			checkCodexRun(t, fx, r.Stdout)
			// A .env that appears between two commands of the session is
			// hidden from the next.
			late := filepath.Join(fx.ws, "sub", "late.env")
			if err := os.WriteFile(late, []byte(secretMark+" late\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			chownR(t, fx.ws, u)
			r = mcpSh(t, cs, `cat "$WS/sub/late.env"; `+codexScript)
			if r.ExitCode != 0 {
				t.Fatalf("mcp: %v", r)
			}
			checkCodexRun(t, fx, r.Stdout)
		})
	})
}

// TestCodexProfileMixed: a file with a profile and sandbox_mode does not
// run, and says why, naming both.
func TestCodexProfileMixed(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		cfg := filepath.Join(fx.dir, "mixed.toml")
		if err := os.WriteFile(cfg, []byte("sandbox_mode = \"workspace-write\"\n"+codexExample), 0o644); err != nil {
			t.Fatal(err)
		}
		chownR(t, fx.dir, u)
		r := runWith(t, u, runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0"), dir: fx.ws}, "run", "--config", cfg, "-C", fx.ws, "--", "/bin/sh", "-c", "echo ran > $WS/ran")
		if r.code != 125 || !strings.Contains(r.stderr, "default_permissions") || !strings.Contains(r.stderr, "sandbox_mode") {
			t.Errorf("mixed config: %v", r)
		}
		assertAbsent(t, filepath.Join(fx.ws, "ran"))
	})
}
