package winapi

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/windows"

	"github.com/agentbox/agentbox/internal/windows/acl"
	"github.com/agentbox/agentbox/internal/windows/sid"
	"github.com/agentbox/agentbox/internal/windows/winenv"
)

// The test binary doubles as the child process: with AGENTBOX_WINAPI_HELPER
// set it runs one helper and exits.
func TestMain(m *testing.M) {
	switch os.Getenv("AGENTBOX_WINAPI_HELPER") {
	case "":
		os.Exit(m.Run())
	case "echo":
		// stdin to stdout, one variable to stderr, exit code from args.
		io.Copy(os.Stdout, os.Stdin)
		fmt.Fprint(os.Stderr, os.Getenv("AGENTBOX_PROBE"))
		code, _ := strconv.Atoi(os.Args[len(os.Args)-1])
		os.Exit(code)
	case "parent":
		// Start a grandchild that sleeps, print its pid, then sleep.
		exe, _ := os.Executable()
		p, err := os.StartProcess(exe, []string{exe}, &os.ProcAttr{
			Env:   append(os.Environ(), "AGENTBOX_WINAPI_HELPER=sleep"),
			Files: []*os.File{nil, nil, os.Stderr},
		})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(3)
		}
		fmt.Println(p.Pid)
		time.Sleep(time.Minute)
		os.Exit(0)
	case "pipes":
		// Create pipes under the restricted token's default DACL: an
		// os.Pipe round trip, and a grandchild's output read through one.
		r, w, err := os.Pipe()
		if err != nil {
			fmt.Println("os.Pipe:", err)
			os.Exit(1)
		}
		w.WriteString("through a pipe ")
		w.Close()
		b, _ := io.ReadAll(r)
		exe, _ := os.Executable()
		cmd := exec.Command(exe, "0")
		cmd.Env = append(os.Environ(), "AGENTBOX_WINAPI_HELPER=echo")
		cmd.Stdin = strings.NewReader("and a grandchild")
		out, err := cmd.Output()
		if err != nil {
			fmt.Println("grandchild:", err)
			os.Exit(1)
		}
		fmt.Print(string(b) + string(out))
		os.Exit(0)
	case "consolepids":
		// The pids attached to this process's console, if any.
		for _, pid := range consolePIDs() {
			fmt.Println(pid)
		}
		os.Exit(0)
	case "sleep":
		time.Sleep(time.Minute)
		os.Exit(0)
	case "nestedjob":
		// Already inside a job: make the sandbox job and start a child
		// in it, as agentbox does; print the limits that held.
		job, err := NewJob()
		if err != nil {
			fmt.Println("NewJob:", err)
			os.Exit(3)
		}
		defer job.Close()
		exe, _ := os.Executable()
		block, _ := winenv.Block(append(os.Environ(), "AGENTBOX_WINAPI_HELPER=echo"), os.Getenv("SYSTEMROOT"))
		cl, _ := winenv.Build(exe, []string{exe, "7"}, "")
		nul, _ := os.Open(os.DevNull)
		p, err := Spawn(Spec{App: cl.App, CmdLine: cl.Line, Env: block, Job: job,
			Stdin: windows.Handle(nul.Fd()), Stdout: windows.Handle(nul.Fd()), Stderr: windows.Handle(nul.Fd())})
		if err != nil {
			fmt.Println("Spawn:", err)
			os.Exit(4)
		}
		code, _ := p.Wait()
		fmt.Printf("%d %v %v\n", code, job.Limits.Nested, job.Limits.UI)
		os.Exit(0)
	}
	os.Exit(99)
}

func restricted(t *testing.T) (windows.Token, string) {
	t.Helper()
	self, err := OpenSelfToken()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { self.Close() })
	s, err := sid.New()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := RestrictedToken(self, s)
	if err != nil {
		t.Fatalf("RestrictedToken: %v", err)
	}
	t.Cleanup(func() { tok.Close() })
	return tok, s
}

func TestLogonSID(t *testing.T) {
	self, err := OpenSelfToken()
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	l, err := LogonSID(self)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(l.String(), "S-1-5-5-") {
		t.Errorf("logon SID = %s", l)
	}
}

func TestRestrictedTokenDefaultDACL(t *testing.T) {
	tok, s := restricted(t)
	got, err := DefaultDACL(tok)
	if err != nil {
		t.Fatal(err)
	}
	d, err := acl.ParseDACL(got)
	if err != nil {
		t.Fatal(err)
	}
	// The logon SID and the sandbox SID must be able to use what the
	// child creates (pipes), whatever SDDL alias Windows prints; Everyone
	// must not.
	for _, a := range d.ACEs {
		if a.OK && !a.Parsed.Deny && (strings.EqualFold(a.Parsed.SID, "WD") || a.Parsed.SID == acl.Everyone) {
			t.Errorf("default DACL %s grants Everyone", got)
		}
	}
	self, err := OpenSelfToken()
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	logon, err := LogonSID(self)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{logon.String(), s} {
		found := false
		for _, a := range d.ACEs {
			if a.OK && !a.Parsed.Deny && strings.EqualFold(a.Parsed.SID, want) && a.Parsed.Mask&acl.FileAllAccess == acl.FileAllAccess {
				found = true
			}
		}
		if !found {
			t.Errorf("default DACL %s lacks full access for %s", got, want)
		}
	}
}

type pipe struct{ r, w *os.File }

func newPipe(t *testing.T) pipe {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return pipe{r, w}
}

// spawn starts the test binary as helper mode under tok inside a new job.
func spawn(t *testing.T, tok windows.Token, mode string, stdin, stdout, stderr *os.File, extraEnv []string, args ...string) (*Process, *Job) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	job, err := NewJob()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { job.Close() })
	env := append(os.Environ(), "AGENTBOX_WINAPI_HELPER="+mode)
	env = append(env, extraEnv...)
	block, err := winenv.Block(env, os.Getenv("SYSTEMROOT"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := winenv.Build(exe, append([]string{exe}, args...), "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Spawn(Spec{
		Token: tok, App: cl.App, CmdLine: cl.Line, Env: block, Dir: filepath.Dir(exe),
		Stdin: windows.Handle(stdin.Fd()), Stdout: windows.Handle(stdout.Fd()), Stderr: windows.Handle(stderr.Fd()),
		Job: job, Desktop: privateDesktop(t).Name,
	})
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p, job
}

// TestSpawnRestrictedInJob runs the whole sequence: restricted token,
// suspended create, job assignment, resume, stdio over pipes, environment
// block, exit code.
func TestSpawnRestrictedInJob(t *testing.T) {
	tok, _ := restricted(t)
	in, out, errp := newPipe(t), newPipe(t), newPipe(t)
	p, job := spawn(t, tok, "echo", in.r, out.w, errp.w, []string{"agentbox_probe=from env block"}, "a b", `q"uote`, "7")
	in.w.WriteString("over stdin")
	in.w.Close()
	out.w.Close()
	errp.w.Close()
	if ok, err := job.Contains(p.Handle); err != nil || !ok {
		t.Errorf("IsProcessInJob = %v, %v", ok, err)
	}
	stdout, _ := io.ReadAll(out.r)
	stderr, _ := io.ReadAll(errp.r)
	code, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if code != 7 || string(stdout) != "over stdin" || string(stderr) != "from env block" {
		t.Errorf("code %d stdout %q stderr %q", code, stdout, stderr)
	}
}

// TestJobKillsGrandchild: closing the job (what a timeout or cancel does)
// kills the child and the grandchild it started.
func TestJobKillsGrandchild(t *testing.T) {
	tok, _ := restricted(t)
	out := newPipe(t)
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	p, job := spawn(t, tok, "parent", null, out.w, os.Stderr, nil)
	out.w.Close()
	line, err := bufio.NewReader(out.r).ReadString('\n')
	if err != nil {
		t.Fatalf("reading grandchild pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("grandchild: %q", line)
	}
	gc, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_INFORMATION, false, uint32(pid))
	if err != nil {
		t.Fatalf("OpenProcess(grandchild %d): %v", pid, err)
	}
	defer windows.CloseHandle(gc)
	if ok, err := job.Contains(gc); err != nil || !ok {
		t.Errorf("grandchild in job = %v, %v", ok, err)
	}
	if err := job.Close(); err != nil {
		t.Fatal(err)
	}
	for _, h := range []windows.Handle{p.Handle, gc} {
		ev, err := windows.WaitForSingleObject(h, 10000)
		if err != nil || ev != windows.WAIT_OBJECT_0 {
			t.Errorf("process still alive 10s after job close (%d, %v)", ev, err)
		}
	}
}

func TestFileStoreRoundTrip(t *testing.T) {
	// Not t.TempDir: Go's RemoveAll fails under Wine ("Invalid function").
	dir, err := os.MkdirTemp("", "agentbox-acl")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var st FileStore
	before, err := st.GetDACL(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acl.ParseDACL(before); err != nil {
		t.Fatalf("parse %q: %v", before, err)
	}
	s, _ := sid.New()
	pl := acl.Plan{Entries: []acl.Entry{{Path: dir, ACE: acl.ACE{Flags: acl.ObjectInherit | acl.ContainerInherit, Mask: acl.AllowWrite, SID: s}}}}
	res, err := acl.Apply(st, pl)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if len(res.Modified) != 1 {
		t.Errorf("first Apply modified %v", res.Modified)
	}
	if _, err := st.GetDACL(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("GetDACL(missing) = %v", err)
	}
	after, _ := st.GetDACL(dir)
	if !strings.Contains(after, s) {
		if IsWine() {
			t.Logf("Wine does not store ACLs: DACL after SetNamedSecurityInfo is %s (enforcement unverified under Wine)", after)
			return
		}
		t.Fatalf("ACE not stored: %s", after)
	}
	res, err = acl.Apply(st, pl)
	if err != nil || len(res.Modified) != 0 {
		t.Errorf("second Apply modified %v, %v", res.Modified, err)
	}
}

// The child can create and use pipes (and give them to a grandchild)
// under the default DACL RestrictedToken sets, which no longer grants
// Everyone. Under Wine this checks the call sequence only.
func TestChildCreatesPipes(t *testing.T) {
	tok, _ := restricted(t)
	in, out, errp := newPipe(t), newPipe(t), newPipe(t)
	p, _ := spawn(t, tok, "pipes", in.r, out.w, errp.w, nil)
	in.w.Close()
	out.w.Close()
	errp.w.Close()
	b, _ := io.ReadAll(out.r)
	eb, _ := io.ReadAll(errp.r)
	code, err := p.Wait()
	if err != nil || code != 0 || string(b) != "through a pipe and a grandchild" {
		t.Errorf("code %d, %v: stdout %q stderr %q", code, err, b, eb)
	}
}

// Inside a job whose UI limits are set (as CreateProcessWithLogonW,
// Task Scheduler and CI runners do), a sandbox job with UI limits cannot
// be joined; NewJob must notice and leave them out so the run works.
func TestNestedJob(t *testing.T) {
	outer, err := newJob(JobLimits{UI: true})
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Close()
	exe, _ := os.Executable()
	block, _ := winenv.Block(append(os.Environ(), "AGENTBOX_WINAPI_HELPER=nestedjob"), os.Getenv("SYSTEMROOT"))
	cl, _ := winenv.Build(exe, []string{exe}, "")
	out := newPipe(t)
	nul, _ := os.Open(os.DevNull)
	defer nul.Close()
	p, err := Spawn(Spec{App: cl.App, CmdLine: cl.Line, Env: block, Job: outer,
		Stdin: windows.Handle(nul.Fd()), Stdout: windows.Handle(out.w.Fd()), Stderr: windows.Handle(out.w.Fd())})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	out.w.Close()
	b, _ := io.ReadAll(out.r)
	if code, err := p.Wait(); err != nil || code != 0 {
		t.Fatalf("helper exit %d, %v: %s", code, err, b)
	}
	if got := strings.TrimSpace(string(b)); got != "7 true false" {
		t.Errorf("nested sandbox job: %q, want the child's code 7, nested, no UI limits", got)
	}
}

// The path taken without an interactive window station: a station and
// desktop of agentbox's own, and a restricted child that starts on them
// (it would die with 0xC0000142 on a station it cannot connect to).
func TestOwnStation(t *testing.T) {
	self, err := OpenSelfToken()
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	logon, err := LogonSID(self)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := getProcessWindowStation()
	if err != nil {
		t.Fatal(err)
	}
	before, _ := objectName(ws)
	d, err := newOwnStation(ws, []string{logon.String()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !d.OwnStation() || !strings.HasPrefix(d.Name, "agentbox-") || !strings.Contains(d.Name, `\agentbox-`) {
		t.Errorf("own station desktop %q", d.Name)
	}
	if after, _ := objectName(ws); after != before {
		t.Errorf("process window station changed from %q to %q", before, after)
	}
	tok, _ := restricted(t)
	exe, _ := os.Executable()
	block, _ := winenv.Block(append(os.Environ(), "AGENTBOX_WINAPI_HELPER=echo"), os.Getenv("SYSTEMROOT"))
	cl, _ := winenv.Build(exe, []string{exe, "5"}, "")
	job, err := NewJob()
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	nul, _ := os.Open(os.DevNull)
	defer nul.Close()
	p, err := Spawn(Spec{Token: tok, App: cl.App, CmdLine: cl.Line, Env: block, Job: job, Desktop: d.Name,
		Stdin: windows.Handle(nul.Fd()), Stdout: windows.Handle(nul.Fd()), Stderr: windows.Handle(nul.Fd())})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if code, err := p.Wait(); err != nil || code != 5 {
		t.Errorf("child on the own station: exit %#x, %v; want 5", code, err)
	}
}
