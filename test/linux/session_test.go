//go:build linux

package linux

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestInitNotDumpable: the init stage (PID 1 of a lone run) is not
// dumpable, so the command, running as the same uid, cannot see what its
// descriptors are (the unix socket supervisor's notify fd among them),
// read its environment or memory. Without PR_SET_DUMPABLE it can: the
// Landlock domain is the same, and nothing else stands in the way.
func TestInitNotDumpable(t *testing.T) {
	script := `
for fd in /proc/1/fd/*; do readlink $fd >/dev/null 2>&1 && echo "LEAK fd $fd -> $(readlink $fd)"; done
cat /proc/1/environ >/dev/null 2>&1 && echo "LEAK environ"
head -c1 /proc/1/mem >/dev/null 2>&1 && echo "LEAK mem"
readlink /proc/1/cwd >/dev/null 2>&1 && echo "LEAK cwd"
ls /proc/1/root/ >/dev/null 2>&1 && echo "LEAK root"
echo done`
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		r := sandboxed(t, fx, nil, script)
		if r.code != 0 || !strings.HasSuffix(r.stdout, "done\n") {
			t.Fatalf("probe failed: %v", r)
		}
		if strings.Contains(r.stdout, "LEAK") {
			t.Errorf("the command reached its init stage through /proc/1:\n%s", r.stdout)
		}
	})
}

// mcpServer starts `agentbox mcp -C ws` as u, connected to the SDK's own
// client over the server's stdin and stdout. Closing stdin (the returned
// io.Closer) is the client hanging up.
func mcpServer(t *testing.T, u *testUser, fx *fixture, extra ...string) (*mcp.ClientSession, *exec.Cmd, io.Closer) {
	t.Helper()
	needBin(t)
	args := append([]string{"mcp", "-C", fx.ws}, extra...)
	return mcpServerCmd(t, command(u, runOpts{env: fx.env(), dir: fx.ws}, binPath, args...))
}

// mcpServerCmd is mcpServer for a command line of its own.
func mcpServerCmd(t *testing.T, cmd *exec.Cmd) (*mcp.ClientSession, *exec.Cmd, io.Closer) {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "agentbox-test", Version: "v0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: stdin}, nil)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("connecting to agentbox mcp: %v\nstderr: %s", err, stderr.String())
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() {
			cmd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("agentbox mcp did not exit within 5 s of its stdin closing")
		}
		cs.Close()
		if t.Failed() {
			t.Logf("agentbox mcp stderr: %s", stderr.String())
		}
	})
	return cs, cmd, stdin
}

func cmdline(pid string) string {
	b, _ := os.ReadFile("/proc/" + pid + "/cmdline")
	return string(b)
}

// procState is the state letter of pid ("Z" for a zombie), "" if gone.
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2 : i+3]
	}
	return ""
}

type mcpResult struct {
	ExitCode int       `json:"exit_code"`
	Stdout   string    `json:"stdout"`
	Stderr   string    `json:"stderr"`
	TimedOut bool      `json:"timed_out"`
	Report   runReport `json:"report"`
}

func (r mcpResult) String() string {
	return fmt.Sprintf("exit %d\nstdout: %q\nstderr: %q", r.ExitCode, r.Stdout, r.Stderr)
}

func mcpRun(t *testing.T, cs *mcp.ClientSession, args map[string]any) mcpResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run", Arguments: args})
	if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	var out mcpResult
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	return out
}

func mcpSh(t *testing.T, cs *mcp.ClientSession, script string) mcpResult {
	t.Helper()
	return mcpRun(t, cs, map[string]any{"command": []string{"/bin/sh", "-c", script}})
}

// TestSessionWritesAndEscapes: commands of one session (through agentbox
// mcp) write where a lone run may and nowhere else, and what one command
// is refused stays refused for the next.
func TestSessionWritesAndEscapes(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, noCodex)
		cs, _, _ := mcpServer(t, u, fx)
		before := snapshot(t, fx.dir)
		r := mcpSh(t, cs, `echo new > "$WS/new.txt"; echo changed > "$WS/file.txt"`)
		if r.ExitCode != 0 {
			t.Fatalf("writes inside: %v", r)
		}
		assertContent(t, filepath.Join(fx.ws, "new.txt"), "new\n")
		assertContent(t, filepath.Join(fx.ws, "file.txt"), "changed\n")
		for _, script := range []string{
			`echo x > "$OUT/file.txt"`,
			`echo x > "$WS/link/file.txt"`,
			`echo x >> "$WS/.git/config"`,
			`mkdir "$WS/.codex"`,
			`mv "$WS/.git" "$WS/git.moved"`,
			`echo x > "$HOME/f"`,
			`rm -f "$WS/hl"; echo x > "$OUT/hl-target"`,
		} {
			if r := mcpSh(t, cs, script); r.ExitCode == 0 {
				t.Errorf("%s: succeeded: %v", script, r)
			}
		}
		allow := func(p string) bool {
			return p == filepath.Join(fx.ws, "new.txt") || p == filepath.Join(fx.ws, "file.txt") || p == filepath.Join(fx.ws, "hl")
		}
		for _, d := range diffSnapshots(before, snapshot(t, fx.dir), allow) {
			t.Errorf("host: %s", d)
		}
		// The session's init and neighbours are out of reach.
		probe := `
read -r me _ < /proc/self/stat
for p in /proc/[0-9]*; do
	pid=${p#/proc/}
	[ "$pid" = "$me" ] && continue
	grep -q "^PPid:[[:space:]]*$me\$" $p/status 2>/dev/null && continue
	for fd in $p/fd/*; do readlink $fd >/dev/null 2>&1 && echo "LEAK fd $fd"; done
	cat $p/environ >/dev/null 2>&1 && echo "LEAK environ $pid"
	head -c1 $p/mem >/dev/null 2>&1 && echo "LEAK mem $pid"
	ls $p/root/ >/dev/null 2>&1 && echo "LEAK root $pid"
done
for fd in 3 4 5 6 7 8 9; do (true >&$fd) 2>/dev/null && echo "LEAK inherited fd $fd"; done
grep -E '^(CapEff|CapPrm|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status
echo done`
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // a neighbour to attack
			defer wg.Done()
			mcpRun(t, cs, map[string]any{"command": []string{"sleep", "1"}})
		}()
		time.Sleep(200 * time.Millisecond)
		r = mcpSh(t, cs, probe)
		wg.Wait()
		if !strings.HasSuffix(r.Stdout, "done\n") || strings.Contains(r.Stdout, "LEAK") {
			t.Errorf("probe: %v", r)
		}
		for _, want := range []string{"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("missing %q: %v", want, r)
			}
		}
	})
}

// TestSessionTreeKillTimeoutCrash: a timeout kills the command with its
// background children (checked on the host); a command that crashes or
// kills everything it can see leaves the session working; parallel
// commands run concurrently; closing the server ends everything and
// leaves no placeholder.
func TestSessionTreeKillTimeoutCrash(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u, noCodex)
		cs, srv, hangUp := mcpServer(t, u, fx)
		tok := sleepToken()
		start := time.Now()
		r := mcpRun(t, cs, map[string]any{
			"command":         []string{"/bin/sh", "-c", "setsid sleep " + tok + " & (sleep " + tok + " &) ; sleep " + tok},
			"timeout_seconds": 0.5,
		})
		if r.ExitCode != 137 || !r.TimedOut || time.Since(start) > 10*time.Second {
			t.Errorf("timeout: %v after %v", r, time.Since(start))
		}
		if !waitFor(2*time.Second, func() bool { return len(procsWith(tok)) == 0 }) {
			t.Errorf("processes outlived the timed-out command: %v", procsWith(tok))
		}
		if python != "" {
			r = mcpRun(t, cs, map[string]any{"command": []string{python, "-c", "import ctypes; ctypes.string_at(0)"}})
			if r.ExitCode != 128+int(syscall.SIGSEGV) {
				t.Errorf("segfault: %v", r)
			}
		}
		if r = mcpSh(t, cs, "kill -9 -1; kill -9 1; exit 4"); r.ExitCode != 4 {
			t.Errorf("kill everything: %v", r)
		}
		var wg sync.WaitGroup
		begin := time.Now()
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := mcpSh(t, cs, fmt.Sprintf("sleep 0.5; echo %d > \"$WS/p%d\"; echo %d", i, i, i))
				if r.ExitCode != 0 || r.Stdout != fmt.Sprintf("%d\n", i) {
					t.Errorf("parallel %d: %v", i, r)
				}
			}()
		}
		wg.Wait()
		if d := time.Since(begin); d > 4*time.Second {
			t.Errorf("4 parallel commands of 0.5 s took %v", d)
		}
		for i := range 4 {
			assertContent(t, filepath.Join(fx.ws, fmt.Sprintf("p%d", i)), fmt.Sprintf("%d\n", i))
		}
		// A command still running when the server goes away dies too.
		tok2 := sleepToken()
		go cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"command": []string{"sleep", tok2}}})
		if !waitFor(5*time.Second, func() bool { return len(procsWith(tok2)) > 0 }) {
			t.Fatal("the command never started")
		}
		if exists(filepath.Join(fx.ws, ".codex")) == false {
			t.Error("no placeholder for the missing .codex while the session runs")
		}
		hangUp.Close()
		if !waitFor(5*time.Second, func() bool {
			return srv.ProcessState != nil || !exists(fmt.Sprintf("/proc/%d/cmdline", srv.Process.Pid)) || procState(srv.Process.Pid) == "Z"
		}) {
			t.Error("agentbox mcp still runs after its client hung up")
		}
		if !waitFor(3*time.Second, func() bool { return len(procsWith(tok2)) == 0 }) {
			t.Errorf("a command outlived agentbox mcp: %v", procsWith(tok2))
		}
		assertAbsent(t, filepath.Join(fx.ws, ".codex"))
		assertAbsent(t, filepath.Join(fx.ws, ".agents"))
	})
}

// TestSessionServerKilled: if agentbox mcp is killed outright, the
// session's sandbox and its commands die with it.
func TestSessionServerKilled(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		cs, srv, _ := mcpServer(t, u, fx)
		tok := sleepToken()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cs.CallTool(ctx, &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"command": []string{"sleep", tok}}})
		}()
		if !waitFor(5*time.Second, func() bool { return len(procsWith(tok)) > 0 }) {
			t.Fatal("the command never started")
		}
		// The session's init: agentbox mcp's child.
		zygote := sessionInits(srv.Process.Pid)
		if len(zygote) != 1 {
			t.Fatalf("the session's init is not agentbox mcp's child: %v", zygote)
		}
		srv.Process.Signal(syscall.SIGKILL)
		if !waitFor(3*time.Second, func() bool { return len(procsWith(tok)) == 0 }) {
			t.Errorf("a command outlived its killed server: %v", procsWith(tok))
		}
		if !waitFor(3*time.Second, func() bool { return !strings.Contains(cmdline(zygote[0]), "agentbox-init") }) {
			t.Errorf("the session's init outlived its killed server")
		}
	})
}

// TestSessionLibraryAsUser runs the library's own session tests
// (sandbox/session_linux_test.go: isolation state, confined writes, tree
// kill, signals to a command that is PID 1 of its namespace, parallel
// commands, crashes, escapes, Close) as every test user, the unprivileged
// one included, from a test binary built here.
func TestSessionLibraryAsUser(t *testing.T) {
	needBin(t)
	bin := filepath.Join(baseDir, "bin", "sandbox.test")
	build := exec.Command("go", "test", "-c", "-o", bin, "./sandbox")
	build.Dir = moduleRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go test -c ./sandbox: %v\n%s", err, out)
	}
	os.Chmod(bin, 0o755)
	forEachUser(t, func(t *testing.T, u *testUser) {
		tmp := filepath.Join(u.home, "tmp-"+randName(""))
		if err := os.Mkdir(tmp, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chown(tmp, u.uid, u.gid)
		defer os.RemoveAll(tmp)
		r := execute(t, u, runOpts{env: []string{"TMPDIR=" + tmp}, dir: u.home, timeout: 120 * time.Second},
			bin, "-test.run", "^TestSession", "-test.count=1", "-test.v")
		if r.code != 0 || !strings.Contains(r.stdout, "--- PASS: TestSessionEscapes") {
			t.Errorf("library session tests as %s: %v", u.name, r)
		}
	})
}

// TestSessionDegraded: without user namespaces a session starts each
// command as a lone degraded run would: refused (125, naming the reason)
// unless --allow-degraded, and then confined by Landlock and seccomp.
func TestSessionDegraded(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatalf("unshare(1) is needed to test the fallback: %v", err)
	}
	forEachUser(t, func(t *testing.T, u *testUser) {
		for _, optIn := range []bool{false, true} {
			fx := newFixture(t, u)
			args := []string{"-Ur", "sh", "-c", `echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" "$@"`, binPath, "mcp", "-C", fx.ws}
			if optIn {
				args = append(args, "--allow-degraded")
			}
			cs, _, _ := mcpServerCmd(t, command(u, runOpts{env: fx.env(), dir: fx.ws}, "unshare", args...))
			r := mcpSh(t, cs, `echo in > "$WS/in.txt"; echo out > "$OUT/out.txt"`)
			if !optIn {
				if r.ExitCode != 125 || !strings.Contains(r.Stderr, "--allow-degraded") {
					t.Errorf("without opt-in: %v", r)
				}
				assertAbsent(t, filepath.Join(fx.ws, "in.txt"))
				continue
			}
			assertContent(t, filepath.Join(fx.ws, "in.txt"), "in\n")
			assertAbsent(t, filepath.Join(fx.out, "out.txt"))
			if r.ExitCode == 0 {
				t.Errorf("write outside succeeded: %v", r)
			}
		}
	})
}

// TestSessionEscapeSuite runs every case of the escape suite (fs_test.go)
// as a command of a session (agentbox mcp, with the same flags as the lone
// run), after another command of the same session has run: once the
// session has ended, the host must be unchanged apart from what a case
// allows, exactly as after a lone run.
func TestSessionEscapeSuite(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		for _, c := range escapeCases {
			t.Run(c.name, func(t *testing.T) {
				fx := newFixture(t, u, c.opts...)
				t.Cleanup(func() { os.RemoveAll(fx.dir + ".moved") })
				before := snapshot(t, fx.dir)
				cs, srv, hangUp := mcpServer(t, u, fx, c.args(fx)...)
				if r := mcpSh(t, cs, "true"); r.ExitCode != 0 {
					t.Fatalf("first command: %v", r)
				}
				r := mcpSh(t, cs, c.script)
				// The session's placeholders exist until it ends: check
				// the host afterwards.
				hangUp.Close()
				if !waitFor(5*time.Second, func() bool { return procState(srv.Process.Pid) == "Z" || procState(srv.Process.Pid) == "" }) {
					t.Fatal("agentbox mcp did not exit when its client hung up")
				}
				c.checkHost(t, fx, before, r.ExitCode, r)
			})
		}
	})
}

// TestSessionAllowList: with a network allow-list, the commands of one
// agentbox mcp session (one zygote, one proxy) reach exactly what a lone
// run reaches (egressProbe: the same destinations allowed and refused,
// the servers on the host counting), and each call's report and stderr
// summary hold that call's decisions only: a first call that made no
// request reports none, and calls running at the same time, each asking
// for destinations of its own, get separate reports. The proxy is not on
// the host's loopback; a finished call's listeners are gone from the
// session's namespace, and nothing of the session is left once the
// client hangs up.
func TestSessionAllowList(t *testing.T) {
	needBin(t)
	p := newEgressProbe(t)
	curl, _ := exec.LookPath("curl")
	forEachUser(t, func(t *testing.T, u *testUser) {
		p.reset()
		fx := newFixture(t, u)
		args := append([]string{"mcp", "-C", fx.ws}, p.allow...)
		cs, srv, hangUp := mcpServerCmd(t, command(u, runOpts{env: append(fx.env(), "AGENTBOX_TEST_HOSTS="+p.hosts), dir: fx.ws}, binPath, args...))
		r := mcpSh(t, cs, `echo "$http_proxy"`)
		if r.ExitCode != 0 || !strings.HasPrefix(r.Stdout, "http://127.0.0.1:") || r.Report.Network.Mode != "allow-list" ||
			len(r.Report.Network.Allowed)+len(r.Report.Network.Denied) != 0 {
			t.Fatalf("first call: %v %+v", r, r.Report)
		}
		if zygotes := sessionInits(srv.Process.Pid); len(zygotes) != 1 {
			t.Fatalf("want one session sandbox under agentbox mcp, got %v", zygotes)
		}
		r = mcpRun(t, cs, map[string]any{"command": []string{"/bin/bash", "-c", p.script}})
		if r.ExitCode != 0 {
			t.Fatalf("probe: %v", r)
		}
		p.check(t, r.Stdout, r.Stderr, r.Report)

		// Parallel calls: call i asks for good.test i+1 times and for
		// evili.test once, waiting until every call has made its
		// requests, so that they overlap.
		const n = 4
		p.reset()
		results := make([]mcpResult, n)
		var wg sync.WaitGroup
		for i := range n {
			script := fmt.Sprintf(`for _ in $(seq %[3]d); do %[1]s -fsS %[2]s >/dev/null || echo FAIL; done
%[1]s -fsS %[4]s 2>/dev/null && echo FAIL evil
touch "$WS/req%[5]d"; for _ in $(seq 100); do [ "$(ls "$WS"/req* | wc -l)" -ge %[6]d ] && break; sleep 0.1; done
echo "$http_proxy"`, curl, p.good.at("good.test"), i+1, p.bad.at(fmt.Sprintf("evil%d.good.test.evil.test", i)), i, n)
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = mcpSh(t, cs, script)
			}()
		}
		wg.Wait()
		proxies := map[string]bool{}
		for i, r := range results {
			if r.ExitCode != 0 || strings.Contains(r.Stdout, "FAIL") {
				t.Errorf("parallel call %d: %v", i, r)
				continue
			}
			proxies[r.Stdout] = true
			a, d := r.Report.Network.Allowed, r.Report.Network.Denied
			if len(a) != 1 || a[0].Host != "good.test" || a[0].Count != i+1 {
				t.Errorf("parallel call %d: allowed %+v, want good.test %d times", i, a, i+1)
			}
			evil := fmt.Sprintf("evil%d.good.test.evil.test", i)
			if len(d) != 1 || d[0].Host != evil || d[0].Count != 1 {
				t.Errorf("parallel call %d: denied %+v, want only %s once", i, d, evil)
			}
			if line := fmt.Sprintf("agentbox: network: refused %s:%d (not in allowed_domains)\n", evil, p.bad.port); !strings.HasSuffix(r.Stderr, line) {
				t.Errorf("parallel call %d: stderr does not end with its own refusal %q: %q", i, line, r.Stderr)
			}
		}
		if len(proxies) != n {
			t.Errorf("calls running at once shared proxy listeners: %v", proxies)
		}
		if got, want := p.good.hits.Load(), int64(n*(n+1)/2); got != want {
			t.Errorf("host: the allowed server got %d requests, want %d", got, want)
		}
		if n := p.bad.hits.Load(); n != 0 {
			t.Errorf("host: the refused server got %d requests", n)
		}

		// Nothing listens for the session on the host (the proxy's
		// listeners are in the session's namespace), and in that
		// namespace only the current call's two listeners are left,
		// with the session's name server (127.0.0.1:53) and its
		// transparent listeners (127.0.0.1, and ::1 with IPv6).
		if l := hostListeners(t, srv.Process.Pid); len(l) != 0 {
			t.Errorf("agentbox mcp listens on the host: %v", l)
		}
		r = mcpSh(t, cs, `echo $http_proxy $ALL_PROXY; awk '$4 == "0A" { print $2 }' /proc/net/tcp /proc/net/tcp6`)
		want := 6
		if _, err := os.Stat("/proc/net/if_inet6"); err == nil {
			want = 7
		}
		if f := strings.Fields(r.Stdout); len(f) != want || !slices.Contains(f, "0100007F:0035") {
			t.Errorf("listening in the session's namespace, want only this call's two: %q", r.Stdout)
		}
		zygotes := sessionInits(srv.Process.Pid)
		hangUp.Close()
		if !waitFor(5*time.Second, func() bool { return procState(srv.Process.Pid) == "Z" || procState(srv.Process.Pid) == "" }) {
			t.Fatal("agentbox mcp did not exit when its client hung up")
		}
		for _, z := range zygotes {
			if pid, _ := strconv.Atoi(z); procState(pid) != "" {
				t.Errorf("the session's sandbox %d outlived agentbox mcp", pid)
			}
		}
	})
}

// TestSessionAllowListDegraded: without user namespaces, agentbox mcp
// with an allow-list runs each call as a lone degraded run would: refused
// without --allow-degraded; with it, through a proxy on the host's
// loopback for that call alone, the connect supervisor allowing TCP to
// its two ports only. The full egressProbe holds, and each call reports
// its own decisions.
func TestSessionAllowListDegraded(t *testing.T) {
	needBin(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatalf("unshare(1) is needed to test the fallback: %v", err)
	}
	p := newEgressProbe(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		for _, optIn := range []bool{false, true} {
			p.reset()
			fx := newFixture(t, u)
			args := []string{"-Ur", "sh", "-c", `echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" "$@"`, binPath, "mcp", "-C", fx.ws}
			args = append(args, p.allow...)
			if optIn {
				args = append(args, "--allow-degraded")
			}
			cs, _, _ := mcpServerCmd(t, command(u, runOpts{env: append(fx.env(), "AGENTBOX_TEST_HOSTS="+p.hosts), dir: fx.ws}, "unshare", args...))
			if !optIn {
				r := mcpSh(t, cs, `echo ran > "$WS/ran.txt"`)
				if r.ExitCode != 125 || !strings.Contains(r.Stderr, "--allow-degraded") || !strings.Contains(r.Stderr, "allow-list proxy listens on the host's loopback") {
					t.Errorf("without opt-in: want 125 naming the proxy gap: %v", r)
				}
				assertAbsent(t, filepath.Join(fx.ws, "ran.txt"))
				continue
			}
			if r := mcpSh(t, cs, "true"); r.ExitCode != 0 || len(r.Report.Network.Allowed)+len(r.Report.Network.Denied) != 0 {
				t.Fatalf("first call: %v %+v", r, r.Report)
			}
			r := mcpRun(t, cs, map[string]any{"command": []string{"/bin/bash", "-c", p.script}})
			if r.ExitCode != 0 || !strings.Contains(r.Stderr, "running degraded") {
				t.Fatalf("probe: %v", r)
			}
			p.check(t, r.Stdout, r.Stderr, r.Report)
		}
	})
}

// sessionInits are the pids of the init stages (session zygotes) whose
// parent is pid.
func sessionInits(pid int) []string {
	var out []string
	for _, p := range procsWith("agentbox-init") {
		id, _, _ := strings.Cut(p, ":")
		b, _ := os.ReadFile("/proc/" + id + "/stat")
		if f := strings.Fields(string(b)); len(f) > 3 && f[3] == fmt.Sprint(pid) {
			out = append(out, id)
		}
	}
	return out
}

// hostListeners are the listening TCP sockets of the host's network
// namespace that process pid holds, as inodes.
func hostListeners(t *testing.T, pid int) []string {
	t.Helper()
	held := map[string]bool{}
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, e := range ents {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name())); err == nil {
			if ino, ok := strings.CutPrefix(l, "socket:["); ok {
				held[strings.TrimSuffix(ino, "]")] = true
			}
		}
	}
	var out []string
	for _, f := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			if fs := strings.Fields(line); len(fs) > 9 && fs[3] == "0A" && held[fs[9]] {
				out = append(out, fs[1])
			}
		}
	}
	return out
}

// TestSessionToolCaches: a session's commands get the tool caches a lone
// run gets, copy-on-write: one command's write to the npm cache is seen by
// the next command of the session, and the host's cache never changes.
func TestSessionToolCaches(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		writeFile(t, filepath.Join(fx.home, ".npm", "_cacache", "keep"), "orig\n")
		chownR(t, fx.dir, u)
		before := snapshot(t, fx.home)
		cs, _, hangUp := mcpServer(t, u, fx)
		if r := mcpSh(t, cs, `echo new > "$HOME/.npm/_cacache/new" && echo keep2 > "$HOME/.npm/_cacache/keep"`); r.ExitCode != 0 {
			t.Fatalf("write to the npm cache overlay: %v", r)
		}
		if r := mcpSh(t, cs, `cat "$HOME/.npm/_cacache/new" "$HOME/.npm/_cacache/keep"`); r.Stdout != "new\nkeep2\n" {
			t.Errorf("the next command of the session does not see the cache: %v", r)
		}
		hangUp.Close()
		time.Sleep(500 * time.Millisecond)
		if d := diffSnapshots(before, snapshot(t, fx.home), nil); len(d) > 0 {
			t.Errorf("the host's cache changed:\n%s", strings.Join(d, "\n"))
		}
	})
}

// TestSessionSandboxKilled: when the session's sandbox dies under agentbox
// mcp (killed from outside), the server ends instead of failing every
// later call, so the client sees it gone and can start another.
func TestSessionSandboxKilled(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		cs, srv, _ := mcpServer(t, u, fx)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"command": []string{"true"}}}); err != nil {
			t.Fatalf("first call: %v", err)
		}
		zygote := sessionInits(srv.Process.Pid)
		if len(zygote) != 1 {
			t.Fatalf("the session's init is not agentbox mcp's child: %v", zygote)
		}
		pid, _ := strconv.Atoi(zygote[0])
		syscall.Kill(pid, syscall.SIGKILL)
		exited := func() bool {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", srv.Process.Pid))
			if err != nil {
				return true
			}
			f := strings.Fields(string(b))
			return len(f) > 2 && f[2] == "Z"
		}
		if !waitFor(5*time.Second, exited) {
			t.Fatal("agentbox mcp kept running after its session's sandbox died")
		}
	})
}
