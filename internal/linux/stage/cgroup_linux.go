package stage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// runCgroup is a child cgroup (v2) made for one degraded run, holding the
// init and everything below it, so that cgroup.kill ends the whole tree at
// once, racing forks included. It is used only where the caller's own
// cgroup was delegated to it; elsewhere the reaper's sweep does the work
// alone.
type runCgroup struct {
	dir    string // the run's cgroup
	parent string // the reaper's own cgroup, which it returns to
}

const cgroupPrefix = "agentbox-"

// newRunCgroup creates the run's cgroup beside nothing else: under the
// reaper's own cgroup, if that is a delegated cgroup v2 directory this uid
// may write. It returns nil when there is none (the common case: a login
// session's scope is not delegated), which is not an error.
func newRunCgroup() *runCgroup {
	parent := ownCgroupDir()
	if parent == "" || !delegated(parent) {
		return nil
	}
	sweepStaleCgroups(parent)
	start, err := startTime(os.Getpid())
	if err != nil {
		return nil
	}
	dir := filepath.Join(parent, fmt.Sprintf("%s%d-%d", cgroupPrefix, os.Getpid(), start))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil
	}
	cg := &runCgroup{dir: dir, parent: parent}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		cg.remove() // kernel before 5.14
		return nil
	}
	return cg
}

// enter moves this process into the run's cgroup, so that the init forked
// next is born there (clone3's CLONE_INTO_CGROUP would do the same, but
// container profiles answer clone3 with ENOSYS); leave moves it back.
func (cg *runCgroup) enter() error {
	return writeFile(filepath.Join(cg.dir, "cgroup.procs"), strconv.Itoa(os.Getpid()))
}

func (cg *runCgroup) leave() error {
	return writeFile(filepath.Join(cg.parent, "cgroup.procs"), strconv.Itoa(os.Getpid()))
}

// kill kills every process in the run's cgroup; the kernel also kills
// those forked while it does.
func (cg *runCgroup) kill() error {
	return writeFile(filepath.Join(cg.dir, "cgroup.kill"), "1")
}

// remove deletes the cgroup once it is empty; a process still exiting
// keeps it busy for a moment.
func (cg *runCgroup) remove() {
	for i := 0; i < 50; i++ {
		err := unix.Rmdir(cg.dir)
		if err == nil || errors.Is(err, unix.ENOENT) || !errors.Is(err, unix.EBUSY) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func writeFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ownCgroupDir is the directory of this process's cgroup in the cgroup v2
// hierarchy, or "" when there is none mounted.
func ownCgroupDir() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	var rel string
	found := false
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			rel, found = p, true
		}
	}
	if !found || !strings.HasPrefix(rel, "/") {
		return ""
	}
	mnt := cgroup2Mount(rel)
	if mnt.point == "" {
		return ""
	}
	return filepath.Join(mnt.point, strings.TrimPrefix(rel, mnt.root))
}

type mount2 struct{ root, point string }

// cgroup2Mount finds a cgroup2 mount whose root holds rel.
func cgroup2Mount(rel string) (m mount2) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options... - fstype source superopts
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, x := range fields {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+1 >= len(fields) || fields[sep+1] != "cgroup2" {
			continue
		}
		root, point := unescapeMount(fields[3]), unescapeMount(fields[4])
		if root == "/" || rel == root || strings.HasPrefix(rel, root+"/") {
			if root == "/" {
				root = ""
			}
			return mount2{root: root, point: point}
		}
	}
	return m
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// delegated reports whether dir is a cgroup handed to this uid to manage.
// For a plain uid, being able to write it is what delegation means (the
// owner chowned it over, as systemd does with Delegate=yes). Root can
// write every cgroup, and a tree that is not its own belongs to the
// service manager: root takes only one marked as delegated (systemd's
// trusted.delegate or user.delegate attribute).
func delegated(dir string) bool {
	for _, f := range []string{"", "cgroup.procs"} {
		if unix.Access(filepath.Join(dir, f), unix.W_OK) != nil {
			return false
		}
	}
	if os.Geteuid() != 0 {
		return true
	}
	buf := make([]byte, 8)
	for _, attr := range []string{"trusted.delegate", "user.delegate"} {
		if n, err := unix.Getxattr(dir, attr, buf); err == nil && string(bytes.TrimSpace(buf[:n])) == "1" {
			return true
		}
	}
	return false
}

// sweepStaleCgroups kills and removes what a run whose reaper was killed
// outright left in parent: cgroups named for a reaper that no longer
// exists (pid and start time).
func sweepStaleCgroups(parent string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		name, ok := strings.CutPrefix(e.Name(), cgroupPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidS, startS, ok := strings.Cut(name, "-")
		pid, err1 := strconv.Atoi(pidS)
		start, err2 := strconv.ParseUint(startS, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			continue
		}
		if now, err := startTime(pid); err == nil && now == start {
			continue // its reaper still runs
		}
		cg := &runCgroup{dir: filepath.Join(parent, e.Name()), parent: parent}
		cg.kill()
		cg.remove()
	}
}

// startTime is field 22 of /proc/pid/stat: with the pid, it names one
// process for good.
func startTime(pid int) (uint64, error) {
	f, err := procStat(pid, 22)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(f[19], 10, 64) // field 22; f[0] is field 3
}

// procStat returns the fields of /proc/pid/stat after "pid (comm)",
// starting with field 3 (the state), checking there are at least up to
// field last. comm may hold spaces and parentheses, so it parses from the
// last ')'.
func procStat(pid, last int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < last-2 {
		return nil, errors.New("malformed stat")
	}
	return f, nil
}
