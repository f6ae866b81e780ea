package setup

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// powershell runs script with Windows PowerShell by absolute path (never
// a PATH lookup from an elevated process) and returns its stdout.
func powershell(ctx context.Context, script string) ([]byte, error) {
	root := os.Getenv("SystemRoot")
	if root == "" {
		root = `C:\Windows`
	}
	exe := filepath.Join(root, `System32\WindowsPowerShell\v1.0\powershell.exe`)
	cmd := exec.CommandContext(ctx, exe, "-NoLogo", "-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-Command",
		"$ErrorActionPreference='Stop'; "+script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("powershell: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// queryRules reads back every agentbox firewall rule.
func queryRules(ctx context.Context) ([]Rule, error) {
	out, err := powershell(ctx, PSQuery)
	if err != nil {
		return nil, fmt.Errorf("reading firewall rules: %w", err)
	}
	out = bytes.TrimSpace(out)
	if len(out) == 0 || string(out) == "null" {
		return nil, nil
	}
	var rules []Rule
	if err := json.Unmarshal(out, &rules); err != nil {
		return nil, fmt.Errorf("reading firewall rules: %w (%q)", err, out)
	}
	return rules, nil
}

// ensureFirewall makes the Offline user's block rules exactly as wanted:
// it reads them back, removes drifted or stale ones, creates missing ones
// and reads back again to verify.
func ensureFirewall(ctx context.Context, offlineSID string, ports []int, out io.Writer) error {
	want := OfflineRules(offlineSID, ports)
	have, err := queryRules(ctx)
	if err != nil {
		return err
	}
	remove, create, why := FirewallPlan(want, have)
	for _, w := range why {
		fmt.Fprintf(out, "firewall: repairing %s\n", w)
	}
	if len(remove) > 0 {
		if _, err := powershell(ctx, PSRemove(remove)); err != nil {
			return fmt.Errorf("removing firewall rules %v: %w", remove, err)
		}
	}
	for _, r := range create {
		if _, err := powershell(ctx, PSCreate(r)); err != nil {
			return fmt.Errorf("creating firewall rule %s: %w", r.Name, err)
		}
	}
	if len(remove)+len(create) == 0 {
		fmt.Fprintf(out, "firewall: %d rule(s) for %s already correct%s\n", len(want), OfflineUser, openNote(ports))
		return nil
	}
	have, err = queryRules(ctx)
	if err != nil {
		return err
	}
	if _, create, why := FirewallPlan(want, have); len(create) > 0 {
		return fmt.Errorf("firewall rules still wrong after repair: %s", strings.Join(why, "; "))
	}
	fmt.Fprintf(out, "firewall: %d rule(s) block all outbound traffic of %s%s\n", len(want), OfflineUser, openNote(ports))
	return nil
}

// removeFirewall deletes every agentbox rule and returns their names.
func removeFirewall(ctx context.Context) ([]string, error) {
	have, err := queryRules(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, r := range have {
		names = append(names, r.Name)
	}
	if len(names) == 0 {
		return nil, nil
	}
	if _, err := powershell(ctx, PSRemove(names)); err != nil {
		return nil, err
	}
	left, err := queryRules(ctx)
	if err != nil {
		return names, err
	}
	if len(left) > 0 {
		return names, fmt.Errorf("%d firewall rule(s) survived removal", len(left))
	}
	return names, nil
}

// CheckFirewall verifies that the Windows Firewall enforces agentbox's
// rules on this machine now: every profile enabled in the active policy,
// local rules not ignored by group policy. Its errors wrap ErrFirewall,
// also when the profiles cannot be read: elevated mode then neither
// claims nor runs an enforced offline command.
//
// The PowerShell check runs only when the firewall's cheap-to-read state
// (fwcache.go) changed since the last check that passed, or that check is
// older than FirewallCacheMaxAge; a stopped firewall service fails at once.
func CheckFirewall(ctx context.Context) error {
	running, vals, err := firewallState()
	if err != nil {
		// Cannot tell whether anything changed: check the slow way.
		return checkFirewallActive(ctx)
	}
	if !running {
		return fmt.Errorf("%w: the Windows Defender Firewall service (mpssvc) is not running (start it: `Start-Service mpssvc` as administrator)", ErrFirewall)
	}
	fp := FirewallFingerprint(running, vals)
	now := time.Now()
	if loadFirewallCache().Fresh(fp, now) {
		return nil
	}
	if err := checkFirewallActive(ctx); err != nil {
		return err
	}
	saveFirewallCache(fp, now)
	return nil
}

// checkFirewallActive reads the active policy store through PowerShell.
func checkFirewallActive(ctx context.Context) error {
	out, err := powershell(ctx, PSProfiles)
	if err != nil {
		return fmt.Errorf("%w: cannot read the firewall profiles: %v", ErrFirewall, err)
	}
	var profiles []FirewallProfile
	if err := json.Unmarshal(bytes.TrimSpace(out), &profiles); err != nil {
		return fmt.Errorf("%w: cannot read the firewall profiles: %v (%q)", ErrFirewall, err, out)
	}
	if why := FirewallProblems(profiles); len(why) > 0 {
		return fmt.Errorf("%w: %s (enable the firewall for every profile, e.g. `Set-NetFirewallProfile -All -Enabled True` as administrator, and let local rules apply)",
			ErrFirewall, strings.Join(why, "; "))
	}
	return nil
}
