package unelevated

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/windows"

	"github.com/agentbox/agentbox/internal/windows/acl"
	"github.com/agentbox/agentbox/internal/windows/sid"
	"github.com/agentbox/agentbox/internal/windows/winapi"
	"github.com/agentbox/agentbox/internal/windows/winenv"
	"github.com/agentbox/agentbox/policy"
)

// Prepare loads or creates the SIDs, makes pol's ACEs and integrity
// labels true on disk (reading each DACL and label first, writing only
// what is missing) and writes the denybin stubs. It needs no administrator
// rights.
func Prepare(pol *policy.Policy, stateDir string) (*Sandbox, error) {
	user, err := currentUserSID()
	if err != nil {
		return nil, err
	}
	// A drive root or a directory holding the profile, whose Low label
	// would open it to every Low-integrity program of the user, is
	// refused by policy.Resolve (a writable root that confines nothing).
	g, err := resolveGitWrites(pol)
	if err != nil {
		return nil, err
	}
	gp := g.Policy(pol)
	extra := acl.IntegrityPlan(gp, user)
	extra.Merge(g.UserPlan(user))
	// Hidden paths: a NO_READ_UP Medium label each, which the Low
	// command cannot read through (acl.HiddenPlan).
	hidden := func(st *sid.State) acl.Plan { return acl.HiddenPlan(pol, isDir, st.Hidden) }
	sb, err := prepare(pol, gp, g, stateDir, extra, hidden)
	if err != nil {
		return nil, err
	}
	if !pol.Network() {
		if err := WriteDenybin(DenybinDir(stateDir)); err != nil {
			return nil, err
		}
	}
	return sb, nil
}

// PrepareACL is Prepare without the denybin stubs and the integrity
// labels, and with the writable roots granted (and the protected paths
// denied) to each SID in also as well as to the roots' own SIDs. Elevated
// mode passes the sandbox users' group: its commands run as another
// account, so a write must pass the token's normal check (the group) and
// its restricted check (the root's SID). Every changed path is recorded in
// the state for cleanup.
//
// With allow_git_writes both modes share the plan (acl.GitPlan): the
// read-only git paths are denied to each SID in also just as to the
// roots' SIDs, which elevated mode's sandbox user meets in its normal
// access check.
func PrepareACL(pol *policy.Policy, stateDir string, also ...string) (*Sandbox, error) {
	g, err := resolveGitWrites(pol)
	if err != nil {
		return nil, err
	}
	gp := g.Policy(pol)
	var extra acl.Plan
	for _, s := range also {
		extra.Merge(acl.PlanFor(gp, s))
		extra.Merge(g.SIDPlan(gp, func(string) string { return s }))
	}
	// Hidden paths: a deny for each SID in also, which the sandbox
	// user meets in its normal access check (acl.HiddenACLPlan).
	hidden := func(st *sid.State) acl.Plan {
		var pl acl.Plan
		for _, s := range also {
			pl.Merge(acl.HiddenACLPlan(pol, s, isDir, st.Hidden))
		}
		return pl
	}
	return prepare(pol, gp, g, stateDir, extra, hidden)
}

// isDir reports whether path is an existing directory.
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// resolveGitWrites is acl.ResolveGitWrites on this host's file system.
func resolveGitWrites(pol *policy.Policy) (acl.GitPlan, error) {
	return acl.ResolveGitWrites(pol, func(p string) (acl.PathInfo, error) {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return acl.PathInfo{}, nil
		}
		if err != nil {
			return acl.PathInfo{}, err
		}
		link, err := winapi.FileStore{}.IsLink(p)
		if err != nil {
			return acl.PathInfo{}, err
		}
		return acl.PathInfo{Exists: true, Dir: fi.IsDir(), Link: link || fi.Mode()&(fs.ModeSymlink|fs.ModeIrregular) != 0}, nil
	})
}

// prepare applies the plan for gp (pol, with allow_git_writes resolved
// by g) plus extra, plus hidden's plan for the hidden paths (in every
// sandboxed mode; it is given the state, for the paths earlier runs
// changed).
func prepare(pol, gp *policy.Policy, g acl.GitPlan, stateDir string, extra acl.Plan, hidden func(*sid.State) acl.Plan) (*Sandbox, error) {
	st, _, err := sid.LoadOrCreate(stateDir)
	if err != nil {
		return nil, fmt.Errorf("sandbox SIDs: %w", err)
	}
	sb := &Sandbox{StateDir: stateDir, State: st}
	hp := hidden(st)
	if winapi.IsWine() {
		// Wine neither reads nor writes mandatory labels (see below).
		hp.Labels, hp.Unhide, hp.HiddenNow = nil, nil, nil
	}
	if pol.Mode() != policy.WorkspaceWrite {
		if len(hp.Labels)+len(hp.Entries)+len(hp.Unhide) == 0 {
			return sb, nil
		}
		res, err := applyRecorded(stateDir, st, hp)
		sb.ACL = res
		if err != nil {
			return nil, fmt.Errorf("hiding paths: %w", err)
		}
		return sb, nil
	}
	extra.Merge(hp)
	newSID := false
	for _, r := range pol.WritableRoots() {
		_, added, err := st.RootSID(r)
		if err != nil {
			return nil, fmt.Errorf("sandbox SID for %s: %w", r, err)
		}
		newSID = newSID || added
	}
	if newSID {
		// Saved before any ACE names the SID, so cleanup always finds it.
		if err := sid.Save(stateDir, st); err != nil {
			return nil, err
		}
	}
	if winapi.IsWine() {
		// Wine only: it refuses to read or write mandatory labels
		// (GetNamedSecurityInfo(LABEL) is access denied) and enforces
		// none, like the tokens and ACLs; the enforcement tests skip.
		extra.Labels, extra.Unlabel, extra.Unhide = nil, nil, nil
	}
	sidOf := func(r string) string { s, _ := st.LookupRoot(r); return s }
	pl := acl.PlanForRoots(gp, sidOf)
	pl.Merge(g.SIDPlan(gp, sidOf))
	// Apply reads and writes each path's DACL once, whatever the number
	// of entries; the placeholders are the same paths.
	pl.Merge(extra)
	res, err := applyRecorded(stateDir, st, pl)
	sb.ACL = res
	if err != nil {
		return nil, fmt.Errorf("applying ACLs: %w", err)
	}
	return sb, nil
}

// applyRecorded applies pl and records what it did in st (see record);
// Apply's error comes first, then the state's.
func applyRecorded(stateDir string, st *sid.State, pl acl.Plan) (acl.Result, error) {
	res, err := acl.Apply(winapi.FileStore{}, pl)
	if rerr := record(stateDir, st, res, pl, err == nil); err == nil {
		err = rerr
	}
	return res, err
}

// record saves what res changed in the state, even after a failed
// Apply, so that cleanup finds it; and, after one that succeeded (ok),
// what pl hides now and what it gave back.
func record(stateDir string, st *sid.State, res acl.Result, pl acl.Plan, ok bool) error {
	a := st.AddPaths(res.Modified...)
	if ok {
		a = st.SetHidden(pl.HiddenNow, pl.Unhide) || a
	} else {
		// Unknown how far it got: keep tracking all of it.
		a = st.SetHidden(append(pl.HiddenNow, pl.Unhide...), nil) || a
	}
	b := st.AddPlaceholders(res.Created...)
	c := st.AddLabels(res.Labeled...)
	for _, f := range res.Files {
		c = st.AddPlaceholderFiles(sid.PlaceholderFile{Path: f.Path, Content: f.Content}) || c
	}
	if a || b || c {
		return sid.Save(stateDir, st)
	}
	return nil
}

func currentUserSID() (string, error) {
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return "", os.NewSyscallError("GetTokenInformation(TokenUser)", err)
	}
	return u.User.Sid.String(), nil
}

// Spec is a command to start.
type Spec struct {
	// Path is the program; a bare name is looked up in the child's PATH
	// with its PATHEXT (so the denybin stubs win over ssh.exe).
	Path string
	Args []string
	Env  []string // as given by the caller, before the network rewrite
	// ProxyEnv points the proxy variables at agentbox's allow-list
	// proxy when the policy has an allow-list (see ChildEnv).
	ProxyEnv []string
	Dir      string
	// Stdio handles in this process; Start passes duplicates. Outside
	// danger-full-access none may be a console (winapi.IsConsole): the
	// caller relays a console through pipes.
	Stdin, Stdout, Stderr windows.Handle
}

// ErrNotFound wraps a program that is not on the child's PATH. It is an
// fs.ErrNotExist, so that exitcode.Classify makes it 127 as it makes a
// path that names nothing.
var ErrNotFound error = notOnPath{}

type notOnPath struct{}

func (notOnPath) Error() string        { return "executable file not found in PATH" }
func (notOnPath) Is(target error) bool { return target == fs.ErrNotExist }

// Proc is a running sandboxed command and its job.
type Proc struct {
	p      *winapi.Process
	job    *winapi.Job
	desk   *winapi.Desktop // nil without a sandbox
	killed atomic.Bool
}

// Start runs s under pol: the restricted token (none for
// danger-full-access), the child environment, a new kill-on-close job.
func (sb *Sandbox) Start(pol *policy.Policy, s Spec) (*Proc, error) {
	env := s.Env
	if pol.Mode() != policy.DangerFullAccess {
		env = ChildEnv(pol, env, DenybinDir(sb.StateDir), s.ProxyEnv...)
	}
	path, err := Resolve(s.Path, env)
	if err != nil {
		return nil, err
	}
	comspec, _ := winenv.Get(env, "COMSPEC")
	cl, err := winenv.Build(path, s.Args, comspec)
	if err != nil {
		return nil, err
	}
	block, err := winenv.Block(env, os.Getenv("SYSTEMROOT"))
	if err != nil {
		return nil, err
	}
	if pol.Mode() == policy.DangerFullAccess {
		// No sandbox: the caller's own token, console and desktop, but
		// still a kill-on-close job so the tree dies with the command.
		job, err := winapi.NewJob()
		if err != nil {
			return nil, err
		}
		p, err := winapi.Spawn(winapi.Spec{
			App: cl.App, CmdLine: cl.Line, Env: block, Dir: s.Dir,
			Stdin: s.Stdin, Stdout: s.Stdout, Stderr: s.Stderr, Job: job,
		})
		if err != nil {
			job.Close()
			return nil, err
		}
		return &Proc{p: p, job: job}, nil
	}
	sids, err := sb.RunSIDs(pol)
	if err != nil {
		return nil, err
	}
	// Low integrity: the mandatory check confines deletes and renames to
	// the Low-labelled writable roots, which the restricted pass alone
	// does not (acl.IntegrityPlan).
	c, err := winapi.SpawnConfined(winapi.Confined{
		SIDs: sids, Integrity: acl.LowIL,
		App: cl.App, CmdLine: cl.Line, Env: block, Dir: s.Dir,
		Stdin: s.Stdin, Stdout: s.Stdout, Stderr: s.Stderr,
	})
	if err != nil {
		return nil, err
	}
	return &Proc{p: c.Process, job: c.Job, desk: c.Desktop}, nil
}

// Resolve finds the program path names: a bare name is looked up in env's
// PATH with its PATHEXT, a path gets PATHEXT's extensions tried when it
// names no file. Errors wrap ErrNotFound or fs.ErrNotExist.
func Resolve(path string, env []string) (string, error) {
	if !strings.ContainsAny(path, `\/:`) {
		pathVar, _ := winenv.Get(env, "PATH")
		pathext, _ := winenv.Get(env, "PATHEXT")
		found, ok := winenv.LookPath(path, pathVar, pathext, isFile)
		if !ok {
			return "", fmt.Errorf("%s: %w", path, ErrNotFound)
		}
		return found, nil
	}
	if isFile(path) {
		return path, nil
	}
	if p, ok := winenv.LookPath(path, "", "", isFile); ok {
		return p, nil
	}
	return "", &fs.PathError{Op: "start", Path: path, Err: fs.ErrNotExist}
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// KilledCode is the exit code agentbox gives processes it kills.
const KilledCode = 137

// Wait waits for the command to exit, then ends whatever it left running
// in the job: the tree never outlives the command. killed reports that
// Kill ended it.
func (p *Proc) Wait() (code uint32, killed bool, err error) {
	code, err = p.p.Wait()
	p.job.Terminate(KilledCode)
	p.job.Close()
	p.desk.Close()
	p.p.Close()
	return code, p.killed.Load(), err
}

// Kill ends the whole tree.
func (p *Proc) Kill() error {
	p.killed.Store(true)
	return p.job.Terminate(KilledCode)
}

// JobLimits says which limits the command's job holds.
func (p *Proc) JobLimits() winapi.JobLimits { return p.job.Limits }

// Pid is the command's process id.
func (p *Proc) Pid() uint32 { return p.p.Pid }

// Cleanup revokes every ACE agentbox recorded, removes still-empty
// placeholders, the denybin directory and the state file.
func Cleanup(stateDir string, out io.Writer) error {
	st, err := sid.Load(stateDir)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintln(out, "agentbox: no unelevated sandbox state to clean up")
		return nil
	}
	if err != nil {
		return err
	}
	user, err := currentUserSID()
	if err != nil {
		return err
	}
	changed, rerr := acl.Revoke(winapi.FileStore{}, st.Paths, st.SIDs()...)
	// The user-SID guards (acl.IntegrityPlan), and none of the user's
	// own ACEs.
	guards, gerr := acl.RevokeUserGuards(winapi.FileStore{}, st.Paths, user)
	for _, p := range guards {
		if !slices.Contains(changed, p) {
			changed = append(changed, p)
		}
	}
	rerr = errors.Join(rerr, gerr)
	for _, p := range changed {
		fmt.Fprintf(out, "agentbox: removed sandbox ACEs from %s\n", p)
	}
	relabeled, lerr := acl.RevokeLabels(winapi.FileStore{}, st.Labels)
	for _, p := range relabeled {
		fmt.Fprintf(out, "agentbox: removed sandbox integrity label from %s\n", p)
	}
	rerr = errors.Join(rerr, lerr)
	for _, p := range st.Placeholders {
		if os.Remove(p) == nil {
			fmt.Fprintf(out, "agentbox: removed placeholder %s\n", p)
		}
	}
	// allow_git_writes' placeholder files: only while untouched, so a
	// config.worktree the user has since written stays.
	for _, f := range st.PlaceholderFiles {
		b, err := os.ReadFile(f.Path)
		switch {
		case err != nil:
		case string(b) != f.Content:
			fmt.Fprintf(out, "agentbox: kept %s: it changed since agentbox created it as a placeholder\n", f.Path)
		case os.Remove(f.Path) == nil:
			fmt.Fprintf(out, "agentbox: removed placeholder %s\n", f.Path)
		}
	}
	if rerr != nil {
		return fmt.Errorf("cleanup (state kept for a retry): %w", rerr)
	}
	os.RemoveAll(DenybinDir(stateDir))
	// After the revocation: the cache root's ACE and label are among the
	// recorded paths, and a failed revocation keeps it for the retry.
	removed, err := RemoveCaches(stateDir)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	if removed != "" {
		fmt.Fprintf(out, "agentbox: removed tool cache layers %s\n", removed)
	}
	if removed, err = RemoveTemps(stateDir); err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	if removed != "" {
		fmt.Fprintf(out, "agentbox: removed private temporary directories %s\n", removed)
	}
	if err := os.Remove(stateDir + `\` + sid.FileName); err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	fmt.Fprintf(out, "agentbox: removed %s\n", stateDir+`\`+sid.FileName)
	return nil
}
