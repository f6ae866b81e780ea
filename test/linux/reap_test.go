//go:build linux

package linux

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Degraded mode has no pid namespace whose end kills the tree: these tests
// attack the sweep that replaces it, as a plain uid and as root, and check
// on the host that no process carrying the test's marker is left.

// promptly bounds how long agentbox may take to return once the run is
// over (the attacks below would otherwise keep it for 3 s or for ever).
const promptly = 8 * time.Second

// chainLasts is how long the fork chain runs by itself: a sweep that
// does not stop it keeps agentbox at least that long.
const chainLasts = 3 * time.Second

func assertNoSurvivors(t *testing.T, marker string) {
	t.Helper()
	if left := procsWith(marker); len(left) > 0 {
		t.Errorf("host: %d processes outlived the degraded run, e.g. %v", len(left), left[:min(len(left), 5)])
		killPids(left)
		// A fork chain keeps making new ones; make sure the next
		// test starts clean.
		waitFor(10*time.Second, func() bool { killPids(procsWith(marker)); return len(procsWith(marker)) == 0 })
	}
}

// leaveSleepers starts sleepers that escape the command's process group
// and session, then waits in the foreground.
func leaveSleepers(tok string) string {
	return `(setsid sleep ` + tok + ` &)
nohup sleep ` + tok + ` >/dev/null 2>&1 &
echo ready > "$WS/ready"
sleep ` + tok
}

// TestDegradedTimeoutKillsTree: --timeout ends the whole tree, not only
// the command, and agentbox returns at once with 137.
func TestDegradedTimeoutKillsTree(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		tok := sleepToken()
		r := degraded(t, fx, []string{"--allow-degraded", "--timeout", "1s"}, leaveSleepers(tok))
		if r.code != 137 {
			t.Errorf("exit %d, want 137: %v", r.code, r)
		}
		assertContent(t, filepath.Join(fx.ws, "ready"), "ready\n")
		if r.dur > promptly {
			t.Errorf("agentbox took %v to end a 1s timeout", r.dur)
		}
		assertNoSurvivors(t, tok)
	})
}

// TestDegradedKilledAgentboxKillsTree: SIGKILL to agentbox itself (no
// chance to clean up) still ends the tree.
func TestDegradedKilledAgentboxKillsTree(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		needBin(t)
		fx := newFixture(t, u)
		tok := sleepToken()
		o := runOpts{env: append(fx.env(), wrapperEnv+"=nouserns"), dir: fx.ws}
		cmd := command(u, o, wrapperPath, binPath, "run", "--allow-degraded", "-C", fx.ws, "--", "/bin/sh", "-c", leaveSleepers(tok))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		if !waitFor(10*time.Second, func() bool { return exists(filepath.Join(fx.ws, "ready")) && len(procsWith(tok)) >= 3 }) {
			cmd.Process.Kill()
			<-done
			assertNoSurvivors(t, tok)
			t.Fatalf("the sleepers did not start: %v; stderr %q", procsWith(tok), stderr.String())
		}
		cmd.Process.Signal(syscall.SIGKILL) // the wrapper exec'd agentbox: same pid
		<-done
		if !waitFor(promptly, func() bool { return len(procsWith(tok)) == 0 }) {
			t.Errorf("processes still alive %v after agentbox was killed", promptly)
		}
		assertNoSurvivors(t, tok)
	})
}

// TestDegradedInitKilled: the command runs as the caller's uid, so it may
// kill the init above it; the tree must die all the same, and the reaper
// above the init is out of the command's reach.
func TestDegradedInitKilled(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		tok := sleepToken()
		script := `(setsid sleep ` + tok + ` &)
nohup sleep ` + tok + ` >/dev/null 2>&1 &
reaper=$(awk '{print $4}' /proc/$PPID/stat)
kill -STOP "$reaper" 2>/dev/null && echo reaper-stopped
kill -9 "$reaper" 2>/dev/null && echo reaper-killed
kill -9 $PPID
sleep ` + tok
		r := degraded(t, fx, []string{"--allow-degraded"}, script)
		if r.code == 0 || r.code == 125 {
			t.Errorf("exit %d, want the init's death: %v", r.code, r)
		}
		if strings.Contains(r.stdout, "reaper-") {
			t.Errorf("the command could signal the reaper: %v", r)
		}
		if r.dur > promptly {
			t.Errorf("agentbox took %v", r.dur)
		}
		assertNoSurvivors(t, tok)
	})
}

// forkChain is the attack of issue 9: four runners, each forking a child
// and exiting in a loop for 3 s (so the process to kill is never the same
// for long, and every exit orphans the next link), the last link of each
// then sleeping. The marker is in every link's command line.
const forkChain = `
import os, sys, time
end = time.time() + 3
for i in range(4):
    if os.fork() == 0:
        while time.time() < end:
            if os.fork() != 0:
                os._exit(0)
        time.sleep(1000)
        os._exit(0)
if sys.argv[2] == "wait":
    time.sleep(1000)
`

// TestDegradedForkChain: the chain neither outruns the sweep nor keeps
// agentbox, whether the command exits while it runs or a timeout ends it.
func TestDegradedForkChain(t *testing.T) {
	needPython(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		for _, c := range []struct {
			name, mode string
			extra      []string
		}{
			{"command-exits", "exit", nil},
			{"timeout", "wait", []string{"--timeout", "1s"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				fx := newFixture(t, u)
				marker := "forkchain-" + sleepToken()
				if err := os.WriteFile(filepath.Join(fx.ws, "chain.py"), []byte(forkChain), 0o644); err != nil {
					t.Fatal(err)
				}
				chownR(t, fx.ws, u)
				script := python + ` "$WS/chain.py" ` + marker + ` ` + c.mode + `; echo started`
				r := degradedOpts(t, fx, runOpts{timeout: 60 * time.Second}, append([]string{"--allow-degraded"}, c.extra...), script)
				if r.code == 125 || (c.mode == "exit" && !strings.Contains(r.stdout, "started")) {
					t.Errorf("run failed: %v", r)
				}
				if r.dur > chainLasts*5/6 {
					t.Errorf("agentbox took %v to return: the sweep did not stop the chain", r.dur)
				}
				assertNoSurvivors(t, marker)
			})
		}
	})
}

// delegatedCgroup makes a cgroup v2 directory delegated to u the way
// systemd does it for Delegate=yes (the directory and its cgroup.procs,
// cgroup.threads and cgroup.subtree_control chowned to the user; for root,
// the trusted.delegate mark) and returns it and a descriptor to start a
// process inside it.
func delegatedCgroup(t *testing.T, u *testUser) (string, int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creating a delegated cgroup needs root")
	}
	mnt := ""
	for _, m := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var st unix.Statfs_t
		if unix.Statfs(m, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			mnt = m
			break
		}
	}
	if mnt == "" {
		t.Skip("no cgroup v2 hierarchy mounted")
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	own := ""
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			own = p
		}
	}
	dir := filepath.Join(mnt, own, randName("abtest-cg-"))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot create a cgroup here: %v", err)
	}
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		waitFor(5*time.Second, func() bool { return unix.Rmdir(dir) == nil })
	})
	for _, f := range []string{"", "cgroup.procs", "cgroup.threads", "cgroup.subtree_control"} {
		if err := os.Chown(filepath.Join(dir, f), u.uid, u.gid); err != nil {
			t.Fatal(err)
		}
	}
	if u.root() {
		if err := unix.Setxattr(dir, "trusted.delegate", []byte("1"), 0); err != nil {
			t.Fatalf("marking %s delegated: %v", dir, err)
		}
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return dir, fd
}

// TestDegradedCgroupKill: where the caller's cgroup is delegated, the run
// gets a child cgroup, cgroup.kill ends the tree (timeout and fork chain),
// and the child cgroup is gone afterwards.
func TestDegradedCgroupKill(t *testing.T) {
	needPython(t)
	needBin(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		for _, c := range []struct {
			name   string
			extra  []string
			script func(marker string) string
		}{
			{"timeout", []string{"--timeout", "1s"}, func(m string) string {
				// Moving itself back to the delegated cgroup must fail:
				// Landlock keeps cgroupfs out of the writable roots. The
				// reaper makes the same move as the same user (else it
				// could not remove the run's cgroup, which is checked).
				return "cat /proc/self/cgroup\n" + `echo $$ > "$CGPARENT/cgroup.procs" 2>/dev/null && echo cgroup-escaped` + "\n" + leaveSleepers(m)
			}},
			{"fork-chain", nil, func(m string) string {
				return "cat /proc/self/cgroup\n" + python + ` "$WS/chain.py" ` + m + " exit"
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				cgDir, cgFD := delegatedCgroup(t, u)
				fx := newFixture(t, u)
				if err := os.WriteFile(filepath.Join(fx.ws, "chain.py"), []byte(forkChain), 0o644); err != nil {
					t.Fatal(err)
				}
				chownR(t, fx.ws, u)
				marker := sleepToken()
				args := append([]string{binPath, "run", "--allow-degraded", "-C", fx.ws}, c.extra...)
				args = append(args, "--", "/bin/sh", "-c", c.script(marker))
				r := runInCgroup(t, fx, cgFD, args, "CGPARENT="+cgDir)
				stdout, dur := r.stdout, r.dur
				rel := strings.TrimPrefix(cgDir, "/sys/fs/cgroup/unified")
				rel = strings.TrimPrefix(rel, "/sys/fs/cgroup")
				if strings.Contains(stdout, "cgroup-escaped") {
					t.Errorf("the command moved itself out of the run's cgroup: %v", r)
				}
				if !strings.Contains(stdout, rel+"/agentbox-") {
					t.Errorf("the command did not run in a cgroup of the run under %s: %v", rel, r)
				}
				if dur > promptly {
					t.Errorf("agentbox took %v", dur)
				}
				assertNoSurvivors(t, marker)
				assertNoChildCgroups(t, cgDir)
			})
		}
	})
}

// startInCgroup starts the wrapper with args as fx's user, born in the
// cgroup behind cgFD.
func startInCgroup(t *testing.T, fx *fixture, cgFD int, args []string, env ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	env = append(append(env, fx.env()...), wrapperEnv+"=nouserns")
	cmd := command(fx.u, runOpts{env: env, dir: fx.ws}, wrapperPath, args...)
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = cgFD
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &stdout, &stderr
}

func runInCgroup(t *testing.T, fx *fixture, cgFD int, args []string, env ...string) result {
	t.Helper()
	start := time.Now()
	cmd, stdout, stderr := startInCgroup(t, fx, cgFD, args, env...)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Errorf("agentbox did not return: stderr %q", stderr.String())
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: exitCode(cmd, err), dur: time.Since(start)}
}

func assertNoChildCgroups(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() {
			t.Errorf("host: cgroup %s/%s left behind", dir, e.Name())
		}
	}
}

// TestDegradedCgroupStaleSwept: a reaper killed outright leaves its tree
// behind (documented); with a delegated cgroup, the next run kills what
// is left in the dead reaper's cgroup and removes it.
func TestDegradedCgroupStaleSwept(t *testing.T) {
	needBin(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		cgDir, cgFD := delegatedCgroup(t, u)
		fx := newFixture(t, u)
		tok := sleepToken()
		cmd, _, stderr := startInCgroup(t, fx, cgFD, []string{binPath, "run", "--allow-degraded", "-C", fx.ws, "--", "/bin/sh", "-c", leaveSleepers(tok)})
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		waited := false
		defer func() {
			if !waited {
				cmd.Process.Kill()
				<-done
			}
		}()
		if !waitFor(10*time.Second, func() bool { return exists(filepath.Join(fx.ws, "ready")) && len(procsWith(tok)) >= 3 }) {
			t.Fatalf("the sleepers did not start: %v; stderr %q", procsWith(tok), stderr.String())
		}
		var reaper int
		for _, task := range mustReadDir(t, fmt.Sprintf("/proc/%d/task", cmd.Process.Pid)) {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", cmd.Process.Pid, task))
			if f := strings.Fields(string(b)); len(f) > 0 {
				reaper, _ = strconv.Atoi(f[0])
			}
		}
		if reaper == 0 {
			t.Fatal("no reaper under agentbox")
		}
		syscall.Kill(reaper, syscall.SIGKILL)
		cmd.Process.Kill()
		<-done
		waited = true
		// The precondition: the sleepers outlived their reaper.
		if !waitFor(5*time.Second, func() bool { return len(procsWith(tok)) > 0 }) {
			t.Fatal("nothing outlived the killed reaper: the test shows nothing")
		}
		r := runInCgroup(t, fx, cgFD, []string{binPath, "run", "--allow-degraded", "-C", fx.ws, "--", "true"})
		if r.code != 0 {
			t.Fatalf("next run: %v", r)
		}
		assertNoSurvivors(t, tok)
		assertNoChildCgroups(t, cgDir)
	})
}

func mustReadDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestDegradedSignalForwarded: SIGTERM to agentbox still reaches the
// command through the reaper and the init.
func TestDegradedSignalForwarded(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		needBin(t)
		fx := newFixture(t, u)
		o := runOpts{env: append(fx.env(), wrapperEnv+"=nouserns"), dir: fx.ws}
		script := `trap 'echo got-term; exit 3' TERM; echo ready > "$WS/ready"; sleep 30 & wait`
		cmd := command(u, o, wrapperPath, binPath, "run", "--allow-degraded", "-C", fx.ws, "--", "/bin/sh", "-c", script)
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		if !waitFor(10*time.Second, func() bool { return exists(filepath.Join(fx.ws, "ready")) }) {
			cmd.Process.Kill()
			<-done
			t.Fatal("the command did not start")
		}
		cmd.Process.Signal(syscall.SIGTERM)
		var err error
		select {
		case err = <-done:
		case <-time.After(promptly):
			cmd.Process.Kill()
			<-done
			t.Fatal("agentbox did not end after SIGTERM")
		}
		if code := exitCode(cmd, err); code != 3 || !strings.Contains(stdout.String(), "got-term") {
			t.Errorf("exit %d, stdout %q: want the command's trap to run and exit 3", code, stdout.String())
		}
	})
}

// TestDegradedReaperLimits: without a pid namespace the command can see
// agentbox and its reaper, which run as its uid. Lowering their resource
// limits (prlimit needs nothing more) must fail: with no descriptors left
// the reaper could not sweep, what the command started would outlive the
// run, and agentbox would wait for it forever.
func TestDegradedReaperLimits(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		tok := sleepToken()
		t.Cleanup(func() { killPids(procsWith(tok)) })
		script := `init=$(awk '{print $4}' /proc/$$/stat)
reaper=$(awk '{print $4}' /proc/$init/stat)
ab=$(awk '{print $4}' /proc/$reaper/stat)
grep -q reaper /proc/$reaper/cmdline || echo "not the reaper: $reaper"
prlimit --pid $reaper --nofile=3:3 && echo limited-reaper
prlimit --pid $ab --nofile=3:3 --as=1:1 && echo limited-agentbox
(ulimit -n 64 && echo ulimit-ok)
(setsid sleep ` + tok + ` &)
echo done`
		r := degradedOpts(t, fx, runOpts{timeout: 15 * time.Second}, []string{"--allow-degraded"}, script)
		time.Sleep(100 * time.Millisecond)
		if left := procsWith(tok); len(left) > 0 {
			t.Errorf("host: processes outlived the degraded run: %v", left)
		}
		if strings.Contains(r.stdout, "limited-") || strings.Contains(r.stdout, "not the reaper") {
			t.Errorf("the command changed another process's limits: %v", r)
		}
		if r.code != 0 || !strings.Contains(r.stdout, "done") || !strings.Contains(r.stdout, "ulimit-ok") {
			t.Errorf("degraded run failed: %v", r)
		}
	})
}
