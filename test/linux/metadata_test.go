//go:build linux

package linux

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// metaScript changes the mode, times and xattrs of $1 every way a command
// can: by path, through a symlink in the workspace, through a descriptor
// (fchmod and friends), through /proc/self/fd, and by the *at forms.
const metaScript = `
import os, sys
p = sys.argv[1]
def t(name, f):
    try:
        f()
        print(name, "changed")
    except OSError as e:
        print(name, "refused", e.errno)
t("chmod", lambda: os.chmod(p, 0o777))
t("utime", lambda: os.utime(p, (1, 1)))
t("utime-now", lambda: os.utime(p))
t("setxattr", lambda: os.setxattr(p, "user.agentbox-test", b"x"))
if os.path.lexists("lnk"):
    os.unlink("lnk")
os.symlink(p, "lnk")
t("chmod-symlink", lambda: os.chmod("lnk", 0o777))
fd = os.open(p, os.O_RDONLY)
t("fchmod", lambda: os.fchmod(fd, 0o777))
t("futimens", lambda: os.utime(fd, (2, 2)))
t("fsetxattr", lambda: os.setxattr(fd, "user.agentbox-test", b"y"))
t("procfd-chmod", lambda: os.chmod("/proc/self/fd/%d" % fd, 0o777))
d = os.open(os.path.dirname(os.path.abspath(p)), os.O_RDONLY)
t("fchmodat", lambda: os.chmod(os.path.basename(p), 0o777, dir_fd=d))
t("utimensat-nofollow", lambda: os.utime(os.path.basename(p), (3, 3), dir_fd=d, follow_symlinks=False))
os.unlink("lnk")
`

type metaState struct {
	mode  os.FileMode
	mtime unix.Timespec
	xattr bool
}

func metaOf(t *testing.T, p string) metaState {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	_, err := unix.Lgetxattr(p, "user.agentbox-test", nil)
	return metaState{os.FileMode(st.Mode & 0o7777), st.Mtim, err == nil}
}

// TestDegradedMetadataOutsideRoots: without a mount namespace, Landlock
// keeps writes inside the writable roots but has no right for metadata.
// The command must still not change the mode, times or xattrs of the
// user's files outside them (a file outside the workspace, one in $HOME),
// however it names them, while the same changes inside the workspace work.
func TestDegradedMetadataOutsideRoots(t *testing.T) {
	needPython(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		inHome := filepath.Join(fx.home, "rc")
		if err := os.WriteFile(inHome, []byte("rc\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		chownR(t, fx.home, u)
		// Control: the script really changes a file where it may.
		ctlFile := filepath.Join(fx.dir, "control")
		if err := os.WriteFile(ctlFile, []byte("c\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		chownR(t, fx.dir, u)
		ctl := host(t, u, runOpts{dir: fx.ws}, python, "-c", metaScript, ctlFile)
		if strings.Contains(ctl.stdout, "refused") || metaOf(t, ctlFile) == (metaState{}) || !metaOf(t, ctlFile).xattr {
			t.Fatalf("control: the script does not change metadata on the host (xattrs unsupported here?): %v", ctl)
		}
		// A host file given as stdin, which agentbox may reopen inside
		// the sandbox instead of relaying it.
		victim := filepath.Join(fx.out, "file.txt")
		before := metaOf(t, victim)
		in, err := os.Open(victim)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		r := degradedOpts(t, fx, runOpts{stdin: in}, []string{"--allow-degraded"},
			`chmod 4777 /proc/self/fd/0 && echo stdin-chmod; touch /proc/self/fd/0 && echo stdin-touch; echo done`)
		if r.code != 0 || !strings.Contains(r.stdout, "done") {
			t.Fatalf("degraded run failed: %v", r)
		}
		// A relayed stdin is a pipe, whose mode may change; the file's
		// must not.
		if after := metaOf(t, victim); after != before {
			t.Errorf("host: the degraded command changed the metadata of %s, its stdin: %+v => %+v\n%v", victim, before, after, r)
		}
		for _, victim := range []string{filepath.Join(fx.out, "file.txt"), inHome} {
			before := metaOf(t, victim)
			r := degraded(t, fx, []string{"--allow-degraded"}, python+" -c '"+metaScript+"' '"+victim+"'; echo done")
			if r.code != 0 || !strings.Contains(r.stdout, "done") {
				t.Fatalf("degraded run failed: %v", r)
			}
			if after := metaOf(t, victim); after != before {
				t.Errorf("host: the degraded command changed the metadata of %s: %+v => %+v\n%v", victim, before, after, r)
			}
			if strings.Contains(r.stdout, "changed") {
				t.Errorf("a metadata call on %s outside the writable roots succeeded: %v", victim, r)
			}
		}
		// Inside the workspace the same calls work.
		inside := filepath.Join(fx.ws, "file.txt")
		r = degraded(t, fx, []string{"--allow-degraded"}, python+" -c '"+metaScript+"' '"+inside+"'; touch -d 2001-01-01 \"$WS/file.txt\" && chmod 0600 \"$WS/file.txt\" && echo done")
		if r.code != 0 || !strings.Contains(r.stdout, "done") || strings.Contains(r.stdout, "refused") {
			t.Fatalf("metadata calls inside the workspace failed: %v", r)
		}
		m := metaOf(t, inside)
		if m.mode != 0o600 || m.mtime.Sec != 978307200 || !m.xattr {
			t.Errorf("host: metadata inside the workspace not changed as asked: %+v", m)
		}
	})
}

// TestDegradedStickyRootMetadata: a sticky writable root (a shared
// directory like /tmp, which every root run has) keeps its own mode: the
// command may change what is inside it, not take away its sticky bit.
func TestDegradedStickyRootMetadata(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		shared := filepath.Join(fx.dir, "shared")
		if err := os.Mkdir(shared, 0o755); err != nil {
			t.Fatal(err)
		}
		chownR(t, fx.dir, u)
		if err := os.Chmod(shared, os.ModeSticky|0o777); err != nil {
			t.Fatal(err)
		}
		before := metaOf(t, shared)
		r := degraded(t, fx, []string{"--allow-degraded", "--add-dir", shared},
			`chmod 0777 "$DIR/shared" && echo chmod-root; touch "$DIR/shared/x" && chmod 0600 "$DIR/shared/x" && echo inside-ok`)
		if after := metaOf(t, shared); after.mode != before.mode {
			t.Errorf("host: the degraded command changed the mode of the sticky root %s: %o => %o\n%v", shared, before.mode, after.mode, r)
		}
		if !strings.Contains(r.stdout, "inside-ok") {
			t.Errorf("metadata inside the sticky root failed: %v", r)
		}
	})
}

// TestStickyRootMetadata: in the full sandbox a writable root's own
// directory is a read-write bind mount, so a command run by its owner
// could change its mode. For a root-owned sticky root (/tmp, here a
// stand-in) that owner is root: a root run must not clear the sticky bit
// every other user relies on. Inside the root, files keep their metadata
// calls. The plain user is refused by ownership alone; root by agentbox.
func TestStickyRootMetadata(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		shared := filepath.Join(fx.dir, "shared")
		if err := os.Mkdir(shared, 0o755); err != nil {
			t.Fatal(err)
		}
		// Owned by root, as /tmp is, whoever the run's user is.
		if err := os.Chmod(shared, os.ModeSticky|0o777); err != nil {
			t.Fatal(err)
		}
		script := `chmod 0777 "$DIR/shared" && echo chmod-root; chown 0:0 "$DIR/shared" 2>/dev/null; touch "$DIR/shared/x" && chmod 0600 "$DIR/shared/x" && touch -d 2001-01-01 "$DIR/shared/x" && echo inside-ok`
		if u.root() {
			// Control: the same script on the host does change the mode.
			ctl := filepath.Join(fx.dir, "ctl")
			os.Mkdir(ctl, 0o755)
			os.Chmod(ctl, os.ModeSticky|0o777)
			host(t, u, runOpts{env: []string{"DIR=" + fx.dir}}, "/bin/sh", "-c", strings.ReplaceAll(script, "shared", "ctl"))
			if metaOf(t, ctl).mode&os.FileMode(syscall.S_ISVTX) != 0 {
				t.Fatal("control: chmod 0777 on the host kept the sticky bit; the test is broken")
			}
		}
		before := metaOf(t, shared)
		r := sandboxed(t, fx, []string{"--add-dir", shared}, script)
		if after := metaOf(t, shared); after.mode != before.mode {
			t.Errorf("host: the command changed the mode of the sticky root %s: %o => %o\n%v", shared, before.mode, after.mode, r)
		}
		if strings.Contains(r.stdout, "chmod-root") {
			t.Errorf("chmod of the sticky root succeeded: %v", r)
		}
		if !strings.Contains(r.stdout, "inside-ok") {
			t.Errorf("metadata calls inside the sticky root failed: %v", r)
		}
	})
}

// TestNoSetidFilesLeftBehind: a set-user-ID copy of a shell left in the
// workspace would, once the run is over, let any local user who can reach
// it run a shell as the command's user (root, for a root run). None can be
// made: not by chmod, by the mode of a new file, nor by mknod.
func TestNoSetidFilesLeftBehind(t *testing.T) {
	script := `cd "$WS"
cp /bin/sh rootsh && chmod 4755 rootsh
cp /bin/sh gsh && chmod g+s gsh
install -m 4755 /bin/sh ish
python3 -c 'import os; os.close(os.open("osh", os.O_CREAT|os.O_WRONLY, 0o4755))' 2>/dev/null
echo done`
	forEachUser(t, func(t *testing.T, u *testUser) {
		ctl := newFixture(t, u)
		host(t, u, runOpts{dir: ctl.ws, env: ctl.env()}, "/bin/sh", "-c", script)
		if fi, err := os.Stat(filepath.Join(ctl.ws, "rootsh")); err != nil || fi.Mode()&os.ModeSetuid == 0 {
			t.Fatalf("control: the script made no setuid file on the host (%v); the test is broken", err)
		}
		fx := newFixture(t, u)
		r := sandboxed(t, fx, nil, script)
		if !strings.Contains(r.stdout, "done") {
			t.Fatalf("script did not run to the end: %v", r)
		}
		for _, name := range []string{"rootsh", "gsh", "ish", "osh"} {
			fi, err := os.Lstat(filepath.Join(fx.ws, name))
			if err != nil {
				continue // not made at all: fine
			}
			if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
				t.Errorf("BREACH: %s left with mode %v on the host\n%v", name, fi.Mode(), r)
			}
		}
		// Ordinary modes still work.
		r = sandboxed(t, fx, nil, `cd "$WS" && touch plain && chmod 0750 plain && stat -c %a plain`)
		if !strings.Contains(r.stdout, "750") {
			t.Errorf("chmod 0750 inside the workspace failed: %v", r)
		}
	})
}
