package setup

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"

	"github.com/agentbox/agentbox/internal/agentdirs"
)

// firewallState reads, cheaply, what decides whether the firewall enforces
// agentbox's rules: whether the firewall service runs, and the registry
// values of firewallRegistryKeys and agentbox's rules. Keys that do not
// exist (no group policy, no MDM) contribute nothing.
func firewallState() (running bool, vals []RegValue, err error) {
	running, err = firewallServiceRunning()
	if err != nil {
		return false, nil, err
	}
	for _, k := range firewallRegistryKeys {
		v, err := readKey(k, nil)
		if err != nil {
			return false, nil, err
		}
		vals = append(vals, v...)
	}
	rules, err := readKey(firewallRulesKey, isAgentboxRule)
	if err != nil {
		return false, nil, err
	}
	return running, append(vals, rules...), nil
}

func readKey(path string, keep func(string) bool) ([]RegValue, error) {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, path, registry.QUERY_VALUE)
	if errors.Is(err, registry.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf(`reading HKLM\%s: %w`, path, err)
	}
	defer k.Close()
	names, err := k.ReadValueNames(0)
	if err != nil {
		return nil, fmt.Errorf(`reading HKLM\%s: %w`, path, err)
	}
	var out []RegValue
	for _, n := range names {
		buf := make([]byte, 256)
		size, typ, err := k.GetValue(n, buf)
		if errors.Is(err, windows.ERROR_MORE_DATA) {
			buf = make([]byte, size)
			size, typ, err = k.GetValue(n, buf)
		}
		if err != nil {
			return nil, fmt.Errorf(`reading HKLM\%s\%s: %w`, path, n, err)
		}
		data := fmt.Sprintf("%d:%x", typ, buf[:size])
		if keep != nil && !keep(string(decodeUTF16(buf[:size]))) {
			continue
		}
		out = append(out, RegValue{Key: path, Name: n, Data: data})
	}
	return out, nil
}

func decodeUTF16(b []byte) string {
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
	}
	return windows.UTF16ToString(u)
}

// firewallServiceRunning asks the service control manager about mpssvc
// with the least rights it takes (a standard user may).
func firewallServiceRunning() (bool, error) {
	scm, err := windows.OpenSCManager(nil, nil, windows.SC_MANAGER_CONNECT)
	if err != nil {
		return false, os.NewSyscallError("OpenSCManager", err)
	}
	defer windows.CloseServiceHandle(scm)
	name, _ := windows.UTF16PtrFromString("mpssvc")
	svc, err := windows.OpenService(scm, name, windows.SERVICE_QUERY_STATUS)
	if err != nil {
		return false, os.NewSyscallError("OpenService(mpssvc)", err)
	}
	defer windows.CloseServiceHandle(svc)
	var st windows.SERVICE_STATUS
	if err := windows.QueryServiceStatus(svc, &st); err != nil {
		return false, os.NewSyscallError("QueryServiceStatus(mpssvc)", err)
	}
	return st.CurrentState == windows.SERVICE_RUNNING, nil
}

func firewallCachePath() (string, error) {
	d, err := agentdirs.RequireState(os.Getenv, runtime.GOOS)
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "firewall.json"), nil
}

func loadFirewallCache() *FirewallCache {
	p, err := firewallCachePath()
	if err != nil {
		return nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	var c FirewallCache
	if json.Unmarshal(b, &c) != nil {
		return nil
	}
	return &c
}

func saveFirewallCache(fp string, now time.Time) {
	p, err := firewallCachePath()
	if err != nil {
		return
	}
	b, _ := json.Marshal(FirewallCache{Version: firewallCacheVersion, Fingerprint: fp, VerifiedAt: now})
	// Best effort: without the cache the next run checks again.
	if os.MkdirAll(filepath.Dir(p), 0o700) == nil {
		tmp := p + ".tmp"
		if os.WriteFile(tmp, b, 0o600) == nil && os.Rename(tmp, p) != nil {
			os.Remove(tmp)
		}
	}
}
