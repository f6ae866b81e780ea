//go:build linux

package linux

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The sandbox's own /tmp (policy.PrivateTemp): per-user servers a command
// leaves listening in /tmp or $TMPDIR are never where the user's programs
// look for them; servers inside the workspace and the private /tmp keep
// working; what one run writes to /tmp the next run, the resident helper
// and an MCP session of the same workspace read; a workspace under /tmp
// stays the host's.

// listenPy binds a listening unix socket at each path given (making its
// directory 0700, as tmux, emacs and ssh do), checks a client of the same
// command is served on it, and says so.
const listenPy = `
import os, socket, sys
for p in sys.argv[1:]:
    os.makedirs(os.path.dirname(p), mode=0o700, exist_ok=True)
    s = socket.socket(socket.AF_UNIX); s.bind(p); s.listen()
    c = socket.socket(socket.AF_UNIX); c.connect(p)
    a, _ = s.accept(); c.send(b"x"); assert a.recv(1) == b"x"
print("served", len(sys.argv) - 1)
`

// plantedServers are the conventional per-user server paths a command
// plants, relative to /tmp ("tmp") or to $TMPDIR ("tmpdir"): tmux's
// socket directory (a unique name beside "default"), ssh ControlPath and
// ssh-agent ($TMPDIR/ssh-XXXX/agent.N), emacs' server directory, an X11
// display, screen's directory, VS Code's IPC socket, PostgreSQL's socket,
// Java's attach socket, gopls' daemon. Unique names keep the host checks
// about this run only.
func plantedServers(u *testUser, tag string) map[string]string {
	return map[string]string{
		fmt.Sprintf("tmux-%d/%s", u.uid, tag):             "tmp",
		fmt.Sprintf("ssh-%s/cm-git@github.com:22", tag):   "tmp",
		fmt.Sprintf("ssh-%s/agent.4242", tag):             "tmpdir",
		fmt.Sprintf("emacs%d/%s", u.uid, tag):             "tmp",
		fmt.Sprintf(".X11-unix/X%d", 500+len(tag)%400):    "tmp",
		fmt.Sprintf("screens/S-%s/%s.pts-0", u.name, tag): "tmp",
		"vscode-ipc-" + tag + ".sock":                     "tmp",
		".s.PGSQL." + tag:                                 "tmp",
		".java_pid" + tag:                                 "tmp",
		"gopls-daemon-" + tag:                             "tmpdir",
	}
}

// planted is the script of a command that plants the servers (and, with
// tmux installed, a real tmux server on /tmp/tmux-UID/default), runs a
// server with its client in the workspace, says "ready" in $WS/ready and
// keeps its servers until $WS/stop appears.
func planted(u *testUser, tag string) string {
	var args []string
	for rel, where := range plantedServers(u, tag) {
		if where == "tmp" {
			args = append(args, "/tmp/"+rel)
		} else {
			args = append(args, `"$TMPDIR"/`+rel)
		}
	}
	tmux := ""
	if _, err := os.Stat("/usr/bin/tmux"); err == nil {
		// SHELL: tmux runs the pane's command with it, and the
		// unprivileged test user's login shell is nologin.
		tmux = `SHELL=/bin/sh /usr/bin/tmux -f /dev/null new-session -d -s planted-` + tag + ` "sleep 600" && /usr/bin/tmux ls | grep -q planted-` + tag + ` && echo tmux-inside`
	}
	return fmt.Sprintf(`set -e
%[1]s -c '%[2]s' %[3]s
%[4]s
%[1]s -c '%[2]s' "$WS/srv.sock"
echo ready > "$WS/ready"
i=0; while [ ! -e "$WS/stop" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
echo done`, python, listenPy, strings.Join(args, " "), tmux)
}

// checkPlanted checks, while the planting command runs, that none of its
// servers is in the host's /tmp or $TMPDIR and that each is in the
// workspace's private directory under stateHome, and that the host's
// tmux finds no planted session.
func checkPlanted(t *testing.T, u *testUser, fx *fixture, stateHome, tag string, hostTmp map[string]bool) {
	t.Helper()
	for rel, where := range plantedServers(u, tag) {
		host := filepath.Join("/tmp", rel)
		if where == "tmpdir" {
			host = filepath.Join(fx.tmpdir, rel)
		}
		if !hostTmp[host] {
			assertAbsent(t, host)
		}
		priv := filepath.Join(privateTmpIn(stateHome, fx.ws, where), rel)
		if fi, err := os.Lstat(priv); err != nil || fi.Mode().Type() != fs.ModeSocket {
			t.Errorf("private %s: %v %v, want the planted socket", priv, fi, err)
		}
	}
	for _, d := range []string{fmt.Sprintf("/tmp/tmux-%d", u.uid), fmt.Sprintf("/tmp/emacs%d", u.uid), "/tmp/ssh-" + tag} {
		if !hostTmp[d] {
			assertAbsent(t, d)
		}
	}
	if _, err := os.Stat("/usr/bin/tmux"); err == nil {
		if !hostTmp[fmt.Sprintf("/tmp/tmux-%d", u.uid)] {
			assertAbsent(t, fmt.Sprintf("/tmp/tmux-%d/default", u.uid))
		}
		if fi, err := os.Lstat(filepath.Join(privateTmpIn(stateHome, fx.ws, "tmp"), fmt.Sprintf("tmux-%d", u.uid), "default")); err != nil || fi.Mode().Type() != fs.ModeSocket {
			t.Errorf("the sandbox's tmux server socket is not in the private /tmp: %v %v", fi, err)
		}
		// The user's own tmux, now: it must not reach the planted
		// server. (It makes its socket directory: removed again, empty,
		// when it was not there before.)
		r := host(t, u, runOpts{env: []string{"TMUX_TMPDIR="}}, "/usr/bin/tmux", "ls")
		if strings.Contains(r.stdout, "planted-"+tag) {
			t.Errorf("BREACH: the host's tmux lists the planted session: %v", r)
		}
		if d := fmt.Sprintf("/tmp/tmux-%d", u.uid); !hostTmp[d] {
			os.Remove(d)
		}
	}
}

// removeCreated removes, at the end of the test, what an agentbox that
// shares the host's /tmp (the old one, run with AGENTBOX_TEST_BIN) would
// have planted there: the planted paths and their directories that did
// not exist before.
func removeCreated(t *testing.T, before map[string]bool) {
	t.Cleanup(func() {
		for p, existed := range before {
			if !existed {
				os.RemoveAll(p)
			}
		}
	})
}

// hostTmpEntries records which of the planted paths' host places (and
// their directories) exist before a run, so that the checks are about
// what the run did.
func hostTmpEntries(u *testUser, fx *fixture, tag string) map[string]bool {
	m := map[string]bool{}
	add := func(p string) {
		_, err := os.Lstat(p)
		m[p] = err == nil
	}
	for rel, where := range plantedServers(u, tag) {
		base := "/tmp"
		if where == "tmpdir" {
			base = fx.tmpdir
		}
		add(filepath.Join(base, rel))
		add(filepath.Join(base, strings.Split(rel, "/")[0]))
	}
	for _, d := range []string{fmt.Sprintf("/tmp/tmux-%d", u.uid), fmt.Sprintf("/tmp/tmux-%d/default", u.uid), fmt.Sprintf("/tmp/emacs%d", u.uid), "/tmp/ssh-" + tag, "/tmp/.X11-unix", "/tmp/screens"} {
		add(d)
	}
	return m
}

// waitReady waits for $WS/ready (the planting command's servers are up),
// failing on done (the run ended first).
func waitReady(t *testing.T, fx *fixture, done <-chan struct{}) bool {
	t.Helper()
	ready := filepath.Join(fx.ws, "ready")
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			return true
		}
		select {
		case <-done:
			return exists(ready)
		default:
		}
	}
	return false
}

// TestPrivateTmpPlantedServers: a command that plants servers at the
// per-user socket conventions of /tmp and $TMPDIR (tmux's
// /tmp/tmux-UID/default included) leaves nothing at the host's paths,
// also while it runs, and the sockets land in the workspace's private
// directories; its servers in the workspace and in /tmp work. Lone runs,
// the resident helper, and an MCP session.
func TestPrivateTmpPlantedServers(t *testing.T) {
	needPython(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		for _, path := range []string{"lone", "resident", "mcp"} {
			t.Run(path, func(t *testing.T) {
				fx := newFixture(t, u)
				tag := randName("ab")
				stateHome := filepath.Join(u.home, ".state")
				env := append(fx.env(), "TMPDIR="+fx.tmpdir)
				var re *residentEnv
				if path == "resident" {
					re = newResidentEnv(t, fx, "TMPDIR="+fx.tmpdir)
					re.warm(t)
					stateHome = re.state
					env = re.env()
				}
				before := hostTmpEntries(u, fx, tag)
				removeCreated(t, before)
				script := planted(u, tag)
				done := make(chan struct{})
				var stdout, stderr string
				var code int
				switch path {
				case "lone", "resident":
					if path == "lone" {
						env = append(env, "AGENTBOX_RESIDENT=0")
					} else {
						script = servedProbe + "; " + script
					}
					cmd := command(u, runOpts{env: env, dir: fx.ws}, binPath, "run", "-C", fx.ws, "--", "/bin/sh", "-c", script)
					var ob, eb strings.Builder
					cmd.Stdout, cmd.Stderr = &ob, &eb
					if err := cmd.Start(); err != nil {
						t.Fatal(err)
					}
					go func() {
						cmd.Wait()
						stdout, stderr, code = ob.String(), eb.String(), cmd.ProcessState.ExitCode()
						close(done)
					}()
				case "mcp":
					cs, _, _ := mcpServerCmd(t, command(u, runOpts{env: env, dir: fx.ws}, binPath, "mcp", "-C", fx.ws))
					go func() {
						defer close(done)
						ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
						defer cancel()
						res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"command": []string{"/bin/sh", "-c", script}}})
						if err != nil {
							stderr, code = err.Error(), -1
							return
						}
						var out mcpResult
						b, _ := json.Marshal(res.StructuredContent)
						json.Unmarshal(b, &out)
						stdout, stderr, code = out.Stdout, out.Stderr, out.ExitCode
					}()
				}
				if !waitReady(t, fx, done) {
					<-done
					t.Fatalf("the planting command did not get ready: exit %d\nstdout: %q\nstderr: %q", code, stdout, stderr)
				}
				checkPlanted(t, u, fx, stateHome, tag, before)
				os.WriteFile(filepath.Join(fx.ws, "stop"), nil, 0o644)
				<-done
				if code != 0 || !strings.Contains(stdout, "done") || strings.Count(stdout, "served") != 2 {
					t.Errorf("planting command: exit %d\nstdout: %q\nstderr: %q", code, stdout, stderr)
				}
				if _, err := os.Stat("/usr/bin/tmux"); err == nil && !strings.Contains(stdout, "tmux-inside") {
					t.Errorf("tmux inside the sandbox did not work: %q %q", stdout, stderr)
				}
				if path == "resident" && !strings.HasPrefix(stdout, "agentbox-resident-init\n") {
					t.Errorf("not served by the resident helper: %q", stdout)
				}
				// After the run too.
				checkPlanted(t, u, fx, stateHome, tag, before)
			})
		}
	})
}

// TestPrivateTmpPersists: what a command writes to /tmp is read by the
// next run of the same workspace, by a run the resident helper serves and
// by an MCP session's command, and the other way round; another
// workspace's /tmp does not have it; cleanup keeps the directory while a
// session holds it and removes it afterwards.
func TestPrivateTmpPersists(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		re := newResidentEnv(t, fx)
		n := randName("abtest-p-")
		lone := runOpts{env: []string{"AGENTBOX_RESIDENT=0", "N=" + n}}
		if r := re.run(t, lone, nil, `echo lone > "/tmp/$N"`); r.code != 0 {
			t.Fatalf("lone write: %v", r)
		}
		assertAbsent(t, "/tmp/"+n)
		if r := re.run(t, lone, nil, `cat "/tmp/$N"`); r.stdout != "lone\n" {
			t.Errorf("next lone run: %v", r)
		}
		re.warm(t)
		ok, r := re.served(t, runOpts{env: lone.env[1:]}, nil, `cat "/tmp/$N" && echo helper > "/tmp/$N.helper"`)
		if !ok || r.stdout != "lone\n" {
			t.Errorf("resident run (served %v): %v", ok, r)
		}
		cs, _, hangUp := mcpServerCmd(t, command(u, runOpts{env: append(re.env(), "N="+n), dir: fx.ws}, binPath, "mcp", "-C", fx.ws))
		if m := mcpSh(t, cs, `cat "/tmp/$N" "/tmp/$N.helper" && echo mcp > "/tmp/$N.mcp"`); m.ExitCode != 0 || m.Stdout != "lone\nhelper\n" {
			t.Errorf("mcp command: %v", m)
		}
		// A lone run while the session holds the directory.
		if r := re.run(t, lone, nil, `cat "/tmp/$N.mcp" && echo again > "/tmp/$N.lone"`); r.stdout != "mcp\n" {
			t.Errorf("lone run beside the session: %v", r)
		}
		if m := mcpSh(t, cs, `cat "/tmp/$N.lone"`); m.Stdout != "again\n" {
			t.Errorf("the session does not see the lone run's file: %v", m)
		}
		for _, suffix := range []string{"", ".helper", ".mcp", ".lone"} {
			assertAbsent(t, "/tmp/"+n+suffix)
		}
		// Another workspace has its own /tmp.
		other := newFixture(t, u)
		r = execute(t, u, runOpts{env: append(other.env(), "XDG_STATE_HOME="+re.state, "AGENTBOX_RESIDENT=0", "N="+n), dir: other.ws}, binPath, "run", "-C", other.ws, "--", "/bin/sh", "-c", `cat "/tmp/$N" 2>/dev/null || echo none`)
		if !strings.Contains(r.stdout, "none") {
			t.Errorf("another workspace reads this one's /tmp: %v", r)
		}
		priv := privateTmpIn(re.state, fx.ws, "tmp")
		assertContent(t, filepath.Join(priv, n+".mcp"), "mcp\n")
		// cleanup while the session runs keeps it (cleanup also stops
		// the helper, whose sandbox holds it too).
		c := host(t, u, runOpts{env: re.env()}, binPath, "cleanup")
		if c.code != 0 || !strings.Contains(c.stdout, "kept private /tmp "+filepath.Dir(priv)) {
			t.Errorf("cleanup with a session holding the private /tmp: %v", c)
		}
		assertContent(t, filepath.Join(priv, n), "lone\n")
		hangUp.Close()
		if !waitFor(10*time.Second, func() bool {
			c = host(t, u, runOpts{env: re.env()}, binPath, "cleanup")
			return strings.Contains(c.stdout, "removed private /tmp "+filepath.Dir(priv))
		}) {
			t.Errorf("cleanup after the session: %v", c)
		}
		assertAbsent(t, filepath.Dir(priv))
		if r := re.run(t, lone, nil, `cat "/tmp/$N" 2>/dev/null || echo gone`); !strings.Contains(r.stdout, "gone") {
			t.Errorf("after cleanup: %v", r)
		}
	})
}

// TestPrivateTmpConcurrentRuns: two runs of one workspace at the same time
// share its private /tmp (each waits for the other's file).
func TestPrivateTmpConcurrentRuns(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		n := randName("abtest-c-")
		script := func(mine, theirs string) string {
			return fmt.Sprintf(`echo %[1]s > /tmp/%[3]s%[1]s; i=0; while [ ! -e /tmp/%[3]s%[2]s ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; cat /tmp/%[3]s%[2]s`, mine, theirs, n)
		}
		type out struct{ r result }
		ch := make(chan out, 2)
		for _, p := range [][2]string{{"a", "b"}, {"b", "a"}} {
			go func() {
				cmd := command(u, runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0"), dir: fx.ws}, binPath, "run", "-C", fx.ws, "--", "/bin/sh", "-c", script(p[0], p[1]))
				b, err := cmd.Output()
				ch <- out{result{stdout: string(b), code: exitCode(cmd, err)}}
			}()
		}
		got := map[string]bool{}
		for range 2 {
			o := <-ch
			got[strings.TrimSpace(o.r.stdout)] = o.r.code == 0
		}
		if !got["a"] || !got["b"] {
			t.Errorf("concurrent runs did not share /tmp: %v", got)
		}
		assertAbsent(t, "/tmp/"+n+"a")
		assertAbsent(t, "/tmp/"+n+"b")
	})
}

// TestPrivateTmpWorkspaceUnderTmp: a workspace and an --add-dir root under
// the host's /tmp stay the host's directories (writes reach the host),
// while the rest of /tmp is private.
func TestPrivateTmpWorkspaceUnderTmp(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, inTmp)
		beside := filepath.Join(fx.dir, "beside")
		r := sandboxed(t, fx, []string{"--add-dir", fx.add}, `echo ws > "$WS/w.txt" && echo add > "$ADD/a.txt" && echo x > "$DIR/beside" && echo ok`)
		if r.code != 0 || !strings.Contains(r.stdout, "ok") {
			t.Fatalf("writes: %v", r)
		}
		assertContent(t, filepath.Join(fx.ws, "w.txt"), "ws\n")
		assertContent(t, filepath.Join(fx.add, "a.txt"), "add\n")
		assertAbsent(t, beside)
		assertContent(t, filepath.Join(privateTmp(u, fx.ws, "tmp"), strings.TrimPrefix(beside, "/tmp/")), "x\n")
	})
}

// TestPrivateTmpPlantedSymlinks: links a command plants in its private
// /tmp lead agentbox nowhere on the host: a later run whose --add-dir or
// $TMPDIR lies at a planted link's path fails closed (125) and writes
// nothing through it, and cleanup removes the links, not their targets.
func TestPrivateTmpPlantedSymlinks(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, inTmp)
		for _, d := range []string{"add2", "td"} {
			if err := os.Mkdir(filepath.Join(fx.dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		writeFile(t, filepath.Join(fx.home, "keep"), "keep\n")
		chownR(t, fx.dir, u)
		rel := strings.TrimPrefix(fx.dir, "/tmp/")
		lone := append(fx.env(), "AGENTBOX_RESIDENT=0", "REL="+rel)
		plant := `ln -s "$OUT" "/tmp/$REL/add2" && ln -s "$OUT" "/tmp/$REL/td" && ln -s "$OUT/file.txt" /tmp/l && mkdir -p /tmp/d && ln -s "$HOME" /tmp/d/home && echo planted`
		r := execute(t, u, runOpts{env: lone, dir: fx.ws}, binPath, "run", "-C", fx.ws, "--", "/bin/sh", "-c", plant)
		if !strings.Contains(r.stdout, "planted") {
			t.Fatalf("plant: %v", r)
		}
		before := snapshot(t, fx.out)
		for name, args := range map[string][]string{
			"--add-dir": {"run", "-C", fx.ws, "--add-dir", filepath.Join(fx.dir, "add2"), "--", "/bin/sh", "-c", `echo x > "$DIR/add2/f"`},
			"$TMPDIR":   {"run", "-C", fx.ws, "--", "/bin/sh", "-c", `echo x > "$TMPDIR/f"`},
		} {
			env := lone
			if name == "$TMPDIR" {
				env = append(env, "TMPDIR="+filepath.Join(fx.dir, "td"))
			}
			r := execute(t, u, runOpts{env: env, dir: fx.ws}, binPath, args...)
			if r.code != 125 {
				t.Errorf("%s at a planted link: exit %d, want 125: %v", name, r.code, r)
			}
		}
		for _, d := range diffSnapshots(before, snapshot(t, fx.out), nil) {
			t.Errorf("host: through a planted link: %s", d)
		}
		assertContent(t, filepath.Join(fx.out, "file.txt"), fx.txt)
		c := host(t, u, runOpts{}, binPath, "cleanup")
		if c.code != 0 {
			t.Errorf("cleanup: %v", c)
		}
		assertAbsent(t, privateTmp(u, fx.ws, "tmp"))
		for _, d := range diffSnapshots(before, snapshot(t, fx.out), nil) {
			t.Errorf("host: cleanup followed a planted link: %s", d)
		}
		assertContent(t, filepath.Join(fx.home, "keep"), "keep\n")
	})
}

// TestPrivateTmpDegraded: without user namespaces /tmp cannot be private:
// the host's /tmp stays read-only, TMPDIR names the workspace's private
// directory (the one standing for $TMPDIR, or for /tmp without one), and
// writes there land in it.
func TestPrivateTmpDegraded(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		for tmpdir, dir := range map[string]string{fx.tmpdir: "tmpdir", "": "tmp"} {
			name := randName("abtest-dg-")
			t.Cleanup(func() { os.Remove(filepath.Join("/tmp", name)) })
			r := noUserns(t, u, runOpts{env: append(fx.env(), "N="+name, "TMPDIR="+tmpdir, "AGENTBOX_RESIDENT=0"), dir: fx.ws}, binPath,
				"run", "--allow-degraded", "-C", fx.ws, "--", "/bin/sh", "-c", `echo x > "/tmp/$N" 2>/dev/null && echo WROTE-TMP; echo "$TMPDIR"; echo y > "$TMPDIR/$N" && echo ok`)
			if r.code != 0 || !strings.Contains(r.stdout, "ok") {
				t.Fatalf("degraded run (TMPDIR=%q): %v", tmpdir, r)
			}
			if strings.Contains(r.stdout, "WROTE-TMP") {
				t.Errorf("degraded: the host's /tmp was writable: %v", r)
			}
			assertAbsent(t, filepath.Join("/tmp", name))
			if tmpdir != "" {
				assertAbsent(t, filepath.Join(tmpdir, name))
			}
			want := privateTmp(u, fx.ws, dir)
			if !strings.Contains(r.stdout, want+"\n") {
				t.Errorf("degraded (TMPDIR=%q): TMPDIR is not %s: %v", tmpdir, want, r)
			}
			assertContent(t, filepath.Join(want, name), "y\n")
			if !strings.Contains(r.stderr, "private /tmp") {
				t.Errorf("degraded: the gap is not named: %q", r.stderr)
			}
		}
	})
}

// TestDoctorNamesPrivateTmp: doctor and the run report say where the
// workspace's private /tmp is on the host.
func TestDoctorNamesPrivateTmp(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		priv := privateTmp(u, fx.ws, "tmp")
		r := runWith(t, u, runOpts{dir: fx.ws, env: fx.env()}, "doctor", "-C", fx.ws)
		if !strings.Contains(r.stdout, "private /tmp") || !strings.Contains(r.stdout, priv) {
			t.Errorf("doctor: %v", r)
		}
		rep := filepath.Join(fx.dir, "report.json")
		if r := runWith(t, u, runOpts{dir: fx.ws, env: fx.env()}, "run", "-C", fx.ws, "--report", rep, "--", "true"); r.code != 0 {
			t.Fatalf("run: %v", r)
		}
		var got struct {
			Tmp []struct{ Path, Host string } `json:"tmp"`
		}
		b, _ := os.ReadFile(rep)
		if err := json.Unmarshal(b, &got); err != nil || len(got.Tmp) == 0 || got.Tmp[0].Path != "/tmp" || got.Tmp[0].Host != priv {
			t.Errorf("report %s: tmp = %+v, want /tmp at %s (%v)", b, got.Tmp, priv, err)
		}
	})
}

// TestPrivateTmpStateInWorkspace: with agentbox's state directory inside
// the workspace, the private /tmp is writable at /tmp only: at its own
// path (a read-only carve-out) writes, removals and renames fail, and
// the workspace's lock cannot be replaced.
func TestPrivateTmpStateInWorkspace(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		state := filepath.Join(fx.ws, "state")
		env := append(fx.env(), "XDG_STATE_HOME="+state, "AGENTBOX_RESIDENT=0")
		r := execute(t, u, runOpts{env: env, dir: fx.ws}, binPath, "run", "-C", fx.ws, "--", "/bin/sh", "-c", `echo via-mount > /tmp/f && echo MOUNT-OK
for d in "$XDG_STATE_HOME"/agentbox/tmp/*; do
	echo x > "$d/tmp/own-path" && echo OWN-PATH-WROTE
	rm -f "$d/lock" && echo LOCK-REMOVED
	mv "$d/tmp" "$d/tmp2" && echo MOVED
	ln -s / "$d/tmp/link" && echo LINKED
done; true`)
		if !strings.Contains(r.stdout, "MOUNT-OK") {
			t.Fatalf("writing /tmp: %v", r)
		}
		for _, bad := range []string{"OWN-PATH-WROTE", "LOCK-REMOVED", "MOVED", "LINKED"} {
			if strings.Contains(r.stdout, bad) {
				t.Errorf("%s: %v", bad, r)
			}
		}
		priv := privateTmpIn(state, fx.ws, "tmp")
		assertContent(t, filepath.Join(priv, "f"), "via-mount\n")
		assertAbsent(t, filepath.Join(priv, "own-path"))
		if !exists(filepath.Join(filepath.Dir(priv), "lock")) {
			t.Errorf("the workspace's lock was removed")
		}
	})
}
