package resident

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/linux/scm"
	"github.com/agentbox/agentbox/internal/resident/proto"
	"github.com/agentbox/agentbox/policy"
)

// recvMsg reads one message; received descriptors are close-on-exec.
// A message that did not fit (MSG_TRUNC, MSG_CTRUNC) is an error, its
// descriptors closed.
func recvMsg(fd int, buf, oob []byte) (n int, fds []int, err error) {
	for {
		var oobn, flags int
		n, oobn, flags, _, err = unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, nil, err
		}
		if oobn > 0 {
			fds = parseRights(oob[:oobn])
		}
		if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
			closeAll(fds)
			return 0, nil, errors.New("message truncated")
		}
		return n, fds, nil
	}
}

var (
	sendMsg     = scm.Send
	parseRights = scm.Rights
	closeAll    = scm.CloseAll
)

// send sends m, with fds.
func send(fd int, m *proto.Message, fds []int) error { return sendMsg(fd, m.Marshal(), fds) }

// rootIDs is what is on disk at every path whose identity shapes the
// sandbox: the workspace, the writable roots, every protected path (a
// placeholder removed and replaced by a real directory, or a .git moved
// aside for another, is another inode at the same path, which the
// prepared mount tree does not cover) and the tool caches' host
// directories, and the private temporary directories (one removed by
// hand would leave the prepared sandbox writing a deleted directory).
// Paths are lstat'ed: a symlink is itself what is protected.
func rootIDs(pol *policy.Policy) []rootID {
	paths := append([]string{pol.Cwd()}, pol.WritableRoots()...)
	for _, t := range pol.PrivateTemps() {
		paths = append(paths, t.Dir)
	}
	for _, pr := range pol.Protected() {
		paths = append(paths, pr.Path)
	}
	for _, c := range pol.ToolCaches() {
		if c.Host != "" {
			paths = append(paths, c.Host)
		}
	}
	out := make([]rootID, 0, len(paths))
	for _, p := range paths {
		id := rootID{Path: p}
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil {
			id.Exists, id.Dev, id.Ino = true, st.Dev, st.Ino
		}
		out = append(out, id)
	}
	return out
}

// stdioFiles wraps the three descriptors a request carried.
func stdioFiles(fds []int) [3]*os.File {
	return [3]*os.File{os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "stdout"), os.NewFile(uintptr(fds[2]), "stderr")}
}

// closeStdio closes stdio when the request is done (a file run already
// closed, once the zygote held its copies, is closed only once: os.File).
func closeStdio(stdio *[3]*os.File) {
	for _, f := range stdio {
		if f != nil {
			f.Close()
		}
	}
}

// peekSize is the length of the next message on fd, which stays queued.
func peekSize(fd int) (int, error) {
	for {
		n, _, _, _, err := unix.Recvmsg(fd, nil, nil, unix.MSG_PEEK|unix.MSG_TRUNC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return n, err
	}
}
