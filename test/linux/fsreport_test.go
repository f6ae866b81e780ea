//go:build linux

package linux

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The run report's filesystem section and the lines a failed command
// ends with: every refused write names its operation, the path as the
// command used it (made absolute) and the rule; what was allowed is not
// listed. Through the three run paths, as root and as a plain user.

// fsProbe writes where the sandbox refuses and where it allows, then
// exits 7 (or 0 with ok).
func fsProbe(ok bool) string {
	code := 7
	if ok {
		code = 0
	}
	return fmt.Sprintf(`echo x > "$OUT/new.txt"
echo y > "$OUT/file.txt"
echo z > link/via-link.txt
touch .git/index.lock
echo h >> .git/HEAD
mkdir .codex/sub
rm -f "$OUT/hl-target"
echo ok > allowed.txt; mkdir allowed-dir; mv allowed.txt allowed-dir/; chmod 600 allowed-dir/allowed.txt; rm -r allowed-dir
echo n > /dev/null
exit %d
`, code)
}

type fsWant struct{ op, path, reason string }

// fsExpect are the refusals of fsProbe in fx.
func fsExpect(t *testing.T, fx *fixture) (want []fsWant, ws, out string) {
	t.Helper()
	ws, err := filepath.EvalSymlinks(fx.ws)
	if err != nil {
		t.Fatal(err)
	}
	out, err = filepath.EvalSymlinks(fx.out)
	if err != nil {
		t.Fatal(err)
	}
	const outside = "outside the writable roots"
	return []fsWant{
		{"create", out + "/new.txt", outside},
		{"write", out + "/file.txt", outside},
		// Named as the command named it; judged where the link leads.
		{"create", ws + "/link/via-link.txt", outside},
		{"create", ws + "/.git/index.lock", ".git without allow_git_writes"},
		{"write", ws + "/.git/HEAD", ".git without allow_git_writes"},
		{"create", ws + "/.codex/sub", "protected path .codex"},
		{"delete", out + "/hl-target", outside},
	}, ws, out
}

// checkFsReport checks the report's filesystem section and stderr's
// lines for fsProbe(code == 0) run in fx, and the host.
func checkFsReport(t *testing.T, fx *fixture, rep runReport, stderr string, code int) {
	t.Helper()
	want, ws, out := fsExpect(t, fx)
	if rep.Filesystem == nil {
		t.Fatalf("report without a filesystem section; stderr %q", stderr)
	}
	if rep.Filesystem.Unavailable != "" {
		t.Fatalf("filesystem section unavailable: %s", rep.Filesystem.Unavailable)
	}
	got := map[fsWant]int{}
	for _, d := range rep.Filesystem.Denied {
		got[fsWant{d.Op, d.Path, d.Reason}] = d.Count
		if strings.Contains(d.Path, "allowed") || d.Path == "/dev/null" {
			t.Errorf("an allowed operation is listed: %+v", d)
		}
	}
	for _, w := range want {
		if got[w] < 1 {
			t.Errorf("report: %+v missing from %+v", w, rep.Filesystem.Denied)
		}
	}
	// The directories a request would add: the one refused outside, and
	// nothing for .git or a protected name.
	if rep.Suggest == nil || !slices.Contains(rep.Suggest.AddDirs, out) {
		t.Errorf("suggest: want add_dirs with %s: %+v", out, rep.Suggest)
	} else {
		for _, d := range rep.Suggest.AddDirs {
			if strings.Contains(d, ".git") || strings.Contains(d, ".codex") {
				t.Errorf("suggest: %s would open a protected path", d)
			}
		}
	}
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "agentbox: filesystem: ") {
			lines = append(lines, l)
		}
	}
	if code == 0 {
		if len(lines) != 0 {
			t.Errorf("a command that succeeded got refusal lines: %q", lines)
		}
	} else {
		first := "agentbox: filesystem: refused create " + out + "/new.txt (outside the writable roots; --add-dir " + out + " to allow)"
		if len(lines) != 5 || lines[0] != first || !strings.HasPrefix(lines[4], "agentbox: filesystem: refused 3 more") {
			t.Errorf("stderr's refusal lines: want 5, the first %q, the last counting 3 more; got %q", first, lines)
		}
		git := "agentbox: filesystem: refused create " + ws + "/.git/index.lock (.git is read-only; --allow-git-writes to allow)"
		if !strings.Contains(stderr, git+"\n") {
			t.Errorf("stderr lacks %q: %q", git, stderr)
		}
	}
	// The walls held: the report only reports.
	assertAbsent(t, filepath.Join(fx.out, "new.txt"))
	assertAbsent(t, filepath.Join(fx.out, "via-link.txt"))
	assertAbsent(t, filepath.Join(fx.ws, ".git", "index.lock"))
	assertAbsent(t, filepath.Join(fx.ws, ".codex", "sub"))
	assertContent(t, filepath.Join(fx.out, "file.txt"), fx.txt)
	assertContent(t, filepath.Join(fx.out, "hl-target"), fx.txt)
	assertContent(t, filepath.Join(fx.ws, ".git", "HEAD"), "ref: refs/heads/main\n")
	assertAbsent(t, filepath.Join(fx.ws, "allowed-dir"))
}

func TestFsReportLone(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		for _, ok := range []bool{false, true} {
			fx := newFixture(t, u)
			report := filepath.Join(fx.dir, "report.json")
			o := runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0"), dir: fx.ws}
			r := runWith(t, u, o, "run", "-C", fx.ws, "--report", report, "--", "/bin/sh", "-c", fsProbe(ok))
			if want := map[bool]int{false: 7, true: 0}[ok]; r.code != want {
				t.Fatalf("want exit %d: %v", want, r)
			}
			checkFsReport(t, fx, readReport(t, report), r.stderr, r.code)
		}
	})
}

func TestFsReportResident(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		re := newResidentEnv(t, fx)
		re.warm(t)
		report := filepath.Join(fx.dir, "report.json")
		served, r := re.served(t, runOpts{}, []string{"--report", report}, fsProbe(false))
		if !served || r.code != 7 {
			t.Fatalf("served %v: %v", served, r)
		}
		checkFsReport(t, fx, readReport(t, report), r.stderr, r.code)
		// The lean client (no --report): the lines, from the helper.
		served, r = re.served(t, runOpts{}, nil, fsProbe(false))
		if !served || r.code != 7 {
			t.Fatalf("lean: served %v: %v", served, r)
		}
		if n := strings.Count(r.stderr, "agentbox: filesystem: refused "); n != 5 {
			t.Errorf("lean client: %d refusal lines, want 5: %q", n, r.stderr)
		}
	})
}

func TestFsReportSession(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		cs, _, _ := mcpServer(t, u, fx)
		r := mcpSh(t, cs, fsProbe(false))
		if r.ExitCode != 7 {
			t.Fatalf("want exit 7: %v", r)
		}
		checkFsReport(t, fx, r.Report, r.Stderr, r.ExitCode)
		// The next command's report holds its own refusals only.
		r = mcpSh(t, cs, `echo q > "$OUT/other.txt"; true`)
		if r.Report.Filesystem == nil || len(r.Report.Filesystem.Denied) != 1 || r.Report.Filesystem.Denied[0].Op != "create" ||
			!strings.HasSuffix(r.Report.Filesystem.Denied[0].Path, "/outside/other.txt") {
			t.Errorf("second command's filesystem section: %+v", r.Report.Filesystem)
		}
	})
}

// TestFsReportRacesAndNames: a path swapped while the call is observed,
// control bytes in a name, a directory descriptor other than the cwd.
func TestFsReportNames(t *testing.T) {
	needPython(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		report := filepath.Join(fx.dir, "report.json")
		o := runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0"), dir: fx.ws, timeout: 30 * time.Second}
		script := `/usr/bin/python3 -c '
import os, sys
d = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
try:
    os.open("by-dirfd.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=d)
except OSError as e:
    print("dirfd", e.errno)
try:
    open(sys.argv[1] + "/nl\nagentbox: forged", "w")
except OSError as e:
    print("nl", e.errno)
' "$OUT"; exit 1`
		r := runWith(t, u, o, "run", "-C", fx.ws, "--report", report, "--", "/bin/sh", "-c", script)
		if r.code != 1 || !strings.Contains(r.stdout, "dirfd 30") || !strings.Contains(r.stdout, "nl 30") {
			t.Fatalf("want both refused with EROFS (30): %v", r)
		}
		_, _, out := fsExpect(t, fx)
		rep := readReport(t, report)
		paths := map[string]bool{}
		for _, d := range rep.Filesystem.Denied {
			paths[d.Path] = true
		}
		if !paths[out+"/by-dirfd.txt"] || !paths[out+`/nl\x0aagentbox: forged`] {
			t.Errorf("report paths %v", paths)
		}
		if strings.Contains(r.stderr, "\nagentbox: forged") {
			t.Errorf("a file name forged a line of stderr: %q", r.stderr)
		}
	})
}

// TestFsReportDegraded: without user namespaces (Landlock and seccomp
// only, metadata mediated by the supervisor) the refusals are reported
// too: a write outside the roots (Landlock's EACCES) and a chmod there
// (the supervisor's EPERM).
func TestFsReportDegraded(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		report := filepath.Join(fx.dir, "report.json")
		r := degraded(t, fx, []string{"--allow-degraded", "--report", report},
			`echo x > "$OUT/new.txt"; chmod 600 "$OUT/file.txt"; echo ok > ok.txt; exit 3`)
		if r.code != 3 {
			t.Fatalf("want exit 3: %v", r)
		}
		_, _, out := fsExpect(t, fx)
		rep := readReport(t, report)
		if rep.Filesystem == nil || rep.Filesystem.Unavailable != "" {
			t.Fatalf("filesystem section: %+v", rep.Filesystem)
		}
		got := map[fsWant]bool{}
		for _, d := range rep.Filesystem.Denied {
			got[fsWant{d.Op, d.Path, d.Reason}] = true
			if strings.HasSuffix(d.Path, "/ok.txt") {
				t.Errorf("an allowed write is listed: %+v", d)
			}
		}
		for _, w := range []fsWant{
			{"create", out + "/new.txt", "outside the writable roots"},
			{"metadata", out + "/file.txt", "outside the writable roots"},
		} {
			if !got[w] {
				t.Errorf("%+v missing from %+v", w, rep.Filesystem.Denied)
			}
		}
		assertAbsent(t, filepath.Join(fx.out, "new.txt"))
	})
}

// TestFsReportNotDumpable: a command that makes itself non-dumpable is
// out of the observer's reach; its writes neither hang nor change what
// the walls allow (the report may lack them).
func TestFsReportNotDumpable(t *testing.T) {
	needPython(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		o := runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0"), dir: fx.ws, timeout: 30 * time.Second}
		script := `/usr/bin/python3 -c '
import ctypes, os, sys
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
open("mine.txt", "w").write("ok")
try:
    open(sys.argv[1] + "/new.txt", "w")
    print("outside written")
except OSError as e:
    print("outside", e.errno)
' "$OUT"`
		r := runWith(t, u, o, "run", "-C", fx.ws, "--", "/bin/sh", "-c", script)
		if r.code != 0 || !strings.Contains(r.stdout, "outside 30") {
			t.Fatalf("want the allowed write done and the other refused (EROFS): %v", r)
		}
		assertContent(t, filepath.Join(fx.ws, "mine.txt"), "ok")
		assertAbsent(t, filepath.Join(fx.out, "new.txt"))
	})
}

// TestFsReportSwitchedOff: with the observer off the section says so
// instead of claiming nothing was refused.
func TestFsReportSwitchedOff(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		report := filepath.Join(fx.dir, "report.json")
		o := runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0", "AGENTBOX_FSREPORT=0"), dir: fx.ws}
		r := runWith(t, u, o, "run", "-C", fx.ws, "--report", report, "--", "/bin/sh", "-c", `echo x > "$OUT/new.txt"; exit 1`)
		if r.code != 1 {
			t.Fatalf("want exit 1: %v", r)
		}
		rep := readReport(t, report)
		if rep.Filesystem == nil || rep.Filesystem.Unavailable == "" || len(rep.Filesystem.Denied) != 0 {
			t.Errorf("filesystem section with the observer off: %+v", rep.Filesystem)
		}
		if strings.Contains(r.stderr, "agentbox: filesystem:") {
			t.Errorf("refusal lines with the observer off: %q", r.stderr)
		}
	})
}

// TestFsReportConcurrentCalls: MCP calls running at the same time each
// report their own refusals only.
func TestFsReportConcurrentCalls(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		cs, _, _ := mcpServer(t, u, fx)
		const n = 4
		results := make([]mcpResult, n)
		done := make(chan int, n)
		for i := range n {
			go func() {
				// Each waits for all to have started, so they overlap.
				script := fmt.Sprintf(`touch "$WS/started-%d"; i=0; while [ "$(ls "$WS" | grep -c started-)" -lt %d ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
echo x > "$OUT/call-%d.txt"; exit 1`, i, n, i)
				results[i] = mcpSh(t, cs, script)
				done <- i
			}()
		}
		for range n {
			<-done
		}
		for i, r := range results {
			fs := r.Report.Filesystem
			if fs == nil || len(fs.Denied) != 1 || !strings.HasSuffix(fs.Denied[0].Path, fmt.Sprintf("/outside/call-%d.txt", i)) {
				t.Errorf("call %d: filesystem section %+v", i, fs)
			}
		}
	})
}

// TestFsReportGitWrites: with --allow-git-writes, git's own writes are not
// listed, and what stays read-only in .git is named by its path.
func TestFsReportGitWrites(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		report := filepath.Join(fx.dir, "report.json")
		o := runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0"), dir: fx.ws}
		r := runWith(t, u, o, "run", "-C", fx.ws, "--allow-git-writes", "--report", report, "--", "/bin/sh", "-c",
			`touch .git/index.lock && rm .git/index.lock && echo lock-ok; echo x > .git/hooks/pre-commit; echo y >> .git/config; exit 1`)
		if r.code != 1 || !strings.Contains(r.stdout, "lock-ok") {
			t.Fatalf("want the lock made and exit 1: %v", r)
		}
		_, real, _ := fsExpect(t, fx)
		want := map[fsWant]bool{
			{"create", real + "/.git/hooks/pre-commit", "protected path .git/hooks"}: true,
			{"write", real + "/.git/config", "protected path .git/config"}:           true,
		}
		rep := readReport(t, report)
		for _, d := range rep.Filesystem.Denied {
			w := fsWant{d.Op, d.Path, d.Reason}
			if !want[w] {
				t.Errorf("unexpected entry %+v", d)
			}
			delete(want, w)
		}
		for w := range want {
			t.Errorf("missing %+v from %+v", w, rep.Filesystem.Denied)
		}
		if strings.Contains(r.stderr, "--allow-git-writes to allow") {
			t.Errorf("the git hint with git writes allowed: %q", r.stderr)
		}
	})
}

// TestFsReportToolCaches: writes into a tool cache (an overlay of the
// host's Go cache) succeed and are not listed.
func TestFsReportToolCaches(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		cache := filepath.Join(fx.home, ".cache", "go-build")
		if err := os.MkdirAll(cache, 0o755); err != nil {
			t.Fatal(err)
		}
		chownR(t, fx.home, u)
		report := filepath.Join(fx.dir, "report.json")
		o := runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0"), dir: fx.ws}
		r := runWith(t, u, o, "run", "-C", fx.ws, "--report", report, "--", "/bin/sh", "-c",
			`echo x > "$HOME/.cache/go-build/probe" && echo cached; echo y > "$OUT/new.txt"; exit 1`)
		if r.code != 1 || !strings.Contains(r.stdout, "cached") {
			t.Fatalf("want the cache written and exit 1: %v", r)
		}
		assertAbsent(t, filepath.Join(cache, "probe")) // an overlay: the host's cache is unchanged
		rep := readReport(t, report)
		if len(rep.Filesystem.Denied) != 1 || !strings.HasSuffix(rep.Filesystem.Denied[0].Path, "/outside/new.txt") {
			t.Errorf("want only the write outside listed: %+v", rep.Filesystem.Denied)
		}
	})
}

// hiddenProbe opens hidden paths (a file twice, two directories), looks
// at one without opening it, reads public files, and fails.
const hiddenProbe = `cat "$HOME/.netrc"; cat "$HOME/.netrc"; ls "$HOME/.aws"; ls "$HOME/.ssh" >/dev/null
stat "$HOME/.config/gh/hosts.yml" >/dev/null; cat "$HOME/.ssh/id_ed25519.pub" "$WS/file.txt" >/dev/null; exit 3`

// checkHiddenReads checks the report and stderr of hiddenProbe.
func checkHiddenReads(t *testing.T, fx *fixture, rep runReport, stdout, stderr string) {
	t.Helper()
	home, err := filepath.EvalSymlinks(fx.home)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stdout, secretMark) {
		t.Fatalf("a hidden file was read: %q", stdout)
	}
	if rep.Filesystem == nil {
		t.Fatalf("report without a filesystem section; stderr %q", stderr)
	}
	got := map[string]int{}
	for _, d := range rep.Filesystem.Denied {
		if d.Op != "read" || d.Reason != "hidden" {
			t.Errorf("unexpected entry: %+v", d)
			continue
		}
		got[d.Path] = d.Count
	}
	want := map[string]int{home + "/.netrc": 2, home + "/.aws": 1, home + "/.ssh": 1}
	for p, n := range want {
		if got[p] < n {
			t.Errorf("read of %s: count %d, want at least %d, in %+v", p, got[p], n, rep.Filesystem.Denied)
		}
	}
	if len(got) != len(want) {
		t.Errorf("reads listed: %v, want exactly those of %v (a stat or a public file is no read of a secret)", got, want)
	}
	line := "agentbox: filesystem: refused read " + home + "/.netrc (hidden, 2 times; --allow-read " + home + "/.netrc to allow)"
	if !strings.Contains(stderr, line+"\n") {
		t.Errorf("stderr lacks %q: %q", line, stderr)
	}
	// Re-opening a secret is the human's call: nothing suggests it.
	if rep.Suggest != nil && slices.ContainsFunc(rep.Suggest.AddDirs, func(d string) bool { return strings.HasPrefix(d, home) }) {
		t.Errorf("suggest names the home: %+v", rep.Suggest)
	}
}

// TestFsReportHiddenReads: opens of hidden paths are listed as reads,
// through the three run paths; what the command may read is not.
func TestFsReportHiddenReads(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		t.Run("lone", func(t *testing.T) {
			fx := newFixture(t, u)
			plantSecrets(t, fx)
			report := filepath.Join(fx.dir, "report.json")
			o := runOpts{env: append(fx.env(), "AGENTBOX_RESIDENT=0"), dir: fx.ws}
			r := runWith(t, u, o, "run", "-C", fx.ws, "--report", report, "--", "/bin/sh", "-c", hiddenProbe)
			if r.code != 3 {
				t.Fatalf("want exit 3: %v", r)
			}
			// Not watched in a lone run (its cost), and the report says
			// so rather than listing nothing.
			rep := readReport(t, report)
			if rep.Filesystem == nil || rep.Filesystem.ReadsUnavailable == "" {
				t.Fatalf("lone run: the report does not say reads of hidden paths went unobserved: %+v", rep.Filesystem)
			}
			for _, d := range rep.Filesystem.Denied {
				if d.Op == "read" {
					t.Errorf("lone run listed a read: %+v", d)
				}
			}
		})
		t.Run("resident", func(t *testing.T) {
			fx := newFixture(t, u)
			plantSecrets(t, fx)
			re := newResidentEnv(t, fx)
			re.warm(t)
			report := filepath.Join(fx.dir, "report.json")
			served, r := re.served(t, runOpts{}, []string{"--report", report}, hiddenProbe)
			if !served || r.code != 3 {
				t.Fatalf("served %v: %v", served, r)
			}
			checkHiddenReads(t, fx, readReport(t, report), r.stdout, r.stderr)
		})
		t.Run("session", func(t *testing.T) {
			fx := newFixture(t, u)
			plantSecrets(t, fx)
			cs, _, _ := mcpServer(t, u, fx)
			r := mcpSh(t, cs, hiddenProbe)
			if r.ExitCode != 3 {
				t.Fatalf("want exit 3: %v", r)
			}
			checkHiddenReads(t, fx, r.Report, r.Stdout, r.Stderr)
			// The next command's report holds its own reads only.
			r = mcpSh(t, cs, `cat "$WS/file.txt" >/dev/null; ls "$HOME/.aws" >/dev/null`)
			if r.Report.Filesystem == nil || len(r.Report.Filesystem.Denied) != 1 || r.Report.Filesystem.Denied[0].Count != 1 ||
				!strings.HasSuffix(r.Report.Filesystem.Denied[0].Path, "/.aws") {
				t.Errorf("second command's filesystem section: %+v", r.Report.Filesystem)
			}
		})
	})
}

// TestFsReportHiddenLate: a session's masks made for a later command (a
// secret file and directory that appeared after the session began, and
// the file rewritten by a rename on the host, which takes its mask away)
// are watched too, and still hide.
func TestFsReportHiddenLate(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		cs, _, _ := mcpServer(t, u, fx)
		if r := mcpSh(t, cs, "true"); r.ExitCode != 0 {
			t.Fatal(r)
		}
		home, err := filepath.EvalSymlinks(fx.home)
		if err != nil {
			t.Fatal(err)
		}
		netrc := filepath.Join(home, ".netrc")
		if err := os.WriteFile(netrc, []byte(secretMark+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, ".kube", "config"), []byte(secretMark+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		chownR(t, fx.home, u)
		for i := 0; i < 3; i++ {
			if i == 2 {
				if err := os.WriteFile(netrc+".new", []byte(secretMark+" renamed\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				chownR(t, fx.home, u)
				if err := os.Rename(netrc+".new", netrc); err != nil {
					t.Fatal(err)
				}
			}
			r := mcpSh(t, cs, `cat "$HOME/.netrc" "$HOME/.kube/config" 2>/dev/null; ls "$HOME/.kube"; exit 3`)
			if r.ExitCode != 3 || strings.Contains(r.Stdout, secretMark) {
				t.Fatalf("command %d: %v", i, r)
			}
			got := map[string]int{}
			if r.Report.Filesystem != nil {
				for _, d := range r.Report.Filesystem.Denied {
					if d.Op == "read" && d.Reason == "hidden" {
						got[d.Path] = d.Count
					}
				}
			}
			if got[netrc] != 1 || got[home+"/.kube"] != 1 {
				t.Errorf("command %d: reads %v, want %s and %s/.kube once each (%+v)", i, got, netrc, home, r.Report.Filesystem)
			}
		}
		// One mask each, not one per command.
		if r := mcpSh(t, cs, "grep -c ' "+netrc+" ' /proc/self/mountinfo"); strings.TrimSpace(r.Stdout) != "1" {
			t.Errorf("masks on ~/.netrc: %v", r)
		}
	})
}
