//go:build linux

package linux

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Secrets (issue 24): credential files under the home are hidden, secret
// variables withheld, through lone runs, the resident helper and MCP
// sessions, as root and as a plain user.

// secretMark is in every planted secret: no output and no file the
// command leaves may hold it.
const secretMark = "SECRETBYTES"

// plantedSecrets are files under $HOME that must not be read, and the
// files beside them that must.
var (
	plantedSecrets = []string{".ssh/id_ed25519", ".ssh/id_rsa", ".aws/credentials", ".aws/config", ".config/gh/hosts.yml",
		".codex/auth.json", ".claude/.credentials.json", ".netrc", ".git-credentials", ".docker/config.json", ".kube/config",
		".bash_history", ".npmrc", ".config/gcloud/credentials.db", ".gnupg/private-keys-v1.d/k.key", ".password-store/x.gpg"}
	plantedPublic = map[string]string{".ssh/id_ed25519.pub": "PUBKEY", ".ssh/known_hosts": "KNOWNHOSTS", ".ssh/config": "SSHCONFIG",
		".gitconfig": "GITCONFIG", ".config/gh/config.yml": "GHCONFIG", ".gnupg/pubring.kbx": "PUBRING"}
)

func plantSecrets(t *testing.T, fx *fixture) {
	t.Helper()
	for _, f := range plantedSecrets {
		p := filepath.Join(fx.home, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(secretMark+" "+f+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for f, c := range plantedPublic {
		if err := os.WriteFile(filepath.Join(fx.home, f), []byte(c+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Links among .ssh's readable names that lead to its private keys.
	for name, target := range map[string]string{".ssh/evil.pub": "id_rsa", ".ssh/abs.pub": filepath.Join(fx.home, ".ssh/id_ed25519"), "aws-link": ".aws"} {
		if err := os.Symlink(target, filepath.Join(fx.home, name)); err != nil {
			t.Fatal(err)
		}
	}
	chownR(t, fx.home, fx.u)
}

// secretsScript tries every way to a planted secret and prints what it
// got; then it reads the public files.
func secretsScript(fx *fixture) string {
	var b strings.Builder
	b.WriteString("exec 2>/dev/null\n")
	for i, f := range plantedSecrets {
		p := filepath.Join(fx.home, f)
		d := filepath.Dir(p)
		q := func(s string) string { return "'" + s + "'" }
		b.WriteString("cat " + q(p) + "; cat /proc/self/root" + q(p) + "; cat /proc/1/root" + q(p) + "\n")
		b.WriteString("cp " + q(p) + " \"$WS/copy" + itoa(i) + "\"; cp -r " + q(d) + " \"$WS/dcopy" + itoa(i) + "\"\n")
		b.WriteString("ln -s " + q(p) + " \"$WS/link" + itoa(i) + "\"; cat \"$WS/link" + itoa(i) + "\"; ln " + q(p) + " \"$WS/hard" + itoa(i) + "\"\n")
		b.WriteString("umount " + q(p) + "; umount -l " + q(p) + "; umount " + q(d) + "; cat " + q(p) + "\n")
		b.WriteString("mv " + q(d) + " \"$WS/moved" + itoa(i) + "\"; cat \"$WS/moved" + itoa(i) + "/" + filepath.Base(p) + "\"\n")
	}
	b.WriteString("cat \"$HOME\"/aws-link/credentials \"$HOME\"/.ssh/* \"$HOME\"/.ssh/.*; grep -R " + secretMark + " \"$HOME\" /proc/self/root\"$HOME\"\n")
	b.WriteString("exec 2>&1\necho PUBLIC:\n")
	var pub []string
	for f := range plantedPublic {
		pub = append(pub, f)
	}
	slices.Sort(pub)
	for _, f := range pub {
		b.WriteString("cat '" + filepath.Join(fx.home, f) + "'\n")
	}
	return b.String()
}

func itoa(i int) string { return strconv.Itoa(i) }

// checkSecrets checks a run of secretsScript: no byte of a secret in its
// output or the workspace, every public file read.
func checkSecrets(t *testing.T, fx *fixture, out string) {
	t.Helper()
	if strings.Contains(out, secretMark) {
		t.Errorf("a secret reached the command:\n%s", out)
	}
	for _, want := range []string{"PUBKEY", "KNOWNHOSTS", "SSHCONFIG", "GITCONFIG", "GHCONFIG", "PUBRING"} {
		if !strings.Contains(out, want) {
			t.Errorf("public file with %s not read:\n%s", want, out)
		}
	}
	filepath.Walk(fx.ws, func(p string, fi os.FileInfo, err error) error {
		// The .pem files are the test's own, planted in the workspace.
		if err == nil && fi.Mode().IsRegular() && filepath.Ext(p) != ".pem" {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), secretMark) {
				t.Errorf("a secret reached the workspace: %s", p)
			}
		}
		return nil
	})
	// The host's files are untouched.
	for _, f := range plantedSecrets {
		if b, err := os.ReadFile(filepath.Join(fx.home, f)); err != nil || !strings.Contains(string(b), secretMark) {
			t.Errorf("host's %s changed: %q, %v", f, b, err)
		}
	}
}

func TestSecretsHidden(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		t.Run("lone", func(t *testing.T) {
			fx := newFixture(t, u)
			plantSecrets(t, fx)
			// Control: on the host the script reads them all.
			if r := host(t, u, runOpts{env: fx.env(), dir: fx.ws}, "/bin/sh", "-c", "cat $HOME/.ssh/id_ed25519"); !strings.Contains(r.stdout, secretMark) {
				t.Fatalf("control: %v", r)
			}
			r := runWith(t, u, runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0"), dir: fx.ws}, "run", "-C", fx.ws, "--", "/bin/sh", "-c", secretsScript(fx))
			if r.code != 0 {
				t.Fatalf("run: %v", r)
			}
			checkSecrets(t, fx, r.stdout)
		})
		t.Run("read-only", func(t *testing.T) {
			fx := newFixture(t, u)
			plantSecrets(t, fx)
			r := runWith(t, u, runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0"), dir: fx.ws}, "run", "-s", "read-only", "-C", fx.ws, "--", "/bin/sh", "-c", secretsScript(fx))
			if r.code != 0 {
				t.Fatalf("run: %v", r)
			}
			checkSecrets(t, fx, r.stdout)
		})
		t.Run("helper", func(t *testing.T) {
			fx := newFixture(t, u)
			plantSecrets(t, fx)
			re := newResidentEnv(t, fx)
			re.warm(t)
			ok, r := re.served(t, runOpts{}, nil, secretsScript(fx))
			if !ok || r.code != 0 {
				t.Fatalf("served %v: %v", ok, r)
			}
			checkSecrets(t, fx, r.stdout)
		})
		t.Run("mcp", func(t *testing.T) {
			fx := newFixture(t, u)
			plantSecrets(t, fx)
			cs, _, _ := mcpServer(t, u, fx, "--deny-read", "**/*.pem")
			for i := 0; i < 2; i++ { // the session's later commands too
				r := mcpSh(t, cs, secretsScript(fx)+"\ncat \"$WS\"/sub/*.pem 2>/dev/null; true\n")
				if r.ExitCode != 0 {
					t.Fatalf("mcp: %v", r)
				}
				checkSecrets(t, fx, r.Stdout)
				// Between the commands, on the host: a token file
				// rewritten by a rename (which takes a mask away), and
				// a new file a deny_read glob matches.
				gh := filepath.Join(fx.home, ".config/gh/hosts.yml")
				if err := os.WriteFile(gh+".new", []byte(secretMark+" renamed\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(gh+".new", gh); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(fx.ws, "sub", "late.pem"), []byte(secretMark+" late\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				chownR(t, fx.home, u)
				chownR(t, fx.ws, u)
			}
		})
	})
}

// TestSecretsAddDirAndAllowRead: a writable root holding hidden files
// keeps them hidden and works; allow_read re-opens exactly one path.
func TestSecretsAddDirAndAllowRead(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		plantSecrets(t, fx)
		o := runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0"), dir: fx.ws}
		cfg := filepath.Join(fx.home, ".config", "gh")
		r := runWith(t, u, o, "run", "-C", fx.ws, "--add-dir", filepath.Join(fx.home, ".config"), "--", "/bin/sh", "-c",
			"cat $HOME/.config/gh/hosts.yml; echo new > $HOME/.config/gh/new.txt && cat $HOME/.config/gh/config.yml; mv $HOME/.config/gh $HOME/.config/gh2 2>&1; cat $HOME/.config/gh2/hosts.yml $HOME/.config/gh/hosts.yml 2>/dev/null; true")
		if r.code != 0 || strings.Contains(r.stdout, secretMark) || !strings.Contains(r.stdout, "GHCONFIG") {
			t.Errorf("--add-dir ~/.config: %v", r)
		}
		// The hidden file's directory cannot be renamed away from the
		// rule's path (the next run would not hide it).
		if !strings.Contains(r.stdout, "busy") || exists(cfg+"2") {
			t.Errorf("mv of a directory holding a hidden file: %v", r)
		}
		assertContent(t, filepath.Join(cfg, "new.txt"), "new\n")
		if b, _ := os.ReadFile(filepath.Join(cfg, "hosts.yml")); !strings.Contains(string(b), secretMark) {
			t.Errorf("host's hosts.yml = %q", b)
		}
		r = runWith(t, u, o, "run", "-C", fx.ws, "--allow-read", "~/.aws/credentials", "--", "/bin/sh", "-c",
			"cat $HOME/.aws/credentials; cat $HOME/.aws/config $HOME/.ssh/id_rsa 2>/dev/null; ls -a $HOME/.aws")
		if r.code != 0 || !strings.Contains(r.stdout, secretMark+" .aws/credentials") || strings.Count(r.stdout, secretMark) != 1 || strings.Contains(r.stdout, "config") {
			t.Errorf("--allow-read ~/.aws/credentials: %v", r)
		}
		// deny_read of a glob under the workspace.
		if err := os.WriteFile(filepath.Join(fx.ws, "sub", "key.pem"), []byte(secretMark), 0o644); err != nil {
			t.Fatal(err)
		}
		chownR(t, fx.ws, u)
		r = runWith(t, u, o, "run", "-C", fx.ws, "--deny-read", "**/*.pem", "--", "/bin/sh", "-c", "cat $WS/sub/key.pem; cat $WS/file.txt")
		if r.code != 0 || strings.Contains(r.stdout, secretMark) || !strings.Contains(r.stdout, "orig") {
			t.Errorf("--deny-read '**/*.pem': %v", r)
		}
	})
}

// TestSecretsEnv: secret variables are absent from env and
// /proc/self/environ, through every path; --env passes one; the report
// names them.
func TestSecretsEnv(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		secretEnv := []string{"GITHUB_TOKEN=" + secretMark + "1", "OPENAI_API_KEY=" + secretMark + "2", "AWS_SECRET_ACCESS_KEY=" + secretMark + "3", "MY_PASSWORD=" + secretMark + "4", "KEEP_ME=visible"}
		script := "env; tr '\\0' '\\n' < /proc/self/environ"
		check := func(t *testing.T, out string, passed string) {
			t.Helper()
			for _, kv := range secretEnv[:4] {
				if strings.Contains(out, kv) && !strings.HasPrefix(kv, passed+"=") {
					t.Errorf("%s reached the command:\n%s", kv, out)
				}
			}
			if !strings.Contains(out, "KEEP_ME=visible") || !strings.Contains(out, "PATH=") {
				t.Errorf("ordinary variables lost:\n%s", out)
			}
			if passed != "" && strings.Count(out, passed+"=") < 2 {
				t.Errorf("--env %s not passed:\n%s", passed, out)
			}
		}
		rep := filepath.Join(fx.dir, "rep.json")
		o := runOpts{env: append(append(fx.env(), "AGENTBOX_RESIDENT=0"), secretEnv...), dir: fx.ws}
		r := runWith(t, u, o, "run", "-C", fx.ws, "--report", rep, "--", "/bin/sh", "-c", script)
		if r.code != 0 {
			t.Fatal(r)
		}
		check(t, r.stdout, "")
		var got struct {
			Environment struct {
				Withheld []string `json:"withheld"`
			} `json:"environment"`
		}
		b, _ := os.ReadFile(rep)
		if err := json.Unmarshal(b, &got); err != nil || !slices.Equal(got.Environment.Withheld, []string{"AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "MY_PASSWORD", "OPENAI_API_KEY"}) || strings.Contains(string(b), secretMark) {
			t.Errorf("report %s: %v", b, err)
		}
		r = runWith(t, u, o, "run", "-C", fx.ws, "--env", "GITHUB_TOKEN", "--", "/bin/sh", "-c", script)
		check(t, r.stdout, "GITHUB_TOKEN")

		re := newResidentEnv(t, fx, secretEnv...)
		re.warm(t)
		ok, r := re.served(t, runOpts{}, nil, script)
		if !ok || r.code != 0 {
			t.Fatalf("served %v: %v", ok, r)
		}
		check(t, r.stdout, "")

		cs, _, _ := mcpServerCmd(t, command(u, runOpts{env: append(fx.env(), secretEnv...), dir: fx.ws}, binPath, "mcp", "-C", fx.ws))
		mr := mcpSh(t, cs, script)
		check(t, mr.Stdout, "")
		// structuredContent.report names them too.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"command": []string{"true"}}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ = json.Marshal(res.StructuredContent)
		if !strings.Contains(string(b), `"environment":{"withheld":["AWS_SECRET_ACCESS_KEY","GITHUB_TOKEN","MY_PASSWORD","OPENAI_API_KEY"]}`) || strings.Contains(string(b), secretMark) {
			t.Errorf("MCP report: %s", b)
		}
	})
}

// TestSecretsDegraded: without a mount namespace, Landlock keeps the
// hidden files unreadable (reads granted around them), and the public
// ones, the workspace and the rest of the home read.
func TestSecretsDegraded(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		plantSecrets(t, fx)
		script := "cat $HOME/.ssh/id_ed25519 $HOME/.ssh/evil.pub $HOME/aws-link/credentials $HOME/.aws/credentials $HOME/.config/gh/hosts.yml $HOME/.netrc /proc/self/root$HOME/.ssh/id_rsa 2>&1; " +
			"cat $HOME/.ssh/id_ed25519.pub $HOME/.gitconfig $HOME/.config/gh/config.yml $WS/file.txt; echo new > $WS/new.txt && cat $WS/new.txt"
		r := degraded(t, fx, []string{"--allow-degraded"}, script)
		if r.code != 0 || strings.Contains(r.stdout, secretMark) {
			t.Errorf("degraded: %v", r)
		}
		for _, want := range []string{"PUBKEY", "GITCONFIG", "GHCONFIG", "orig", "new", "Permission denied"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("degraded: %q missing: %v", want, r)
			}
		}
	})
}

// TestSecretsDoctor: doctor prints the hidden list and warns about a
// hidden file with a second name.
func TestSecretsDoctor(t *testing.T) {
	u := users[0]
	fx := newFixture(t, u)
	plantSecrets(t, fx)
	o := runOpts{env: fx.env(), dir: fx.ws}
	r := runWith(t, u, o, "doctor", "-C", fx.ws)
	if !strings.Contains(r.stdout, "~/.ssh  (ssh private keys") || !strings.Contains(r.stdout, filepath.Join(fx.home, ".aws")+"  (AWS credentials)") ||
		!strings.Contains(r.stdout, "no hidden file has a second name") {
		t.Errorf("doctor: %v", r)
	}
	if err := os.Link(filepath.Join(fx.home, ".netrc"), filepath.Join(fx.dir, "netrc-link")); err != nil {
		t.Fatal(err)
	}
	r = runWith(t, u, o, "doctor", "-C", fx.ws)
	if !strings.Contains(r.stdout, "[warn] hidden hard links") || !strings.Contains(r.stdout, filepath.Join(fx.home, ".netrc")+" (2 links)") {
		t.Errorf("doctor with a hard link: %v", r)
	}
}

// TestSecretsSessionLateInRoot: a token file that appears inside a
// writable root after a session began is masked for the next command,
// and its directory cannot be renamed aside from the rule.
func TestSecretsSessionLateInRoot(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		gh := filepath.Join(fx.home, ".config", "gh")
		if err := os.MkdirAll(gh, 0o755); err != nil {
			t.Fatal(err)
		}
		chownR(t, fx.home, u)
		cs, _, _ := mcpServer(t, u, fx, "--add-dir", filepath.Join(fx.home, ".config"))
		if r := mcpSh(t, cs, "cat $HOME/.config/gh/hosts.yml 2>&1; true"); r.ExitCode != 0 {
			t.Fatal(r)
		}
		if err := os.WriteFile(filepath.Join(gh, "hosts.yml"), []byte(secretMark+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		chownR(t, fx.home, u)
		r := mcpSh(t, cs, "cat $HOME/.config/gh/hosts.yml; mv $HOME/.config/gh $HOME/.config/gh2 2>&1; cat $HOME/.config/gh2/hosts.yml 2>/dev/null; echo done")
		if strings.Contains(r.Stdout, secretMark) || !strings.Contains(r.Stdout, "done") {
			t.Errorf("late token file: %v", r)
		}
		if exists(gh + "2") {
			t.Errorf("the directory of a hidden file was renamed: %v", r)
		}
		r = mcpSh(t, cs, "cat $HOME/.config/gh/hosts.yml $HOME/.config/gh2/hosts.yml 2>/dev/null; echo done")
		if strings.Contains(r.Stdout, secretMark) {
			t.Errorf("third command: %v", r)
		}
	})
}

// TestSecretsSessionLateSSH: a ~/.ssh made on the host after a session
// began is hidden from its next commands but for its public names.
func TestSecretsSessionLateSSH(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		cs, _, _ := mcpServer(t, u, fx)
		if r := mcpSh(t, cs, "ls -a $HOME"); r.ExitCode != 0 {
			t.Fatal(r)
		}
		ssh := filepath.Join(fx.home, ".ssh")
		if err := os.Mkdir(ssh, 0o700); err != nil {
			t.Fatal(err)
		}
		for f, c := range map[string]string{"id_rsa": secretMark, "id_rsa.pub": "PUBKEY", "known_hosts": "KNOWNHOSTS"} {
			if err := os.WriteFile(filepath.Join(ssh, f), []byte(c+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		chownR(t, fx.home, u)
		for i := 0; i < 2; i++ {
			r := mcpSh(t, cs, "cat $HOME/.ssh/id_rsa 2>&1; ls -a $HOME/.ssh; cat $HOME/.ssh/id_rsa.pub $HOME/.ssh/known_hosts; touch $HOME/.ssh/new 2>&1; true")
			if r.ExitCode != 0 || strings.Contains(r.Stdout, secretMark) || !strings.Contains(r.Stdout, "PUBKEY") || !strings.Contains(r.Stdout, "KNOWNHOSTS") || strings.Contains(r.Stdout, "id_rsa\n") {
				t.Errorf("command %d after ~/.ssh appeared: %v", i, r)
			}
			// The late mask is watched too: the listing is a read.
			real, _ := filepath.EvalSymlinks(ssh)
			if r.Report.Filesystem == nil || !slices.ContainsFunc(r.Report.Filesystem.Denied, func(d fsDenied) bool {
				return d.Op == "read" && d.Path == real && d.Reason == "hidden" && d.Count == 1
			}) {
				t.Errorf("command %d: no read of %s in %+v", i, real, r.Report.Filesystem)
			}
		}
		if exists(filepath.Join(ssh, "new")) {
			t.Error("a file was created in the hidden directory")
		}
		// One mask, not one per command.
		if r := mcpSh(t, cs, "grep -c ' "+ssh+" ' /proc/self/mountinfo"); strings.TrimSpace(r.Stdout) != "1" {
			t.Errorf("masks on ~/.ssh: %v", r)
		}
	})
}
