package sandbox

import (
	"context"
	"fmt"

	"github.com/agentbox/agentbox/internal/lookpath"
	"github.com/agentbox/agentbox/internal/toolcache"

	"github.com/agentbox/agentbox/internal/darwin"
	"github.com/agentbox/agentbox/internal/netproxy"
	"github.com/agentbox/agentbox/policy"
)

// Main is a no-op on macOS: sandbox-exec needs no re-exec stage.
//
// Deprecated: nothing needs to call Main.
func Main() {}

// darwinInput turns the resolved policy into the profile generator's input.
func darwinInput(pol *policy.Policy) darwin.Input {
	in := darwin.Input{WritableRoots: pol.WritableRoots(), AllowPTY: true, Network: darwin.NetworkOff}
	if pol.Network() {
		in.Network = darwin.NetworkOn
	}
	if pol.Mode() == policy.WorkspaceWrite {
		in.ProtectedNames = pol.ProtectedNames()
		for _, pr := range pol.Protected() {
			in.Protected = append(in.Protected, pr.Path)
		}
		addGitWrites(&in, pol)
		for _, d := range toolcache.Decide(pol.ToolCacheInputs(), false) {
			if d.How == toolcache.Private {
				in.CacheDirs = []string{toolcache.PrivateRoot(d.Cache)}
			}
		}
		for _, t := range pol.PrivateTemps() {
			in.TempDirs = append(in.TempDirs, t.Dir)
		}
	}
	// Hidden paths, in every sandboxed mode: those found now, and the
	// rules, whose patterns the profile matches whenever a file appears.
	for _, h := range pol.Hidden() {
		in.Hidden = append(in.Hidden, h.Path)
		in.Reopen = append(in.Reopen, h.Reopen...)
	}
	in.Reopen = append(in.Reopen, pol.AllowRead()...)
	for _, r := range pol.HideRules() {
		in.HideRules = append(in.HideRules, darwin.HideRule{Base: r.Base, Pattern: r.Pattern, Keep: r.Keep})
	}
	return in
}

// preflight has nothing to refuse before the backend starts here.
func preflight(*Cmd) error { return nil }

func start(c *Cmd, p *proc) error {
	pol := c.Policy
	if pol.Mode() == policy.DangerFullAccess {
		return startUnsandboxed(c, p)
	}
	// Resolved with the command's own PATH so "not found" and "not
	// executable" get 127 and 126 before sandbox-exec is involved.
	if _, code, err := lookpath.FindIn(c.Path, lookpath.Env(c.Env), c.workDir()); err != nil {
		return &StartError{Code: code, Err: err}
	}
	env, err := privateCaches(pol, c.Env)
	if err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: err}
	}
	if c.Env, err = privateTemps(pol, env); err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: err}
	}
	argv := append([]string{c.Path}, c.Args[1:]...)
	in, env := darwinInput(pol), c.Env
	var proxy *netproxy.Server
	if pol.AllowList() != nil {
		var err error
		if proxy, in, env, err = darwinEgress(pol, in, env); err != nil {
			return &StartError{Code: CodeSandboxFailure, Err: err}
		}
		p.proxied(proxy)
	}
	cmd, err := darwin.Command(context.Background(), in, argv)
	if err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: err}
	}
	cmd.Env = env
	cmd.Dir = c.workDir()
	if c.WaitDelay > 0 {
		// Zero keeps darwin.Command's own bound rather than none.
		cmd.WaitDelay = c.WaitDelay
	}
	// sandbox-exec runs the command in its own session, so the group
	// kill after the wait reaches what it left behind (no pid namespace
	// here).
	if err := startGroup(p, cmd, c.Stdin, c.Stdout, c.Stderr, cmd.WaitDelay); err != nil {
		return &StartError{Code: CodeSandboxFailure, Err: fmt.Errorf("starting sandbox-exec: %w", err)}
	}
	return nil
}
