package loopguard

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// RegistryDir is where, under agentbox's per-user state directory, each
// running proxy records its port: a file named for the port holding the
// listening process's id. Concurrent runs (other agentbox processes of
// the same user) read it to tell agentbox's listeners on the open range
// from foreign ones. The sandbox users cannot write there, so a
// sandboxed command cannot make its own listener pass for agentbox's.
const RegistryDir = "proxy-ports"

// Claim records that process pid listens on port. release removes the
// record if it is still pid's.
func Claim(stateDir string, port int, pid int) (release func(), err error) {
	dir := filepath.Join(stateDir, RegistryDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("proxy port registry: %w", err)
	}
	name := filepath.Join(dir, strconv.Itoa(port))
	tmp, err := os.CreateTemp(dir, ".claim-*")
	if err != nil {
		return nil, fmt.Errorf("proxy port registry: %w", err)
	}
	_, werr := tmp.WriteString(strconv.Itoa(pid))
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), name)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("proxy port registry %s: %w", name, werr)
	}
	return func() {
		if b, err := os.ReadFile(name); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(pid) {
			os.Remove(name)
		}
	}, nil
}

// Owned reads the registry: port to the process that claimed it. A stale
// record (its process gone, or no longer listening) does no harm: a
// listener counts as agentbox's only if both its port and its process
// match a record. Unreadable entries are skipped, so they count as
// foreign, never as agentbox's.
func Owned(stateDir string) map[int]uint32 {
	owned := map[int]uint32{}
	dir := filepath.Join(stateDir, RegistryDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return owned
	}
	for _, e := range ents {
		port, err := strconv.Atoi(e.Name())
		if err != nil || port < 1 || port > 65535 || !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		pid, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
		if err != nil || pid == 0 {
			continue
		}
		owned[port] = uint32(pid)
	}
	return owned
}
