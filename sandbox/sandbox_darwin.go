package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/agentbox/agentbox/internal/darwin"
	"github.com/agentbox/agentbox/policy"
)

// Main is a no-op on macOS: sandbox-exec needs no re-exec stage.
func Main() {}

// darwinInput turns the resolved policy into the profile generator's input.
func darwinInput(pol *policy.Policy) darwin.Input {
	in := darwin.Input{WritableRoots: pol.WritableRoots, AllowPTY: true, Network: darwin.NetworkOff}
	if pol.Network {
		in.Network = darwin.NetworkOn
	}
	if pol.Mode == policy.WorkspaceWrite {
		in.ProtectedNames = pol.ProtectedNames
		for _, pr := range pol.Protected {
			in.Protected = append(in.Protected, pr.Path)
		}
	}
	return in
}

func start(c *Cmd) (process, error) {
	pol := c.Policy
	if pol.Mode == policy.DangerFullAccess {
		return startUnsandboxed(c)
	}
	if code, err := lookPathIn(c.Path, c.Env); err != nil {
		return nil, &StartError{code, err}
	}
	argv := append([]string{c.Path}, c.Args[1:]...)
	cmd, err := darwin.Command(context.Background(), darwinInput(pol), argv)
	if err != nil {
		return nil, &StartError{CodeSandboxFailure, err}
	}
	cmd.Env = c.Env
	cmd.Dir = pol.Cwd
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	cmd.WaitDelay = c.WaitDelay
	if err := cmd.Start(); err != nil {
		return nil, &StartError{CodeSandboxFailure, fmt.Errorf("starting sandbox-exec: %w", err)}
	}
	// sandbox-exec runs the command in its own session, so the group
	// kill after Wait reaches what it left behind (no pid namespace here).
	return &groupProcess{cmd}, nil
}

// lookPathIn resolves name with the command's own PATH so "not found" and
// "not executable" get 127 and 126 before sandbox-exec is involved.
func lookPathIn(name string, env []string) (int, error) {
	path := ""
	for _, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			path = kv[5:]
		}
	}
	old := os.Getenv("PATH")
	os.Setenv("PATH", path)
	defer os.Setenv("PATH", old)
	_, err := exec.LookPath(name)
	switch {
	case err == nil, errors.Is(err, exec.ErrDot):
		return 0, nil
	case errors.Is(err, os.ErrPermission):
		return CodeNotExecutable, fmt.Errorf("%s: permission denied", name)
	}
	return CodeNotFound, fmt.Errorf("%s: command not found", name)
}

func doctor(pol *policy.Policy) *Report {
	r := &Report{OS: runtime.GOOS, Backend: "seatbelt (sandbox-exec)"}
	if pol == nil {
		pol = &policy.Policy{Mode: policy.ReadOnly, Cwd: "/"}
	}
	r.Mode = string(pol.Mode)
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
	r.Missing = append(r.Missing, "no pid namespace: a process that starts its own session escapes the kill at the end of a run")
	r.CanSandbox = true
	return r
}

func setup(ctx context.Context, pol *policy.Policy, out io.Writer) error {
	fmt.Fprintln(out, "agentbox: nothing to set up on macOS; run 'agentbox doctor' to check the Seatbelt profile")
	return nil
}

func cleanup(ctx context.Context, out io.Writer) error {
	fmt.Fprintln(out, "agentbox: nothing to clean up on macOS (agentbox leaves nothing behind there)")
	return nil
}
