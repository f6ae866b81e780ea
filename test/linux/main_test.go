//go:build linux

// Package linux holds the end-to-end tests of the Linux sandbox. They build
// cmd/agentbox once, run it exactly as a harness would (the CLI contract in
// DESIGN.md), and check every guarantee from the host side afterwards: a
// forbidden write must leave the host unchanged, an allowed one must be
// visible on the host.
//
// Every scenario runs as root and, when the suite itself runs as root, as an
// unprivileged user (agentbox-test) created on first use.
//
// Set AGENTBOX_TEST_KEEP=1 to keep the scratch directory for inspection,
// AGENTBOX_TEST_BIN=/path/to/agentbox to test a prebuilt binary instead of
// building ./cmd/agentbox from the module.
package linux

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/agentdirs"
)

const testUserName = "agentbox-test"

// hostPATH is the PATH every command gets: system directories only, so the
// unprivileged user never meets root's pyenv shims and the like.
const hostPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

var (
	moduleRoot string
	baseDir    string // scratch space outside /tmp, usable by every test user
	suiteTmp   string // $TMPDIR of every run: the suite's own, so leftovers there are ours
	binPath    string // the agentbox binary under test
	buildErr   error
	users      []*testUser
	python     string // absolute path of a system python3, or ""
)

// testUser is one identity the scenarios run as.
type testUser struct {
	name     string
	uid, gid int
	home     string              // fresh, owned by the user, outside every writable root
	cred     *syscall.Credential // nil: the test process's own identity
}

func (u *testUser) root() bool { return u.uid == 0 }

func TestMain(m *testing.M) {
	if os.Getenv(wrapperEnv) != "" {
		wrapperMain() // never returns
	}
	flag.Parse()
	os.Exit(func() int {
		if err := setup(); err != nil {
			fmt.Fprintln(os.Stderr, "test/linux setup:", err)
			return 1
		}
		defer teardown()
		return m.Run()
	}())
}

func setup() error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			moduleRoot = d
			break
		}
		if d == filepath.Dir(d) {
			return fmt.Errorf("no go.mod above %s", wd)
		}
	}
	// /var/tmp is not a writable root of the sandbox (only /tmp and $TMPDIR
	// are), so everything under baseDir except the workspace is "outside".
	parent := "/var/tmp"
	if _, err := os.Stat(parent); err != nil {
		parent = moduleRoot
	}
	baseDir, err = os.MkdirTemp(parent, "agentbox-test-")
	if err != nil {
		return err
	}
	if err := os.Chmod(baseDir, 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(baseDir, "bin"), 0o755); err != nil {
		return err
	}
	// Shared by both test users like /tmp (sticky, world-writable).
	suiteTmp = filepath.Join(baseDir, "tmp")
	if err := os.Mkdir(suiteTmp, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(suiteTmp, os.ModeSticky|0o777); err != nil {
		return err
	}
	binPath = filepath.Join(baseDir, "bin", "agentbox")
	if prebuilt := os.Getenv("AGENTBOX_TEST_BIN"); prebuilt != "" {
		// Test a binary built elsewhere (another commit, say): copy it
		// where every test user can execute it.
		b, err := os.ReadFile(prebuilt)
		if err != nil {
			return err
		}
		if err := os.WriteFile(binPath, b, 0o755); err != nil {
			return err
		}
	} else {
		build := exec.Command("go", "build", "-o", binPath, "./cmd/agentbox")
		build.Dir = moduleRoot
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("CGO_ENABLED=0 go build ./cmd/agentbox: %v\n%s", err, out)
		}
	}
	if err := setupWrapper(); err != nil {
		return err
	}
	if p, err := exec.LookPath("/usr/bin/python3"); err == nil {
		python = p
	}
	return setupUsers()
}

func setupUsers() error {
	me, err := user.Current()
	if err != nil {
		return err
	}
	self, err := newTestUser(me, nil)
	if err != nil {
		return err
	}
	users = append(users, self)
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(testUserName)
	if err != nil {
		cmd := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", testUserName)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("useradd %s: %v\n%s", testUserName, err, out)
		}
		if u, err = user.Lookup(testUserName); err != nil {
			return err
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	unpriv, err := newTestUser(u, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}})
	if err != nil {
		return err
	}
	users = append(users, unpriv)
	return nil
}

func newTestUser(u *user.User, cred *syscall.Credential) (*testUser, error) {
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	home := filepath.Join(baseDir, "home-"+u.Username)
	if err := os.Mkdir(home, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chown(home, uid, gid); err != nil {
		return nil, err
	}
	return &testUser{name: u.Username, uid: uid, gid: gid, home: home, cred: cred}, nil
}

func teardown() {
	if buildErr == nil {
		for _, u := range users {
			cleanupAs(u)
		}
	}
	if os.Getenv("AGENTBOX_TEST_KEEP") != "" {
		fmt.Fprintln(os.Stderr, "test/linux: keeping", baseDir)
		return
	}
	os.RemoveAll(baseDir)
}

// cleanupAs runs `agentbox cleanup` as u before the suite deletes u's
// state directory. A placeholder the suite made in /tmp may be held by
// another agentbox run on the machine (which cannot remove it: it is not
// in its records), so cleanup is retried for a while until that run lets
// go; otherwise it would stay behind with nobody left to remove it.
func cleanupAs(u *testUser) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		cmd := command(u, runOpts{}, binPath, "cleanup")
		out, err := cmd.CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "test/linux: agentbox cleanup as %s: %v\n%s", u.name, err, out)
			return
		}
		if !bytes.Contains(out, []byte("kept placeholder")) {
			return
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "test/linux: agentbox cleanup as %s kept placeholders other runs still hold:\n%s", u.name, out)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// forEachUser runs fn as a subtest per identity.
func forEachUser(t *testing.T, fn func(t *testing.T, u *testUser)) {
	t.Helper()
	if len(users) == 1 {
		t.Logf("not running as root: scenarios run only as %s", users[0].name)
	}
	for _, u := range users {
		t.Run(u.name, func(t *testing.T) { fn(t, u) })
	}
}

func needBin(t testing.TB) {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

func needPython(t testing.TB) {
	t.Helper()
	if python == "" {
		t.Skip("no /usr/bin/python3 on this machine")
	}
}

// ---------------------------------------------------------------------------
// Running agentbox

type runOpts struct {
	stdin   io.Reader
	env     []string // added to the base environment
	dir     string   // cwd of agentbox; "" = the user's home
	timeout time.Duration
}

type result struct {
	stdout, stderr string
	code           int
	dur            time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("exit %d after %v\nstdout: %q\nstderr: %q", r.code, r.dur.Round(time.Millisecond), r.stdout, r.stderr)
}

// baseEnv is the environment of every command: the suite's own TMPDIR (a
// writable root beside /tmp, where other agentbox runs on the machine
// never go), a HOME the user owns.
func baseEnv(u *testUser) []string {
	return []string{
		"TMPDIR=" + suiteTmp,
		"PATH=" + hostPATH,
		"HOME=" + u.home,
		"USER=" + u.name,
		"LOGNAME=" + u.name,
		"LANG=C.UTF-8",
		// One state directory per user for the whole suite, so that
		// `agentbox cleanup` at teardown sweeps what killed runs left.
		"XDG_STATE_HOME=" + filepath.Join(u.home, ".state"),
	}
}

// command builds an exec.Cmd for name running as u.
func command(u *testUser, o runOpts, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(baseEnv(u), o.env...)
	cmd.Dir = o.dir
	if cmd.Dir == "" {
		cmd.Dir = u.home
	}
	cmd.Stdin = o.stdin
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: u.cred}
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// run runs agentbox with args as u and returns its output and exit status.
func run(t testing.TB, u *testUser, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	r := runWith(t, u, runOpts{}, args...)
	return r.stdout, r.stderr, r.code
}

func runWith(t testing.TB, u *testUser, o runOpts, args ...string) result {
	t.Helper()
	needBin(t)
	return execute(t, u, o, binPath, args...)
}

// host runs a command directly on the host as u: the control experiment
// that proves a script really does what the sandboxed run must prevent.
func host(t testing.TB, u *testUser, o runOpts, name string, args ...string) result {
	t.Helper()
	return execute(t, u, o, name, args...)
}

func execute(t testing.TB, u *testUser, o runOpts, name string, args ...string) result {
	t.Helper()
	if o.timeout == 0 {
		o.timeout = 20 * time.Second
	}
	cmd := command(u, o, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(o.timeout):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s %q did not finish within %v\nstdout: %q\nstderr: %q", name, args, o.timeout, stdout.String(), stderr.String())
	}
	r := result{stdout: stdout.String(), stderr: stderr.String(), dur: time.Since(start)}
	r.code = exitCode(cmd, err)
	return r
}

func exitCode(cmd *exec.Cmd, err error) int {
	if cmd.ProcessState == nil {
		return -1
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if err != nil && !errors.As(err, new(*exec.ExitError)) && !errors.Is(err, exec.ErrWaitDelay) {
		return -1
	}
	return cmd.ProcessState.ExitCode()
}

// sandboxed runs `agentbox run -C ws [extra...] -- /bin/sh -c script` with
// the fixture's variables ($WS, $OUT, $ADD) in the environment.
func sandboxed(t testing.TB, fx *fixture, extra []string, script string) result {
	t.Helper()
	args := append([]string{"run", "-C", fx.ws}, extra...)
	args = append(args, "--", "/bin/sh", "-c", script)
	return runWith(t, fx.u, runOpts{env: fx.env(), dir: fx.ws}, args...)
}

// ---------------------------------------------------------------------------
// Fixtures

// fixture is a fresh directory tree owned by the test user:
//
//	dir/ws/            the workspace: .git/ (config, HEAD, hooks/), .codex/,
//	                   file.txt, link -> ../outside, hl (hard link to
//	                   ../outside/hl-target), sub/
//	dir/outside/       not writable in the sandbox: file.txt, hl-target
//	dir/add/           an --add-dir root with its own .git/
//	dir/tmpdir/        for $TMPDIR tests
//	dir/home/          $HOME of the commands (outside every writable root;
//	                   beside dir with homeOutside)
type fixture struct {
	u                               *testUser
	dir, ws, out, add, tmpdir, home string
	gitConfig, codexConfig, txt     string
}

type fixtureOpt func(*fixtureConf)

type fixtureConf struct {
	parent      string
	noCodex     bool
	homeOutside bool
}

// inTmp puts the fixture under the host's /tmp: the sandbox has a private
// /tmp of its own, but the fixture's workspace and --add-dir root stay the
// host's directories.
func inTmp(c *fixtureConf) { c.parent = "/tmp" }

// homeOutside puts the fixture's $HOME beside dir instead of in it, for a
// writable root that holds the workspace's parent (one holding the home
// would be refused: it confines nothing).
func homeOutside(c *fixtureConf) { c.homeOutside = true }

// noCodex leaves .codex (and .agents) missing from the workspace.
func noCodex(c *fixtureConf) { c.noCodex = true }

func newFixture(t testing.TB, u *testUser, opts ...fixtureOpt) *fixture {
	t.Helper()
	c := fixtureConf{parent: baseDir}
	for _, o := range opts {
		o(&c)
	}
	dir, err := os.MkdirTemp(c.parent, "abtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if os.Getenv("AGENTBOX_TEST_KEEP") == "" {
			os.RemoveAll(dir)
		}
	})
	home := filepath.Join(dir, "home")
	if c.homeOutside {
		home = dir + "-home"
		t.Cleanup(func() { os.RemoveAll(home) })
	}
	fx := &fixture{
		u: u, dir: dir,
		ws:          filepath.Join(dir, "ws"),
		out:         filepath.Join(dir, "outside"),
		add:         filepath.Join(dir, "add"),
		tmpdir:      filepath.Join(dir, "tmpdir"),
		home:        home,
		gitConfig:   "[core]\n\trepositoryformatversion = 0\n\tbare = false\n",
		codexConfig: "model = \"orig\"\n",
		txt:         "orig\n",
	}
	mk := func(p string) {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	wr := func(p, s string) {
		mk(filepath.Dir(p))
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, root := range []string{fx.ws, fx.add} {
		wr(filepath.Join(root, ".git", "config"), fx.gitConfig)
		wr(filepath.Join(root, ".git", "HEAD"), "ref: refs/heads/main\n")
		mk(filepath.Join(root, ".git", "hooks"))
		mk(filepath.Join(root, ".git", "objects"))
		mk(filepath.Join(root, ".git", "refs", "heads"))
		wr(filepath.Join(root, "file.txt"), fx.txt)
	}
	if !c.noCodex {
		wr(filepath.Join(fx.ws, ".codex", "config.toml"), fx.codexConfig)
	}
	mk(filepath.Join(fx.ws, "sub"))
	wr(filepath.Join(fx.out, "file.txt"), fx.txt)
	wr(filepath.Join(fx.out, "hl-target"), fx.txt)
	mk(fx.tmpdir)
	mk(fx.home)
	if err := os.Symlink("../outside", filepath.Join(fx.ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(fx.out, "hl-target"), filepath.Join(fx.ws, "hl")); err != nil {
		t.Fatal(err)
	}
	chownR(t, dir, u)
	if c.homeOutside {
		chownR(t, home, u)
	}
	return fx
}

// privateTmp is the host directory that stands in for the sandbox's /tmp
// (and, with dir "tmpdir", for a $TMPDIR outside /tmp) in u's runs of the
// workspace ws: in the state directory baseEnv names.
func privateTmp(u *testUser, ws, dir string) string {
	return privateTmpIn(filepath.Join(u.home, ".state"), ws, dir)
}

// privateTmpIn is privateTmp for runs with XDG_STATE_HOME=stateHome.
func privateTmpIn(stateHome, ws, dir string) string {
	if real, err := filepath.EvalSymlinks(ws); err == nil {
		ws = real
	}
	return filepath.Join(agentdirs.TempRoot(filepath.Join(stateHome, "agentbox")), agentdirs.WorkspaceKey(ws), dir)
}

func (fx *fixture) env() []string {
	return []string{"DIR=" + fx.dir, "WS=" + fx.ws, "OUT=" + fx.out, "ADD=" + fx.add, "HOME=" + fx.home}
}

func chownR(t testing.TB, dir string, u *testUser) {
	t.Helper()
	if u.cred == nil {
		return
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, u.uid, u.gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// ---------------------------------------------------------------------------
// Host-side checks

// snapshot records every path under root with its type, mode and content
// hash (or link target), so any change at all shows up in a diff.
func snapshot(t testing.TB, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			m[p] = "error: " + err.Error()
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			m[p] = "error: " + err.Error()
			return nil
		}
		desc := fi.Mode().String()
		switch {
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			desc += fmt.Sprintf(" %x", sha256.Sum256(b))
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		}
		m[p] = desc
		return nil
	})
	return m
}

// diffSnapshots lists what changed between two snapshots, ignoring paths
// for which allow returns true.
//
// agentbox's own bookkeeping under $HOME/.local/state/agentbox or the
// suite's $HOME/.state/agentbox (written by agentbox on the host, outside
// the sandbox: a run's sweep drops the placeholder records earlier runs
// left) is always ignored.
func diffSnapshots(before, after map[string]string, allow func(string) bool) []string {
	var d []string
	own := func(p string) bool {
		// (baseEnv's XDG_STATE_HOME is $HOME/.state.)
		return strings.Contains(p+"/", "/.local/state/agentbox/") || strings.HasSuffix(p, "/.local/state") || strings.HasSuffix(p, "/.local") ||
			strings.Contains(p+"/", "/.state/agentbox/") || strings.HasSuffix(p, "/.state")
	}
	allow0 := allow
	allow = func(p string) bool { return own(p) || allow0 != nil && allow0(p) }
	for p, b := range before {
		a, ok := after[p]
		switch {
		case allow(p):
		case !ok:
			d = append(d, "removed "+p)
		case a != b:
			d = append(d, fmt.Sprintf("changed %s: %s => %s", p, b, a))
		}
	}
	for p, a := range after {
		if _, ok := before[p]; !ok && !allow(p) {
			d = append(d, fmt.Sprintf("created %s (%s)", p, a))
		}
	}
	slices.Sort(d)
	return d
}

func assertContent(t testing.TB, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("host: %v (want content %q)", err, want)
		return
	}
	if string(b) != want {
		t.Errorf("host: %s = %q, want %q", path, b, want)
	}
}

func assertAbsent(t testing.TB, path string) {
	t.Helper()
	if fi, err := os.Lstat(path); err == nil {
		t.Errorf("host: %s exists (%v), want absent", path, fi.Mode())
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("host: lstat %s: %v", path, err)
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// tmpNames lists the entries of /tmp and of the suite's $TMPDIR, by path.
func tmpNames() map[string]bool {
	m := map[string]bool{}
	for _, d := range []string{"/tmp", suiteTmp} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			m[filepath.Join(d, e.Name())] = true
		}
	}
	return m
}

// goTestTempDir matches the directories testing.T.TempDir makes in /tmp
// (the test's name, then digits) for any test binary on the machine.
var goTestTempDir = regexp.MustCompile(`^(Test|Benchmark|Fuzz|Example)[A-Za-z0-9_]*[0-9]+$`)

// sharedTmpName reports whether a name in /tmp is one that any agentbox run
// on the machine may legitimately hold (a placeholder for a protected name
// of the /tmp root) while this suite runs.
func sharedTmpName(name string) bool {
	switch strings.ToLower(name) {
	case ".git", ".codex", ".agents":
		return true
	}
	return false
}

// assertNoTmpLeftovers fails for entries new since before: any at all in
// the suite's own $TMPDIR, which no one else uses; in /tmp, which other
// processes share, those whose names look like something a sandbox would
// leave (agentbox scratch), except the placeholders of the /tmp root itself,
// which another agentbox run may hold (their removal is tested in the
// suite's $TMPDIR, a writable root like /tmp). Other new names are only
// logged.
func assertNoTmpLeftovers(t testing.TB, before map[string]bool) {
	t.Helper()
	for p := range tmpNames() {
		n := filepath.Base(p)
		if before[p] {
			continue
		}
		if filepath.Dir(p) == suiteTmp {
			t.Errorf("host: %s appeared during the run and is still there", p)
			continue
		}
		if strings.HasPrefix(n, "abtest-") || sharedTmpName(n) || goTestTempDir.MatchString(n) {
			// Another suite on the machine (or another package's
			// test binary) holds these; they say nothing of this run.
			continue
		}
		l := strings.ToLower(n)
		if strings.Contains(l, "agentbox") || strings.Contains(l, "codex") || strings.Contains(l, "agents") ||
			strings.Contains(l, "placeholder") || strings.Contains(l, ".git") || strings.Contains(l, "sandbox") {
			t.Errorf("host: %s appeared during the run and is still there", p)
		} else {
			t.Logf("note: %s appeared during the run (probably unrelated)", p)
		}
	}
}

// procsWith returns the host pids whose command line contains token.
func procsWith(token string) []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue // gone or a zombie
		}
		if bytes.Contains(b, []byte(token)) {
			pids = append(pids, e.Name()+":"+strings.ReplaceAll(string(bytes.TrimRight(b, "\x00")), "\x00", " "))
		}
	}
	return pids
}

// sleepToken returns a unique argument for sleep(1), so the sleeper can be
// found on the host by its command line.
func sleepToken() string {
	return fmt.Sprintf("1000.%09d", rand.IntN(1e9))
}

// waitFor polls cond until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

func randName(prefix string) string {
	return fmt.Sprintf("%s%08x", prefix, rand.Uint32())
}
