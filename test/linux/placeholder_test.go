//go:build linux

package linux

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/linux/apparmor"
)

// exchangeLoop is the attacker of TestPlaceholderSwapRace: inside sandbox
// A, it swaps B's placeholder names (renameat2 RENAME_EXCHANGE) as fast as
// it can, for a bounded time, with symlinks to the victim file and with an
// older directory beside them, and prints how many swaps succeeded.
const exchangeLoop = `
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
ws, victim, ready, dur = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
pairs = []
for i, n in enumerate([".agents", ".git"]):
    l = os.path.join(ws, "l%d" % i)
    os.symlink(victim, l)
    pairs.append((os.path.join(ws, n).encode(), l.encode()))
pairs.append((os.path.join(ws, ".codex").encode(), os.path.join(ws, "old").encode()))
open(ready, "w").close()
end = time.time() + dur
n = 0
while time.time() < end:
    for a, b in pairs:
        if libc.renameat2(-100, a, -100, b, 2) == 0:
            n += 1
print("swaps", n)
`

// TestPlaceholderSwapRace (issue 9, finding 1): a command in sandbox A,
// whose writable root holds sandbox B's workspace, races B's start by
// swapping B's fresh placeholders for symlinks to a file outside A's
// roots. agentbox must never follow them: the victim keeps its mode, and
// nothing outside A's roots changes. Nor may it take an older directory
// swapped in for its own: that one keeps its mode 0700.
func TestPlaceholderSwapRace(t *testing.T) {
	needPython(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		wsB := filepath.Join(fx.add, "wsb") // no .git, .codex, .agents: three placeholders
		victim := filepath.Join(fx.out, "victim")
		ready := filepath.Join(fx.add, "ready")
		if err := os.Mkdir(wsB, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(victim, []byte("victim\n"), 0o640); err != nil {
			t.Fatal(err)
		}
		old := filepath.Join(wsB, "old")
		if err := os.Mkdir(old, 0o700); err != nil {
			t.Fatal(err)
		}
		chownR(t, fx.dir, u)
		before := snapshot(t, fx.out)
		// Known by inode and birth time: once removed by the rmdir race
		// (see below), its inode number may be reused by a placeholder.
		oldID, err := inodeID(old)
		if err != nil {
			t.Fatal(err)
		}

		const dur = 6 * time.Second
		needBin(t)
		attacker := command(u, runOpts{dir: fx.ws, env: fx.env()}, binPath, "run", "-C", fx.ws, "--add-dir", fx.add, "--",
			python, "-c", exchangeLoop, wsB, victim, ready, strconv.Itoa(int(dur/time.Second)))
		var aout, aerr strings.Builder
		attacker.Stdout, attacker.Stderr = &aout, &aerr
		if err := attacker.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- attacker.Wait() }()
		if !waitFor(10*time.Second, func() bool { return exists(ready) }) {
			attacker.Process.Kill()
			<-done
			t.Fatalf("attacker never became ready\nstdout %q\nstderr %q", aout.String(), aerr.String())
		}

		// B starts over and over while A swaps.
		runs, started := 0, 0
		deadline := time.Now().Add(dur - time.Second)
		for time.Now().Before(deadline) {
			r := runWith(t, u, runOpts{dir: fx.home}, "run", "-C", wsB, "--", "/bin/true")
			runs++
			if r.code == 0 {
				started++
			}
			if fi, err := os.Lstat(victim); err != nil || fi.Mode().Perm() != 0o640 {
				break
			}
		}
		select {
		case <-done:
		case <-time.After(dur + 10*time.Second):
			attacker.Process.Kill()
			<-done
		}
		t.Logf("B: %d runs, %d started; attacker: %s %s", runs, started, strings.TrimSpace(aout.String()), strings.TrimSpace(aerr.String()))
		if !strings.Contains(aout.String(), "swaps ") || strings.Contains(aout.String(), "swaps 0\n") {
			t.Errorf("the attacker swapped nothing; the test proves nothing\nstdout %q\nstderr %q", aout.String(), aerr.String())
		}
		fi, err := os.Lstat(victim)
		if err != nil {
			t.Fatalf("host: victim: %v", err)
		}
		if fi.Mode().Perm() != 0o640 {
			t.Errorf("BREACH: victim %s outside every root is now %v (was -rw-r-----)", victim, fi.Mode())
		}
		for _, d := range diffSnapshots(before, snapshot(t, fx.out), nil) {
			t.Errorf("host: %s", d)
		}
		// The older directory, wherever the swaps left it.
		found := false
		ents, _ := os.ReadDir(wsB)
		for _, e := range ents {
			p := filepath.Join(wsB, e.Name())
			if id, err := inodeID(p); err == nil && id == oldID {
				found = true
				if fi, err := os.Lstat(p); err != nil || fi.Mode().Perm() != 0o700 {
					t.Errorf("BREACH: the older directory swapped in (now %s) is %v, was drwx------", e.Name(), fi.Mode())
				}
			}
		}
		if !found {
			// Removing a placeholder is an rmdir by name after checking
			// the inode, and no call removes by descriptor: a swap in
			// between removes the (empty) directory swapped in. The
			// racer could have removed it itself, from its own root.
			t.Logf("the older directory was removed by a swap between agentbox's check and its rmdir")
		}
	})
}

// TestForgedPlaceholderMark: a command marks a user's own empty directory
// the way agentbox once marked its placeholders (the user.agentbox xattr);
// a later run whose workspace holds that directory as a protected name must
// not take it for a placeholder and remove it.
func TestForgedPlaceholderMark(t *testing.T) {
	needPython(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		mine := filepath.Join(fx.ws, "sub", ".agents")
		if err := os.Mkdir(mine, 0o755); err != nil {
			t.Fatal(err)
		}
		chownR(t, fx.dir, u)
		r := sandboxed(t, fx, nil, python+` -c 'import os, sys; os.setxattr(sys.argv[1], "user.agentbox", b"placeholder")' "$WS/sub/.agents" && echo marked`)
		if !strings.Contains(r.stdout, "marked") {
			t.Fatalf("the command could not set the mark; the test proves nothing: %v", r)
		}
		r = runWith(t, u, runOpts{dir: fx.home}, "run", "-C", filepath.Join(fx.ws, "sub"), "--", "/bin/true")
		if r.code != 0 {
			t.Errorf("run in sub: %v", r)
		}
		if fi, err := os.Lstat(mine); err != nil || !fi.IsDir() {
			t.Errorf("host: the user's own %s is gone after a run (forged mark honoured): %v", mine, err)
		}
		r = runWith(t, u, runOpts{}, "cleanup")
		if r.code != 0 {
			t.Errorf("cleanup: %v", r)
		}
		if fi, err := os.Lstat(mine); err != nil || !fi.IsDir() {
			t.Errorf("host: the user's own %s is gone after cleanup: %v", mine, err)
		}
	})
}

// TestPlaceholderModeRace (issue 12, item 4): another user's run has just
// made a placeholder and, under a umask stricter than 022, not yet given
// it its final mode. A run meeting it then waits for the mode instead of
// failing with "permission denied". Simulated deterministically: the
// directory is root's, mode 0700 for 200ms, then 0555.
func TestPlaceholderModeRace(t *testing.T) {
	if len(users) < 2 {
		t.Skip("needs two users: run the suite as root")
	}
	u := users[1]
	fx := newFixture(t, u, noCodex)
	codex := filepath.Join(fx.ws, ".codex")
	if err := os.Mkdir(codex, 0o700); err != nil {
		t.Fatal(err)
	}
	chmodded := make(chan struct{})
	go func() {
		time.Sleep(200 * time.Millisecond)
		os.Chmod(codex, 0o555)
		close(chmodded)
	}()
	r := sandboxed(t, fx, nil, `test -d "$WS/.codex" && echo ok`)
	<-chmodded
	if r.code != 0 || !strings.Contains(r.stdout, "ok") {
		t.Errorf("run meeting another user's fresh placeholder: %v", r)
	}
	if fi, err := os.Lstat(codex); err != nil || fi.Mode().Perm() != 0o555 {
		t.Errorf("host: the other user's %s: %v %v, want it left alone", codex, fi, err)
	}
}

// TestForeignRuns (issue 12, item 4): while another user's agentbox runs
// `true` in a loop on a workspace under /tmp that lacks .codex (so both
// sides make, join and remove the /tmp placeholders), this user's runs all
// succeed, and so do the loop's.
func TestForeignRuns(t *testing.T) {
	needBin(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		other := u
		for _, v := range users {
			if v != u {
				other = v
			}
		}
		loopFx := newFixture(t, other, inTmp, noCodex)
		fx := newFixture(t, u, inTmp, noCodex)
		stop := make(chan struct{})
		type loopResult struct {
			runs int
			bad  []string
		}
		done := make(chan loopResult)
		go func() {
			var lr loopResult
			for {
				select {
				case <-stop:
					done <- lr
					return
				default:
				}
				cmd := command(other, runOpts{dir: loopFx.ws, env: []string{"TMPDIR=/tmp"}}, binPath, "run", "-C", loopFx.ws, "--", "/bin/true")
				out, err := cmd.CombinedOutput()
				lr.runs++
				if err != nil {
					lr.bad = append(lr.bad, fmt.Sprintf("%v: %s", err, out))
				}
			}
		}()
		for round := range 3 {
			var wg sync.WaitGroup
			results := make([]result, 10)
			for i := range results {
				wg.Go(func() {
					results[i] = runWith(t, u, runOpts{dir: fx.ws, env: fx.env(), timeout: 60 * time.Second},
						"run", "-C", fx.ws, "--", "/bin/sh", "-c", `test -d "$WS/.git" && echo ok`)
				})
			}
			wg.Wait()
			for i, r := range results {
				if r.code != 0 || !strings.Contains(r.stdout, "ok") {
					t.Errorf("round %d run %d beside another user's loop: %v", round, i, r)
				}
			}
		}
		close(stop)
		lr := <-done
		t.Logf("%s's loop: %d runs meanwhile, %d failed", other.name, lr.runs, len(lr.bad))
		if lr.runs == 0 {
			t.Errorf("the loop never ran; the test proves nothing")
		}
		for _, b := range lr.bad {
			t.Errorf("%s's loop run failed: %s", other.name, b)
		}
	})
}

// TestSetupWithoutRestriction (issue 12, item 1): where AppArmor does not
// restrict user namespaces, `agentbox setup` says nothing is needed and
// writes nothing; doctor names the AppArmor state.
func TestSetupWithoutRestriction(t *testing.T) {
	if b, _ := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); strings.TrimSpace(string(b)) == "1" {
		t.Skip("this host restricts user namespaces through AppArmor; setup would install a profile")
	}
	forEachUser(t, func(t *testing.T, u *testUser) {
		_, had := os.Lstat("/etc/apparmor.d/agentbox")
		r := runWith(t, u, runOpts{}, "setup")
		if r.code != 0 || !strings.Contains(r.stdout, "nothing to set up") {
			t.Errorf("setup: %v", r)
		}
		if _, err := os.Lstat("/etc/apparmor.d/agentbox"); err == nil && had != nil {
			t.Errorf("setup wrote /etc/apparmor.d/agentbox where nothing needs it")
		}
		r = runWith(t, u, runOpts{}, "doctor")
		if !strings.Contains(r.stdout, "apparmor") || !strings.Contains(r.stdout, "user namespaces") {
			t.Errorf("doctor does not name the AppArmor state: %v", r)
		}
	})
}

// TestSetupProof: the proof `agentbox setup` gives after loading the
// profile, a sandboxed `true` as the user behind sudo, really runs as that
// user, fails when the sandbox cannot start for them, and leaves nothing
// in their home.
func TestSetupProof(t *testing.T) {
	if len(users) < 2 {
		t.Skip("needs root: the proof switches to another user")
	}
	needBin(t)
	u := users[1]
	before := snapshot(t, u.home)
	t.Setenv("SUDO_UID", strconv.Itoa(u.uid))
	t.Setenv("SUDO_GID", strconv.Itoa(u.gid))
	t.Setenv("SUDO_USER", u.name)
	var out strings.Builder
	if err := apparmor.Prove(context.Background(), &out, binPath); err != nil {
		t.Errorf("Prove: %v", err)
	}
	if !strings.Contains(out.String(), "runs as "+u.name) {
		t.Errorf("Prove said %q", out.String())
	}
	for _, d := range diffSnapshots(before, snapshot(t, u.home), nil) {
		t.Errorf("host: %s", d)
	}
	// A binary the user cannot execute: the proof must fail, not pass.
	private := filepath.Join(t.TempDir(), "agentbox")
	b, err := os.ReadFile(binPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(private, b, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := apparmor.Prove(context.Background(), &out, private); err == nil {
		t.Errorf("Prove passed with a binary %s cannot run", u.name)
	}
}

// inodeID names one inode over time: device, number and birth time.
func inodeID(path string) (string, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO|unix.STATX_BTIME, &st); err != nil {
		return "", err
	}
	if st.Mask&unix.STATX_BTIME == 0 {
		return "", fmt.Errorf("%s: no birth time", path)
	}
	return fmt.Sprintf("%d:%d %d:%d.%d", st.Dev_major, st.Dev_minor, st.Ino, st.Btime.Sec, st.Btime.Nsec), nil
}
