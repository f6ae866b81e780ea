package sandbox

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"github.com/agentbox/agentbox/internal/darwin"
	"github.com/agentbox/agentbox/policy"
)

func doctor(pol *policy.Policy) *Report {
	r := &Report{OS: runtime.GOOS, Backend: "seatbelt (sandbox-exec)"}
	if pol == nil {
		pol = policy.ReadOnlyAt("/")
	}
	r.Mode = string(pol.Mode())
	if _, err := os.Stat("/usr/bin/sandbox-exec"); err != nil {
		r.Checks = append(r.Checks, Check{Name: "sandbox-exec", Detail: err.Error()})
		r.Missing = append(r.Missing, "/usr/bin/sandbox-exec is missing: no sandbox is possible")
		return r
	}
	if err := darwin.Check(context.Background(), darwinInput(pol)); err != nil {
		r.Checks = append(r.Checks, Check{Name: "profile", Detail: err.Error()})
		r.Missing = append(r.Missing, "the generated Seatbelt profile was rejected: "+err.Error())
		return r
	}
	r.Checks = append(r.Checks, Check{Name: "profile", OK: true, Detail: "generated profile accepted by sandbox-exec"})
	r.Checks = append(r.Checks, cacheChecks(pol, false)...)
	r.Checks = append(r.Checks, tmpChecks(pol, false)...)
	r.Missing = append(r.Missing, "no pid namespace: a process that starts its own session escapes the kill at the end of a run")
	r.CanSandbox = true
	return r
}

func setup(ctx context.Context, pol *policy.Policy, out io.Writer) error {
	fmt.Fprintln(out, "agentbox: nothing to set up on macOS; run 'agentbox doctor' to check the Seatbelt profile")
	return nil
}

func cleanup(ctx context.Context, out io.Writer) error {
	state := stateDir()
	if state == "" {
		fmt.Fprintln(out, "agentbox: nothing to clean up on macOS")
		return nil
	}
	done := false
	if removed := removeStateTree(agentdirs.ToolCacheRoot(state)); removed != "" {
		fmt.Fprintf(out, "removed tool cache layers %s\n", removed)
		done = true
	}
	if removed := removeStateTree(agentdirs.TempRoot(state)); removed != "" {
		fmt.Fprintf(out, "removed private temporary directories %s\n", removed)
		done = true
	}
	if !done {
		fmt.Fprintln(out, "agentbox: nothing to clean up on macOS")
	}
	return nil
}

// removeStateTree deletes root, a tree of agentbox's state directory
// that commands wrote (Go's module cache makes its directories read-only:
// they are made writable first; WalkDir follows no symlink), and returns
// it, or "" when there was nothing or it could not be removed.
func removeStateTree(root string) string {
	if _, err := os.Lstat(root); err != nil {
		return ""
	}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	if os.RemoveAll(root) != nil {
		return ""
	}
	return root
}
