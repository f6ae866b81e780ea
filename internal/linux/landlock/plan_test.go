package landlock

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

type fakeInfo struct {
	name string
	dir  bool
}

func (f fakeInfo) Name() string       { return f.name }
func (f fakeInfo) Size() int64        { return 0 }
func (f fakeInfo) Mode() fs.FileMode  { return map[bool]fs.FileMode{true: fs.ModeDir}[f.dir] }
func (f fakeInfo) ModTime() time.Time { return time.Time{} }
func (f fakeInfo) IsDir() bool        { return f.dir }
func (f fakeInfo) Sys() any           { return nil }

// fakeFS maps paths to "is a directory".
func fakeFS(paths map[string]bool) func(string) (fs.FileInfo, error) {
	return func(p string) (fs.FileInfo, error) {
		dir, ok := paths[p]
		if !ok {
			return nil, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
		}
		return fakeInfo{name: p, dir: dir}, nil
	}
}

var testFS = fakeFS(map[string]bool{
	"/work": true, "/work/notes.txt": false, "/tmp": true,
	"/dev/null": false, "/dev/tty": false, "/dev/pts": true,
})

func TestPlanFloors(t *testing.T) {
	cases := []struct {
		name    string
		cfg     Config
		abi     int
		wantErr string
	}{
		{"default floor rejects ABI 2", Config{}, 2, "ABI 2, policy needs at least 3"},
		{"default floor accepts ABI 3", Config{}, 3, ""},
		{"explicit floor 1", Config{MinABI: 1}, 1, ""},
		{"floor above kernel", Config{MinABI: 6}, 5, "ABI 6 adds abstract UNIX socket"},
		{"floor beyond go-landlock", Config{MinABI: 99}, 7, "minimum ABI 99"},
		{"no landlock", Config{MinABI: 1}, 0, "landlock unavailable"},
		{"scope unix on ABI 5", Config{ScopeAbstractUnix: true}, 5, "needs ABI 6"},
		{"scope signals on ABI 5", Config{ScopeSignals: true}, 5, "needs ABI 6"},
		{"scopes on ABI 6", Config{ScopeAbstractUnix: true, ScopeSignals: true}, 6, ""},
		{"missing root", Config{WritableRoots: []string{"/nope"}}, 7, "/nope"},
		{"relative root", Config{WritableRoots: []string{"work"}}, 7, "not absolute"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := plan(c.cfg, c.abi, testFS)
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("got error %v, want one containing %q", err, c.wantErr)
			}
		})
	}
	if _, _, _, err := plan(Config{MinABI: 1}, 0, testFS); !errors.Is(err, ErrUnavailable) {
		t.Errorf("ABI 0: %v does not wrap ErrUnavailable", err)
	}
}

func TestPlanRights(t *testing.T) {
	for abi := 1; abi <= maxKnownABI; abi++ {
		cfg := Config{WritableRoots: []string{"/work", "/work/notes.txt", "/tmp"}, MinABI: 1}
		llcfg, rules, a, err := plan(cfg, abi, testFS)
		if err != nil {
			t.Fatalf("ABI %d: %v", abi, err)
		}
		// Strict: every right the ABI supports is handled, nothing
		// more, and what is left over is reported.
		if llcfg.HandledAccessFS != presets[abi].HandledAccessFS {
			t.Errorf("ABI %d: handles %v, ABI supports %v", abi, llcfg.HandledAccessFS, presets[abi].HandledAccessFS)
		}
		if a.HandledFS|a.Unhandled != presets[maxKnownABI].HandledAccessFS || a.HandledFS&a.Unhandled != 0 {
			t.Errorf("ABI %d: handled %v and unhandled %v do not partition %v", abi, a.HandledFS, a.Unhandled, presets[maxKnownABI].HandledAccessFS)
		}
		if llcfg.HandledAccessNet != 0 {
			t.Errorf("ABI %d: network rights handled: %v", abi, llcfg.HandledAccessNet)
		}
		if got, want := a.WritableDirs, []string{"/work", "/tmp"}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("ABI %d: dirs %q, want %q", abi, got, want)
		}
		if got := a.WritableFiles; len(got) != 1 || got[0] != "/work/notes.txt" {
			t.Errorf("ABI %d: files %q", abi, got)
		}
		if got := strings.Join(a.Devices, ","); got != "/dev/null,/dev/tty,/dev/pts" {
			t.Errorf("ABI %d: devices %q", abi, got)
		}
		// The rule strings name their rights; check the important
		// ones rather than go-landlock's formatting of all of them.
		var s []string
		for _, r := range rules {
			s = append(s, landlock.PathAccess(r.access, r.paths...).String())
		}
		all := strings.Join(s, "\n")
		if len(rules) != 4 {
			t.Fatalf("ABI %d: %d rules:\n%s", abi, len(rules), all)
		}
		root, dirs, files, devs := s[0], s[1], s[2], s[3]
		if strings.Contains(root, "write") || !strings.Contains(root, "read_file") {
			t.Errorf("ABI %d: root rule %s", abi, root)
		}
		if abi >= 2 && !strings.Contains(dirs, "refer") {
			t.Errorf("ABI %d: writable dirs lack refer: %s", abi, dirs)
		}
		if abi >= 3 && !strings.Contains(dirs, "truncate") {
			t.Errorf("ABI %d: writable dirs lack truncate: %s", abi, dirs)
		}
		if strings.Contains(dirs, "ioctl_dev") || strings.Contains(dirs, "resolve_unix") {
			t.Errorf("ABI %d: writable dirs grant device ioctl or unix connect: %s", abi, dirs)
		}
		if strings.Contains(files, "make_") || strings.Contains(files, "remove") || strings.Contains(files, "read_dir") {
			t.Errorf("ABI %d: file rule has directory rights: %s", abi, files)
		}
		if abi >= 5 != strings.Contains(devs, "ioctl_dev") {
			t.Errorf("ABI %d: device rule %s", abi, devs)
		}
	}
}

func TestAppliedString(t *testing.T) {
	_, _, a, err := plan(Config{WritableRoots: []string{"/work"}, ScopeSignals: true}, 6, testFS)
	if err != nil {
		t.Fatal(err)
	}
	s := a.String()
	for _, want := range []string{"ABI 6", "signal", "/work", "not enforced by this kernel", "resolve_unix"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
}

// TestPlanHostDev: with the host's /dev, files may be read beneath every
// entry of / but /dev and only from the listed devices there; the host's
// ptys are neither readable nor writable, and / stays listable.
func TestPlanHostDev(t *testing.T) {
	old := listDir
	defer func() { listDir = old }()
	listDir = func(dir string) ([]string, error) {
		if dir != "/" {
			t.Fatalf("listed %s", dir)
		}
		return []string{"dev", "work", "tmp", "dangling"}, nil
	}
	_, rules, a, err := plan(Config{WritableRoots: []string{"/work"}, HostDev: true}, 6, testFS)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(a.Devices, ","), "/dev/pts") {
		t.Errorf("host ptys writable: %q", a.Devices)
	}
	var readFile []string
	for _, r := range rules {
		if r.access&landlock.AccessFSSet(ll.AccessFSReadFile) != 0 {
			readFile = append(readFile, r.paths...)
		}
		for _, p := range r.paths {
			if p == "/" && r.access&landlock.AccessFSSet(ll.AccessFSReadFile) != 0 {
				t.Errorf("read_file granted beneath /: %v", r.access)
			}
			if p == "/" && r.access&landlock.AccessFSSet(ll.AccessFSReadDir) == 0 {
				t.Errorf("/ not listable: %v", r.access)
			}
		}
	}
	got := strings.Join(readFile, ",")
	for _, want := range []string{"/work", "/tmp", "/dev/null", "/dev/tty"} {
		if !strings.Contains(","+got+",", ","+want+",") {
			t.Errorf("%s not readable: %s", want, got)
		}
	}
	for _, not := range []string{"/dev", "/dev/pts", "/dangling"} {
		if strings.Contains(","+got+",", ","+not+",") {
			t.Errorf("%s readable: %s", not, got)
		}
	}
}

// TestPlanHidden: in degraded mode, reads are granted beneath the
// siblings along each hidden path, never beneath the hidden path or a
// directory holding it, and writable roots lose the read right.
func TestPlanHidden(t *testing.T) {
	old := listDir
	defer func() { listDir = old }()
	tree := map[string][]string{
		"/":                  {"dev", "home", "usr"},
		"/home":              {"u", "v"},
		"/home/u":            {".ssh", ".aws", "ws", ".gitconfig"},
		"/home/u/.ssh":       {"id_rsa", "id_rsa.pub"},
		"/home/u/.aws":       {"credentials"},
		"/home/u/ws":         {"a"},
		"/home/u/ws/a":       {},
		"/home/u/.gitconfig": nil,
	}
	listDir = func(dir string) ([]string, error) {
		n, ok := tree[dir]
		if !ok {
			return nil, fs.ErrNotExist
		}
		return n, nil
	}
	stat := fakeFS(map[string]bool{"/home": true, "/usr": true, "/home/u": true, "/home/v": true, "/home/u/.ssh": true,
		"/home/u/.ssh/id_rsa": false, "/home/u/.ssh/id_rsa.pub": false, "/home/u/.aws": true, "/home/u/.aws/credentials": false,
		"/home/u/ws": true, "/home/u/ws/a": true, "/home/u/.gitconfig": false, "/dev/null": false})
	oldLstat := lstat
	defer func() { lstat = oldLstat }()
	// A link among the siblings, and one among the re-opened names,
	// would grant their targets: left out.
	tree["/home/u"] = append(tree["/home/u"], "aws-link")
	tree["/home/u/.ssh"] = append(tree["/home/u/.ssh"], "evil.pub")
	lstat = func(p string) (fs.FileInfo, error) {
		if p == "/home/u/aws-link" || p == "/home/u/.ssh/evil.pub" {
			return linkInfo{}, nil
		}
		return stat(p)
	}
	_, rules, _, err := plan(Config{WritableRoots: []string{"/home/u/ws"}, HostDev: true,
		Hidden: []string{"/home/u/.ssh", "/home/u/.aws"}, Reopen: []string{"/home/u/.ssh/id_rsa.pub", "/home/u/.ssh/evil.pub"}}, 6, stat)
	if err != nil {
		t.Fatal(err)
	}
	var readFile []string
	for _, r := range rules {
		if r.access&landlock.AccessFSSet(ll.AccessFSReadFile) != 0 {
			readFile = append(readFile, r.paths...)
		}
	}
	got := "," + strings.Join(readFile, ",") + ","
	for _, want := range []string{"/usr", "/home/v", "/home/u/ws", "/home/u/.gitconfig", "/home/u/.ssh/id_rsa.pub", "/dev/null"} {
		if !strings.Contains(got, ","+want+",") {
			t.Errorf("%s not readable: %s", want, got)
		}
	}
	for _, not := range []string{"/home", "/home/u", "/home/u/.ssh", "/home/u/.ssh/id_rsa", "/home/u/.aws", "/home/u/.aws/credentials", "/", "/home/u/aws-link", "/home/u/.ssh/evil.pub"} {
		if strings.Contains(got, ","+not+",") {
			t.Errorf("%s readable: %s", not, got)
		}
	}
}

type linkInfo struct{ fakeInfo }

func (linkInfo) Mode() fs.FileMode { return fs.ModeSymlink }
