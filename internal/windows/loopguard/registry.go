package loopguard

import (
	"errors"
	"fmt"
	"io/fs"
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

// ErrClaimed means another live agentbox process holds the port's record.
var ErrClaimed = errors.New("proxy port claimed by another agentbox process")

// Claim records that process pid listens (or is about to listen) on port.
// A record that another process holds is left alone ([ErrClaimed]) while
// alive says that process still runs; a dead process's record is taken
// over. release removes the record if it is still pid's.
func Claim(stateDir string, port int, pid int, alive func(pid uint32) bool) (release func(), err error) {
	dir := filepath.Join(stateDir, RegistryDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("proxy port registry: %w", err)
	}
	name := filepath.Join(dir, strconv.Itoa(port))
	for try := 0; ; try++ {
		// O_EXCL: of two runs claiming the same port at once, one wins.
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			_, werr := f.WriteString(strconv.Itoa(pid))
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				os.Remove(name)
				return nil, fmt.Errorf("proxy port registry %s: %w", name, werr)
			}
			break
		}
		if !errors.Is(err, fs.ErrExist) || try > 0 {
			return nil, fmt.Errorf("proxy port registry %s: %w", name, err)
		}
		b, rerr := os.ReadFile(name)
		old, perr := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
		if rerr == nil && perr == nil && old != 0 && alive(uint32(old)) {
			return nil, fmt.Errorf("port %d: %w (process %d)", port, ErrClaimed, old)
		}
		// Stale (its process is gone) or unreadable: take it over.
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("proxy port registry %s: %w", name, err)
		}
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

// Prune removes the records of processes that no longer run, and the
// registry directory once it is empty (`agentbox cleanup`). A running
// agentbox's records stay. It returns how many it removed.
func Prune(stateDir string, alive func(pid uint32) bool) int {
	dir := filepath.Join(stateDir, RegistryDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		name := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(name)
		pid, perr := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
		if err == nil && perr == nil && pid != 0 && alive(uint32(pid)) {
			continue
		}
		if os.Remove(name) == nil {
			n++
		}
	}
	os.Remove(dir) // fails, harmlessly, while records remain
	return n
}
