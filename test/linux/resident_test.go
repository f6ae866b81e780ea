//go:build linux

package linux

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The resident helper (internal/resident): `agentbox run` hands the
// command to a per-user helper holding prepared sandboxes. These tests
// give each scenario a state directory of its own (so a helper of its
// own), tell a run the helper served from one that started on its own by
// servedProbe, and check every guarantee on the host.

// servedProbe prints the first word of the command line of the shell's
// parent: the helper's shim ("agentbox-resident-init") when the helper
// served the run, the init stage otherwise. (A builtin read, so that
// /proc/self is the shell; /proc is the sandbox's, whose pids are those
// of the session's namespace.)
const servedProbe = `read -r _ _ _ pp _ < /proc/self/stat; tr '\0' '\n' < /proc/$pp/cmdline | head -n 1`

// residentEnv is a fixture's environment with a state directory (and so a
// helper) of its own.
type residentEnv struct {
	fx    *fixture
	state string // XDG_STATE_HOME
	extra []string
}

func newResidentEnv(t *testing.T, fx *fixture, extra ...string) *residentEnv {
	t.Helper()
	re := &residentEnv{fx: fx, state: filepath.Join(fx.dir, "state"), extra: extra}
	if err := os.Mkdir(re.state, 0o700); err != nil {
		t.Fatal(err)
	}
	chownR(t, re.state, fx.u)
	t.Cleanup(func() {
		// cleanup stops the helper; then nothing of it may be left.
		r := host(t, fx.u, runOpts{env: re.env()}, binPath, "cleanup")
		if r.code != 0 {
			t.Errorf("agentbox cleanup: %v", r)
		}
		if pids := re.helpers(); len(pids) != 0 {
			t.Errorf("helper still running after cleanup: %v", pids)
		}
	})
	return re
}

func (re *residentEnv) env() []string {
	return append(append(re.fx.env(), "XDG_STATE_HOME="+re.state), re.extra...)
}

func (re *residentEnv) dir() string { return filepath.Join(re.state, "agentbox", "resident") }

// run is `agentbox run -C ws [extra...] -- /bin/sh -c script` with the
// helper's state directory.
func (re *residentEnv) run(t *testing.T, o runOpts, extra []string, script string) result {
	t.Helper()
	needBin(t)
	args := append([]string{"run", "-C", re.fx.ws}, extra...)
	args = append(args, "--", "/bin/sh", "-c", script)
	o.env = append(re.env(), o.env...)
	if o.dir == "" {
		o.dir = re.fx.ws
	}
	return execute(t, re.fx.u, o, binPath, args...)
}

// served runs script after servedProbe, and reports whether the helper
// served it, with the script's own output after the first line.
func (re *residentEnv) served(t *testing.T, o runOpts, extra []string, script string) (bool, result) {
	t.Helper()
	r := re.run(t, o, extra, servedProbe+"; "+script)
	first, rest, _ := strings.Cut(r.stdout, "\n")
	r.stdout = rest
	return first == "agentbox-resident-init", r
}

// warm runs `true` under extra until the helper serves it (the first run
// starts the helper and runs on its own; the next prepares a sandbox).
func (re *residentEnv) warm(t *testing.T, extra ...string) {
	t.Helper()
	for i := 0; i < 8; i++ {
		if ok, r := re.served(t, runOpts{}, extra, "true"); ok {
			return
		} else if r.code != 0 {
			t.Fatalf("warm-up run failed: %v", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the helper never served a run under %v (helpers: %v)", extra, re.helpers())
}

// helpers lists the pids of helpers serving this state directory.
func (re *residentEnv) helpers() []int {
	var pids []int
	for _, p := range procsWith("resident\x00--state-dir\x00" + filepath.Join(re.state, "agentbox")) {
		s, _, _ := strings.Cut(p, ":")
		if pid, err := strconv.Atoi(s); err == nil && pid > 1 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestResidentServesAsALoneRun: through the helper, a run keeps the
// contract of a lone run: exit status, death by a signal, 126/127, stdin,
// stdout and stderr as pipes, the environment, the working directory,
// the umask and resource limits the CLI has, --report, and the same
// confinement (writes outside, .git, the network).
func TestResidentServesAsALoneRun(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		re := newResidentEnv(t, fx)
		re.warm(t)

		ok, r := re.served(t, runOpts{stdin: strings.NewReader("from stdin\n")}, nil,
			`cat; echo "env=$WS"; pwd; echo err >&2; exit 3`)
		if !ok {
			t.Fatalf("not served by the helper: %v", r)
		}
		if r.code != 3 || r.stdout != "from stdin\nenv="+fx.ws+"\n"+fx.ws+"\n" || r.stderr != "err\n" {
			t.Errorf("served run: want exit 3 with stdin, env, cwd and stderr as a lone run's: %v", r)
		}
		// Killed by a signal it sent itself, or by one from outside
		// (here the CLI's SIGTERM, relayed): 128+N, as a lone run. (A
		// session's command alone would be PID 1 of its pid namespace,
		// where the kernel drops a default-action signal from inside:
		// the shim is there for this.)
		for _, c := range []struct {
			script string
			code   int
		}{{`kill -TERM $$`, 143}, {`kill -KILL $$`, 137}, {`kill -PIPE $$`, 141}} {
			if ok, r := re.served(t, runOpts{}, nil, c.script); !ok || r.code != c.code {
				t.Errorf("%s: want %d (served %v): %v", c.script, c.code, ok, r)
			}
		}
		ready := filepath.Join(fx.ws, "ready-term")
		cmd := command(u, runOpts{env: re.env(), dir: fx.ws}, binPath, "run", "-C", fx.ws, "--", "/bin/sh", "-c", servedProbe+` > "$0"; exec sleep 30`, ready)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if !waitFor(10*time.Second, func() bool { b, _ := os.ReadFile(ready); return string(b) == "agentbox-resident-init\n" }) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the command never became ready, or was not served")
		}
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
			t.Errorf("a served command without a handler, SIGTERM relayed: exit %d, want %d", code, 128+int(syscall.SIGTERM))
		}
		for _, c := range []struct {
			argv []string
			code int
		}{{[]string{"/nonexistent/cmd"}, 127}, {[]string{"no-such-command-anywhere"}, 127}, {[]string{fx.ws}, 126}} {
			args := append([]string{"run", "-C", fx.ws, "--"}, c.argv...)
			r := execute(t, u, runOpts{env: re.env(), dir: fx.ws}, binPath, args...)
			if r.code != c.code || !strings.Contains(r.stderr, "agentbox:") {
				t.Errorf("%v: want %d with agentbox's message, as a lone run: %v", c.argv, c.code, r)
			}
		}
		// Confinement is the lone run's.
		ok, r = re.served(t, runOpts{}, nil, `echo x > "$OUT/file.txt"; echo x > "$WS/.git/config"; echo ok > "$WS/written"; cat /proc/self/status | grep -E '^(NoNewPrivs|Seccomp):'`)
		if !ok {
			t.Fatalf("not served: %v", r)
		}
		assertContent(t, filepath.Join(fx.out, "file.txt"), fx.txt)
		assertContent(t, filepath.Join(fx.ws, ".git", "config"), fx.gitConfig)
		assertContent(t, filepath.Join(fx.ws, "written"), "ok\n")
		if !strings.Contains(r.stdout, "NoNewPrivs:\t1") || !strings.Contains(r.stdout, "Seccomp:\t2") {
			t.Errorf("served command lacks no_new_privs or seccomp: %v", r)
		}
		// --report.
		report := filepath.Join(fx.dir, "report.json")
		ok, r = re.served(t, runOpts{}, []string{"--report", report}, "exit 5")
		if !ok || r.code != 5 {
			t.Errorf("--report run: want served, exit 5: %v", r)
		}
		if b, err := os.ReadFile(report); err != nil || !strings.Contains(string(b), `"exit_code": 5`) || !strings.Contains(string(b), `"mode": "off"`) {
			t.Errorf("--report through the helper: %q, %v", b, err)
		}
	})
}

// TestResidentUmaskAndLimits: the command gets the CLI's umask and
// resource limits, whether the helper (started under others) serves it
// or the run starts on its own.
func TestResidentUmaskAndLimits(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		re := newResidentEnv(t, fx)
		re.warm(t)
		script := `umask; ulimit -c; ulimit -s`
		_, base := re.served(t, runOpts{}, nil, script)
		for _, pre := range []string{"umask 027", "ulimit -S -c 0", "ulimit -S -s 4096"} {
			// The CLI itself runs under the changed setting.
			want := host(t, u, runOpts{env: re.env(), dir: fx.ws}, "/bin/sh", "-c", pre+"; "+script)
			got := execute(t, u, runOpts{env: re.env(), dir: fx.ws}, "/bin/sh", "-c", pre+`; exec "$0" "$@"`,
				binPath, "run", "-C", fx.ws, "--", "/bin/sh", "-c", script)
			if got.code != 0 || got.stdout != want.stdout {
				t.Errorf("CLI under %q: the command saw %q, want %q (the helper was started under %q): %v", pre, got.stdout, want.stdout, base.stdout, got)
			}
		}
	})
}

// TestResidentSignalsTimeoutAndDeath: SIGTERM, SIGINT and SIGHUP sent to
// the CLI reach a served command; --timeout kills its whole tree with
// 137; and when the CLI is SIGKILLed, the helper sees the connection
// close and the command's whole tree dies.
func TestResidentSignalsTimeoutAndDeath(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		re := newResidentEnv(t, fx)
		re.warm(t)
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
			ready := filepath.Join(fx.ws, "ready-"+strconv.Itoa(int(sig)))
			cmd := command(u, runOpts{env: re.env(), dir: fx.ws}, binPath, "run", "-C", fx.ws, "--", "/bin/sh", "-c",
				fmt.Sprintf(`trap 'echo got; exit 7' %d; %s > %q; while :; do sleep 0.05; done`, sig, servedProbe, ready))
			var out strings.Builder
			cmd.Stdout = &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if !waitFor(10*time.Second, func() bool { b, _ := os.ReadFile(ready); return string(b) == "agentbox-resident-init\n" }) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("signal %v: the command never became ready", sig)
			}
			cmd.Process.Signal(sig)
			cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); code != 7 || out.String() != "got\n" {
				t.Errorf("signal %v to a served command: exit %d, stdout %q; want 7, \"got\"", sig, code, out.String())
			}
		}

		tok := fmt.Sprintf("resident-timeout-%d", time.Now().UnixNano())
		ok, r := re.served(t, runOpts{}, []string{"--timeout", "1s"}, fmt.Sprintf(`sh -c 'sleep 30; : %s' & sleep 30`, tok))
		if !ok || r.code != 137 || !strings.Contains(r.stderr, "timed out") {
			t.Errorf("--timeout through the helper: want served, 137 and the message: %v", r)
		}
		if !waitFor(5*time.Second, func() bool { return len(procsWith(tok)) == 0 }) {
			t.Errorf("processes outlived the timed-out command: %v", procsWith(tok))
		}

		tok = fmt.Sprintf("resident-killed-%d", time.Now().UnixNano())
		ready := filepath.Join(fx.ws, "ready-kill")
		cmd := command(u, runOpts{env: re.env(), dir: fx.ws}, binPath, "run", "-C", fx.ws, "--", "/bin/sh", "-c",
			fmt.Sprintf(`sh -c 'sleep 60; : %s' & %s > %q; wait`, tok, servedProbe, ready))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if !waitFor(10*time.Second, func() bool { b, _ := os.ReadFile(ready); return string(b) == "agentbox-resident-init\n" }) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the command never became ready, or was not served: %v", procsWith(tok))
		}
		if len(procsWith(tok)) == 0 {
			t.Fatal("the background sleeper is not running: the test shows nothing")
		}
		cmd.Process.Kill()
		cmd.Wait()
		if !waitFor(5*time.Second, func() bool { return len(procsWith(tok)) == 0 }) {
			t.Errorf("a served command's tree outlived its SIGKILLed CLI: %v", procsWith(tok))
		}
	})
}

// TestResidentExactPolicy: runs with different policies in a row, each
// through the helper, each get exactly their own confinement: read-only
// after workspace-write and back, an --add-dir and then none, and a
// protected path created on the host between two runs (the prepared
// sandbox's view of it is stale: a new one must serve).
func TestResidentExactPolicy(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, noCodex)
		re := newResidentEnv(t, fx)
		ro := []string{"-s", "read-only"}
		add := []string{"--add-dir", fx.add}
		re.warm(t)
		re.warm(t, ro...)
		re.warm(t, add...)
		for i, c := range []struct {
			extra []string
			ws    bool // may write the workspace
			add   bool // may write the --add-dir root
		}{{nil, true, false}, {ro, false, false}, {nil, true, false}, {add, true, true}, {nil, true, false}, {ro, false, false}, {add, true, true}} {
			f := fmt.Sprintf("w%d", i)
			ok, r := re.served(t, runOpts{}, c.extra, fmt.Sprintf(`echo x > "$WS/%s"; echo x > "$ADD/%s"; true`, f, f))
			if !ok {
				t.Errorf("run %d %v: not served by the helper: %v", i, c.extra, r)
			}
			if got := exists(filepath.Join(fx.ws, f)); got != c.ws {
				t.Errorf("run %d %v: workspace written: %v, want %v", i, c.extra, got, c.ws)
			}
			if got := exists(filepath.Join(fx.add, f)); got != c.add {
				t.Errorf("run %d %v: --add-dir root written: %v, want %v", i, c.extra, got, c.add)
			}
		}

		// .codex is missing: the helper's sandbox has no placeholder
		// for it between runs (TestResidentNoPlaceholdersBetweenRuns).
		// The user makes a real .codex on the host; the next run must
		// protect that one.
		codex := filepath.Join(fx.ws, ".codex")
		re.warm(t)
		if _, err := os.Lstat(codex); err == nil {
			t.Fatalf("a placeholder at %s outlived the run", codex)
		}
		if err := os.Mkdir(codex, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(codex, "config.toml")
		if err := os.WriteFile(cfg, []byte(fx.codexConfig), 0o644); err != nil {
			t.Fatal(err)
		}
		chownR(t, codex, u)
		for i := 0; i < 3; i++ {
			ok, r := re.served(t, runOpts{}, nil, `echo 'model = "evil"' > "$WS/.codex/config.toml"; echo 'x' > "$WS/.codex/new"; true`)
			t.Logf("run %d after .codex appeared: served %v", i, ok)
			if r.code != 0 {
				t.Errorf("run %d: %v", i, r)
			}
		}
		assertContent(t, cfg, fx.codexConfig)
		if exists(filepath.Join(codex, "new")) {
			t.Errorf("host: a command wrote into the .codex created after the helper prepared its sandbox")
		}
	})
}

// attackArgs is the shell command of the resident attacker
// (resident_attack_test.go) sending attack, writing file when served.
func attackArgs(re *residentEnv, file, attack string) string {
	return fmt.Sprintf(`AGENTBOX_TEST_WRAPPER=%s %q %q %q %q %q %q`, attackMode, wrapperPath, re.state+"/agentbox", binPath, re.fx.out, file, attack)
}

// TestResidentUnreachableFromSandbox: a command inside the sandbox (with
// user namespaces and in degraded mode, as root and as a plain user)
// sends the helper exactly the request a CLI would send to run a command
// under another policy (the directory outside as its workspace). The
// connect is refused by the unix socket mediation; with the helper's
// socket listed in allow_unix_sockets (mediation out of the way), the
// helper's peer check refuses it without a word. The control: the same
// request from an unconfined process of the user is served. The host
// shows the file written only by the control.
func TestResidentUnreachableFromSandbox(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		re := newResidentEnv(t, fx)
		re.warm(t)
		sock := filepath.Join(re.dir(), "sock")
		cfg := filepath.Join(fx.dir, "open.toml")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[sandbox_workspace_write]\nallow_unix_sockets = [%q]\n", sock)), 0o644); err != nil {
			t.Fatal(err)
		}

		{
			kind := "client's"
			// The control: unconfined, the request is served.
			ctl := host(t, u, runOpts{env: re.env(), dir: fx.ws}, "/bin/sh", "-c", attackArgs(re, "pwned-control", "request"))
			if ctl.code != 0 || !strings.Contains(ctl.stdout, "served: exit 0") {
				t.Fatalf("control: the forged %s request from an unconfined process was not served, so the test shows nothing: %v", kind, ctl)
			}
			assertContent(t, filepath.Join(fx.out, "pwned-control"), "pwned\n")
			os.Remove(filepath.Join(fx.out, "pwned-control"))

			for _, c := range []struct {
				name     string
				degraded bool
				extra    []string
				want     string // what the attacker must report
			}{
				{"userns", false, nil, "connect: permission denied"},
				{"userns, socket listed", false, []string{"--config", cfg}, "no answer"},
				{"degraded", true, []string{"--allow-degraded"}, "connect: permission denied"},
				{"degraded, socket listed", true, []string{"--allow-degraded", "--config", cfg}, "no answer"},
			} {
				file := "pwned-" + strings.NewReplacer(" ", "", ",", "-").Replace(c.name)
				script := attackArgs(re, file, "request")
				var r result
				if c.degraded {
					r = degradedOpts(t, fx, runOpts{env: []string{"XDG_STATE_HOME=" + re.state}}, c.extra, script)
				} else {
					r = re.run(t, runOpts{}, c.extra, script)
				}
				if exists(filepath.Join(fx.out, file)) {
					t.Errorf("%s, %s request: host: the helper ran the sandboxed command's request (%s written): %v", c.name, kind, file, r)
				}
				if !strings.Contains(r.stdout, c.want) {
					t.Errorf("%s, %s request: the attacker reports %q, want %q: %v", c.name, kind, r.stdout, c.want, r)
				}
			}
		}
		// And the helper still serves its own user afterwards.
		if ok, r := re.served(t, runOpts{}, nil, "true"); !ok {
			t.Errorf("the helper no longer serves after the attempts: %v", r)
		}
	})
}

// TestResidentRefusesMalformed: from an unconfined process of the user
// (one the peer check lets through), every malformed message made of the
// genuine request (cut short, a byte too many, a length or count of
// 2^64-1 or 2^40, an unknown tag, empty, over the size bound, the JSON
// of old, the wrong number of descriptors, a reply's kind, a signal
// before any run, and a --report answered without its descriptor, with
// three, with a byte too many or with another kind) is refused without a
// word and runs nothing, and the same helper serves the genuine request
// and a CLI's run afterwards.
func TestResidentRefusesMalformed(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		re := newResidentEnv(t, fx)
		re.warm(t)
		before := re.helpers()
		names := make([]string, 0, len(attacks)+len(reportAttacks))
		for a := range attacks {
			names = append(names, a)
		}
		for a := range reportAttacks {
			names = append(names, a)
		}
		sort.Strings(names)
		for _, a := range names {
			if a == "request" || a == "report" {
				continue
			}
			file := "pwned-" + a
			r := host(t, u, runOpts{env: re.env(), dir: fx.ws}, "/bin/sh", "-c", attackArgs(re, file, a))
			if !strings.Contains(r.stdout, "no answer") {
				t.Errorf("%s: the attacker reports %q, want no answer: %v", a, r.stdout, r)
			}
			// A report attack is answered at the report: its run was
			// accepted as far as that.
			if _, ok := reportAttacks[a]; ok && !strings.Contains(r.stdout, "open report") {
				t.Errorf("%s: the helper never asked for the report: %v", a, r)
			}
			if exists(filepath.Join(fx.out, file)) {
				t.Errorf("%s: host: the helper ran a malformed request (%s written)", a, file)
			}
		}
		// The controls: the genuine request, and one with --report, are
		// served by the same helper, which survived every attempt.
		for _, a := range []string{"request", "report"} {
			file := "pwned-control-" + a
			r := host(t, u, runOpts{env: re.env(), dir: fx.ws}, "/bin/sh", "-c", attackArgs(re, file, a))
			if r.code != 0 || !strings.Contains(r.stdout, "served: exit 0") {
				t.Errorf("control %s: not served after the attempts: %v", a, r)
			}
			assertContent(t, filepath.Join(fx.out, file), "pwned\n")
		}
		if b, err := os.ReadFile(filepath.Join(fx.out, "pwned-control-report.report")); err != nil || !strings.Contains(string(b), `"exit_code": 0`) {
			t.Errorf("control report: the helper did not write the report through the descriptor passed: %q, %v", b, err)
		}
		if ok, r := re.served(t, runOpts{}, nil, "true"); !ok || r.code != 0 {
			t.Errorf("the helper no longer serves the CLI after the attempts: %v", r)
		}
		if after := re.helpers(); fmt.Sprint(after) != fmt.Sprint(before) || len(after) != 1 {
			t.Errorf("helpers %v before the attempts, %v after: one crashed or was replaced", before, after)
		}
	})
}

// TestResidentLifecycle: one helper however many CLIs race to start it;
// it exits when idle, leaving only its directory; a stale socket (a
// SIGKILLed helper's) is replaced; cleanup stops it; AGENTBOX_RESIDENT=0
// and [linux] resident = false keep runs from starting one.
func TestResidentLifecycle(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		re := newResidentEnv(t, fx, "AGENTBOX_RESIDENT_IDLE=2")

		// Eight CLIs at once, with no helper yet.
		var cmds []*exec.Cmd
		for i := 0; i < 8; i++ {
			cmd := command(u, runOpts{env: re.env(), dir: fx.ws}, binPath, "run", "-C", fx.ws, "--", "true")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds = append(cmds, cmd)
		}
		for _, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Errorf("racing run: %v", err)
			}
		}
		time.Sleep(300 * time.Millisecond)
		if pids := re.helpers(); len(pids) != 1 {
			t.Errorf("after 8 racing CLIs: %d helpers (%v), want 1", len(pids), pids)
		}
		re.warm(t)

		// Idle: gone within its idle period and a tick, socket removed.
		if !waitFor(10*time.Second, func() bool { return len(re.helpers()) == 0 }) {
			t.Fatalf("the helper did not exit when idle: %v", re.helpers())
		}
		if exists(filepath.Join(re.dir(), "sock")) {
			t.Error("the idle helper left its socket")
		}
		if pl := filepath.Join(fx.ws, ".agents"); exists(pl) {
			t.Errorf("the idle helper left the placeholder %s", pl)
		}

		// A SIGKILLed helper leaves a stale socket; runs still work and
		// the next helper replaces it.
		re.warm(t)
		for _, pid := range re.helpers() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if !waitFor(5*time.Second, func() bool { return len(re.helpers()) == 0 }) {
			t.Fatal("the helper survived SIGKILL")
		}
		if !exists(filepath.Join(re.dir(), "sock")) {
			t.Fatal("no stale socket after SIGKILL: the test shows nothing")
		}
		if r := re.run(t, runOpts{}, nil, "echo ok"); r.code != 0 || r.stdout != "ok\n" {
			t.Errorf("run with a stale socket: %v", r)
		}
		re.warm(t)

		// cleanup stops it (and then removes what it held).
		if r := host(t, u, runOpts{env: re.env()}, binPath, "cleanup"); r.code != 0 {
			t.Errorf("cleanup: %v", r)
		}
		if pids := re.helpers(); len(pids) != 0 {
			t.Errorf("helper running after cleanup: %v", pids)
		}

		// Off switches: no helper is started, runs work.
		cfg := filepath.Join(fx.dir, "off.toml")
		if err := os.WriteFile(cfg, []byte("[linux]\nresident = false\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			env, extra []string
		}{{[]string{"AGENTBOX_RESIDENT=0"}, nil}, {nil, []string{"--config", cfg}}} {
			for i := 0; i < 3; i++ {
				ok, r := re.served(t, runOpts{env: c.env}, c.extra, "true")
				if ok || r.code != 0 {
					t.Errorf("switched off (%v %v): served %v: %v", c.env, c.extra, ok, r)
				}
			}
			if pids := re.helpers(); len(pids) != 0 {
				t.Errorf("switched off (%v %v): a helper was started: %v", c.env, c.extra, pids)
			}
		}
	})
}

// TestResidentNoPlaceholdersBetweenRuns (issue 21, finding 7): a served
// run's placeholders for the workspace's missing protected names exist
// while its command runs, and are gone when the run returns, though the
// helper keeps the sandbox: the user can create those names on the host
// between runs. The next run is served by the same sandbox (one
// /dev/shm: a file one run leaves there is there for the next), which
// keeps the workspace's tool-cache layer, and so is a run that starts
// while another one's placeholders are on disk.
func TestResidentNoPlaceholdersBetweenRuns(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, noCodex)
		re := newResidentEnv(t, fx)
		missing := []string{".codex", ".agents", ".claude", ".mcp.json", ".vscode", ".idea", ".cursor", ".gemini", ".zed"}
		gone := func(when string) {
			t.Helper()
			for _, n := range missing {
				if _, err := os.Lstat(filepath.Join(fx.ws, n)); err == nil {
					t.Errorf("%s: %s is on the host", when, n)
				}
			}
		}
		// Until one run is served: the helper starts on the first.
		inside := `echo mark > /dev/shm/resident-mark; test -d .codex && test -d .mcp.json && ! mkdir .codex/x 2>/dev/null && ! (: > .mcp.json) 2>/dev/null && echo held`
		var ok bool
		var r result
		for i := 0; i < 8 && !ok; i++ {
			ok, r = re.served(t, runOpts{}, nil, inside)
			time.Sleep(50 * time.Millisecond)
		}
		if !ok || r.stdout != "held\n" {
			t.Fatalf("never served, or the placeholders were not there and read-only while the command ran: %v", r)
		}
		gone("after a served run")
		ok, r = re.served(t, runOpts{}, nil, `cat /dev/shm/resident-mark`)
		if !ok || r.stdout != "mark\n" {
			t.Errorf("the next run was not served from the same sandbox: %v", r)
		}
		gone("after the next run")

		// A run that starts while another one's placeholders are on disk.
		long := make(chan result, 1)
		go func() { _, r := re.served(t, runOpts{}, nil, `sleep 2`); long <- r }()
		if !waitFor(5*time.Second, func() bool { return exists(filepath.Join(fx.ws, ".codex")) }) {
			t.Fatal("the long run's placeholders never appeared")
		}
		ok, r = re.served(t, runOpts{}, nil, `cat /dev/shm/resident-mark; mkdir .codex/x 2>/dev/null && echo MADE; true`)
		if !ok || r.stdout != "mark\n" {
			t.Errorf("a run overlapping another was not served from the same sandbox, or could write .codex: %v", r)
		}
		if lr := <-long; lr.code != 0 {
			t.Errorf("the long run: %v", lr)
		}
		gone("after overlapping runs")

		// The user's own between runs.
		if r := host(t, u, runOpts{dir: fx.ws}, "/bin/mkdir", ".claude", ".codex"); r.code != 0 {
			t.Errorf("the user cannot create .claude and .codex on the host between runs: %v", r)
		}
		if r := re.run(t, runOpts{}, nil, `echo '{}' > .claude/settings.json; touch .codex/x; true`); r.code != 0 {
			t.Errorf("run: %v", r)
		}
		assertAbsent(t, filepath.Join(fx.ws, ".claude", "settings.json"))
		assertAbsent(t, filepath.Join(fx.ws, ".codex", "x"))

		// allow_git_writes' placeholders in .git (config.worktree,
		// modules, worktrees) likewise.
		cfg := filepath.Join(fx.dir, "git.toml")
		writeFile(t, cfg, "[sandbox_workspace_write]\nallow_git_writes = true\n")
		chownR(t, cfg, u)
		extra := []string{"--config", cfg}
		re.warm(t, extra...)
		for i := range 2 {
			ok, r := re.served(t, runOpts{}, extra, `test -f .git/config.worktree && test -d .git/modules && ! (echo x > .git/config.worktree) 2>/dev/null && ! mkdir .git/modules/x 2>/dev/null && echo held`)
			if !ok || r.stdout != "held\n" {
				t.Errorf("git-writes run %d: not served, or its placeholders were not there and read-only: %v", i, r)
			}
			for _, p := range []string{"config.worktree", "modules", "worktrees"} {
				assertAbsent(t, filepath.Join(fx.ws, ".git", p))
			}
		}
	})
}

// TestResidentParallel: many CLIs at once under several policies, while
// the helper prepares sandboxes for them: every run succeeds with its own
// confinement (a helper that crashed here, on a sandbox still being
// prepared, killed the commands it was running).
func TestResidentParallel(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, noCodex)
		re := newResidentEnv(t, fx)
		re.warm(t)
		policies := [][]string{nil, {"-s", "read-only"}, {"--add-dir", fx.add}, {"--network"}}
		for round := range 3 {
			var wg sync.WaitGroup
			results := make([]result, 12)
			for i := range results {
				wg.Go(func() {
					results[i] = re.run(t, runOpts{timeout: 60 * time.Second}, policies[i%len(policies)],
						fmt.Sprintf(`echo x > "$ADD/p%d-%d" 2>/dev/null; echo ok`, round, i))
				})
			}
			wg.Wait()
			for i, r := range results {
				if r.code != 0 || r.stdout != "ok\n" {
					t.Errorf("round %d run %d %v: %v", round, i, policies[i%len(policies)], r)
				}
				wrote := exists(filepath.Join(fx.add, fmt.Sprintf("p%d-%d", round, i)))
				if want := i%len(policies) == 2; wrote != want {
					t.Errorf("round %d run %d %v: wrote the --add-dir root: %v, want %v", round, i, policies[i%len(policies)], wrote, want)
				}
			}
		}
	})
}

// TestResidentRacingFirstRuns: CLIs that ask a warm helper, all at once,
// for a policy it has no sandbox for yet (one whose root lacks the
// protected names, so the sandbox makes placeholders there) are all
// served, and when the helper exits idle it leaves no placeholder and no
// sandbox behind. A request that filed a second session under the key of
// one being prepared used to make the first unreachable: never closed,
// its placeholders left in the root for good.
func TestResidentRacingFirstRuns(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		re := newResidentEnv(t, fx, "AGENTBOX_RESIDENT_IDLE=2")
		re.warm(t)
		helpers := re.helpers()
		if len(helpers) != 1 {
			t.Fatalf("helpers: %v, want one", helpers)
		}
		// The race is narrow: several rounds, each a new policy.
		const rounds = 6
		for round := range rounds {
			add := filepath.Join(fx.dir, fmt.Sprintf("add%d", round))
			if err := os.Mkdir(add, 0o755); err != nil {
				t.Fatal(err)
			}
			chownR(t, add, u)
			var wg sync.WaitGroup
			results := make([]result, 8)
			for i := range results {
				wg.Go(func() { results[i] = re.run(t, runOpts{timeout: 60 * time.Second}, []string{"--add-dir", add}, "true") })
			}
			wg.Wait()
			for i, r := range results {
				if r.code != 0 {
					t.Errorf("round %d run %d: %v", round, i, r)
				}
			}
		}
		sandboxes := zygotesOf(helpers[0])
		if !waitFor(15*time.Second, func() bool { return len(re.helpers()) == 0 }) {
			t.Fatalf("the helper did not exit when idle: %v", re.helpers())
		}
		for round := range rounds {
			for _, name := range []string{".git", ".codex", ".agents"} {
				if p := filepath.Join(fx.dir, fmt.Sprintf("add%d", round), name); exists(p) {
					t.Errorf("the idle helper left the placeholder %s", p)
				}
			}
		}
		for _, pid := range sandboxes {
			if exists(fmt.Sprintf("/proc/%d", pid)) {
				t.Errorf("the helper's sandbox %d outlived it", pid)
			}
		}
	})
}

// zygotesOf lists the helper's children: its sessions' sandboxes.
func zygotesOf(helper int) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so after ")".
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(helper) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestResidentIPCNotShared: SysV IPC objects a served command makes die
// with it, as a lone run's do, instead of staying in the prepared
// sandbox for the next command (each command has its own IPC namespace).
func TestResidentIPCNotShared(t *testing.T) {
	if _, err := exec.LookPath("ipcmk"); err != nil {
		t.Skip("ipcmk (util-linux) is not installed")
	}
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		re := newResidentEnv(t, fx)
		re.warm(t)
		ok, r := re.served(t, runOpts{}, nil, `ipcmk -Q >/dev/null && ipcs -q | grep -c '^0x'`)
		if !ok || r.code != 0 || strings.TrimSpace(r.stdout) != "1" {
			t.Fatalf("a served command could not make a message queue (served %v): %v", ok, r)
		}
		ok, r = re.served(t, runOpts{}, nil, `ipcs -q | grep -c '^0x'; true`)
		if !ok {
			t.Fatalf("second run not served: %v", r)
		}
		if n := strings.TrimSpace(r.stdout); n != "0" {
			t.Errorf("the next served command sees %s message queue(s) the previous one made", n)
		}
	})
}

// inits counts the Go package inits GODEBUG=inittrace=1 reported on a
// CLI's stderr: about 20 when the lean client (internal/resident/client)
// handed the run over from its init, over 100 when the full CLI ran.
func inits(stderr string) int {
	n := 0
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "init ") && strings.Contains(l, " ms clock") {
			n++
		}
	}
	return n
}

// TestResidentLeanClient: a plain run is handed to the helper by the lean
// client before the CLI starts (few package inits on stderr), with the
// policy the CLI would have resolved: relative -C from another directory,
// the default config's writable roots, writes outside refused on the host.
// What the helper must not decide (a flag error) goes to the full CLI:
// the same message and status as without a helper. A --report file is
// opened by the client and written by the helper.
func TestResidentLeanClient(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		cfgHome := filepath.Join(fx.dir, "xdg")
		extra := filepath.Join(fx.dir, "extra")
		for _, d := range []string{filepath.Join(cfgHome, "agentbox"), extra} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(cfgHome, "agentbox", "config.toml"), []byte(fmt.Sprintf("[sandbox_workspace_write]\nwritable_roots = [%q]\n", extra)), 0o644); err != nil {
			t.Fatal(err)
		}
		chownR(t, cfgHome, u)
		chownR(t, extra, u)
		re := newResidentEnv(t, fx, "XDG_CONFIG_HOME="+cfgHome)
		re.warm(t)
		trace := []string{"GODEBUG=inittrace=1"}
		// From the fixture's directory, the workspace named relatively.
		script := servedProbe + `; echo in > "$0/lean-ws"; echo in > "$1/lean-extra"; echo out > "$2/lean-out" || true`
		var r result
		for i := 0; i < 3; i++ {
			r = execute(t, u, runOpts{env: append(re.env(), trace...), dir: fx.dir}, binPath,
				"run", "-C", filepath.Base(fx.ws), "--", "/bin/sh", "-c", script, fx.ws, extra, fx.out)
			if r.code != 0 {
				t.Fatalf("lean run: %v", r)
			}
			if n := inits(r.stderr); n > 40 {
				t.Errorf("run %d: %d package inits before the run was handed over, want the lean client's ~20: %v", i, n, r)
			}
		}
		if !strings.HasPrefix(r.stdout, "agentbox-resident-init\n") {
			t.Errorf("the lean run was not the helper's: %v", r)
		}
		assertContent(t, filepath.Join(fx.ws, "lean-ws"), "in\n")
		assertContent(t, filepath.Join(extra, "lean-extra"), "in\n")
		if exists(filepath.Join(fx.out, "lean-out")) {
			t.Errorf("host: the lean run wrote outside its writable roots")
		}

		// A flag error: the full CLI's message and 125.
		r = re.run(t, runOpts{env: trace}, []string{"--bogus"}, "true")
		if r.code != 125 || !strings.Contains(r.stderr, "unknown flag: --bogus") || inits(r.stderr) < 100 {
			t.Errorf("--bogus: want the full CLI's 125 and message: %v", r)
		}
		// --report: the lean client too, the report written through
		// the file it opened and passed.
		rep := filepath.Join(fx.dir, "report.json")
		ok, r := re.served(t, runOpts{env: trace}, []string{"--report", rep}, "exit 3")
		if !ok || r.code != 3 || inits(r.stderr) > 40 {
			t.Errorf("--report: want the lean client's run through the helper, exit 3: served %v, %v", ok, r)
		}
		if b, err := os.ReadFile(rep); err != nil || !strings.Contains(string(b), `"exit_code": 3`) {
			t.Errorf("--report: %s, %v", b, err)
		}
	})
}

// TestNonUTF8ArgvAndEnv: an argument and an environment value that are
// not UTF-8 (a Latin-1 file name) reach the command byte for byte: in a
// lone run, through the lean client and through it with --report, the
// wire formats a run crosses (the init stage's spec, the helper's
// request, a session's zygote).
func TestNonUTF8ArgvAndEnv(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		re := newResidentEnv(t, fx)
		re.warm(t)
		want := "caf\xe9|\xffx"
		script := `printf '%s|%s' "$LATIN1" "$1"`
		rep := filepath.Join(fx.dir, "r.json")
		for _, c := range []struct {
			name  string
			env   []string
			extra []string
		}{
			{"lone run", []string{"AGENTBOX_RESIDENT=0"}, nil},
			{"lean client", nil, nil},
			{"lean client, --report", nil, []string{"--report", rep}},
		} {
			args := append([]string{"run", "-C", fx.ws}, c.extra...)
			args = append(args, "--", "/bin/sh", "-c", script, "sh", "\xffx")
			r := execute(t, u, runOpts{env: append(append(re.env(), "LATIN1=caf\xe9"), c.env...), dir: fx.ws}, binPath, args...)
			if r.code != 0 || r.stdout != want {
				t.Errorf("%s: the command got %q, want %q: %v", c.name, r.stdout, want, r)
			}
		}
	})
}

// TestCleanupKeepsBusyHelper: `agentbox cleanup` stops an idle helper but
// leaves one that runs a command (another agent's, or another user's: a
// state directory, and so a helper, is shared by every session of a user,
// root's by every root session), says that it did, and the command runs
// to its end; the helper's idle sandboxes are closed meanwhile. Before,
// cleanup stopped the helper and killed the command.
func TestCleanupKeepsBusyHelper(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		re := newResidentEnv(t, fx)
		// Two prepared sandboxes: one that stays idle, one for the long
		// command's policy.
		re.warm(t, "-s", "read-only")
		re.warm(t)
		long := command(u, runOpts{env: re.env(), dir: fx.ws}, binPath, "run", "-C", fx.ws, "--", "/bin/sh", "-c",
			servedProbe+`; echo started > "$WS/started.txt"; sleep 3; echo finished > "$WS/long.txt"`)
		var stdout bytes.Buffer
		long.Stdout = &stdout
		if err := long.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- long.Wait() }()
		defer func() {
			long.Process.Kill()
			<-done
		}()
		if !waitFor(10*time.Second, func() bool { return exists(filepath.Join(fx.ws, "started.txt")) }) {
			t.Fatalf("the long command did not start (helpers %v)", re.helpers())
		}
		helpers := re.helpers()
		r := host(t, u, runOpts{env: re.env()}, binPath, "cleanup")
		if r.code != 0 || !strings.Contains(r.stdout, "kept the resident helper") || !strings.Contains(r.stdout, "1 command(s) running") {
			t.Errorf("cleanup with a command running: %v", r)
		}
		// At least the read-only one (the workspace's first runs may
		// have left one more: the first sees its private /tmp appear).
		if !regexp.MustCompile(`closed its [1-9][0-9]* idle sandbox`).MatchString(r.stdout) {
			t.Errorf("cleanup did not close the idle sandbox: %v", r)
		}
		if got := re.helpers(); len(got) != 1 || len(helpers) != 1 || got[0] != helpers[0] {
			t.Errorf("helpers before cleanup %v, after %v", helpers, got)
		}
		select {
		case err := <-done:
			done <- err
			if err != nil {
				t.Errorf("the long command: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("the long command did not finish")
		}
		if first, _, _ := strings.Cut(stdout.String(), "\n"); first != "agentbox-resident-init" {
			t.Errorf("the long command was not served by the helper: %q", stdout.String())
		}
		assertContent(t, filepath.Join(fx.ws, "long.txt"), "finished\n")

		// Idle now: stopped.
		r = host(t, u, runOpts{env: re.env()}, binPath, "cleanup")
		if r.code != 0 || !strings.Contains(r.stdout, "stopped the idle resident helper") {
			t.Errorf("cleanup of the idle helper: %v", r)
		}
		if pids := re.helpers(); len(pids) != 0 {
			t.Errorf("helper running after cleanup: %v", pids)
		}
	})
}
