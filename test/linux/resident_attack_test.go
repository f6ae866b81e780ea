//go:build linux

package linux

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/resident"
	"github.com/agentbox/agentbox/internal/resident/fastpath"
	"github.com/agentbox/agentbox/internal/resident/ident"
	"github.com/agentbox/agentbox/policy"
)

// attackMode makes the wrapper binary (a copy of this test binary, which
// every test user may run) the resident helper's would-be attacker:
//
//	AGENTBOX_TEST_WRAPPER=resident-attack nouserns STATE_DIR AGENTBOX_BIN DIR FILE [lean]
//
// It sends the helper at STATE_DIR exactly the request an agentbox CLI
// built as AGENTBOX_BIN would send to run `echo pwned > DIR/FILE` with DIR
// as a writable workspace (with "lean", the request of the lean client,
// internal/resident/fastpath, for `agentbox run -C DIR -- ...`), and
// prints what happened: "connect: ERR" when
// the connect itself was refused, "no answer" when the helper hung up
// without a word (its peer check refused us), "fallback: WHY" when it
// declined the request, "served: exit N" when it ran it. It exits 0 only
// when served.
const attackMode = "resident-attack"

func residentAttackMain(args []string) int {
	if len(args) != 4 && (len(args) != 5 || args[4] != "lean") {
		fmt.Println("usage: STATE_DIR AGENTBOX_BIN DIR FILE [lean]")
		return 2
	}
	state, bin, dir, file := args[0], args[1], args[2], args[3]
	lean := len(args) == 5
	pol, err := policy.Resolve(policy.Options{Cwd: dir})
	if err != nil {
		fmt.Println("resolve:", err)
		return 2
	}
	id, err := resident.BinaryID(bin)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	argv := []string{"/bin/sh", "-c", `echo pwned > "$0"`, filepath.Join(dir, file)}
	msg, err := resident.EncodeRequest(state, id, pol, argv, os.Environ(), 0)
	if err != nil {
		fmt.Println("encode:", err)
		return 2
	}
	if lean {
		if msg, err = leanRequest(state, id, bin, dir, argv); err != nil {
			fmt.Println("encode:", err)
			return 2
		}
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET, 0)
	if err != nil {
		fmt.Println("socket:", err)
		return 2
	}
	sock := filepath.Join(resident.Dir(state), "sock")
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
		fmt.Println("connect:", err)
		return 1
	}
	fmt.Println("connected")
	if err := unix.Sendmsg(fd, msg, unix.UnixRights(0, 1, 2), nil, unix.MSG_NOSIGNAL); err != nil {
		if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) {
			// Hung up on before the request was even read.
			fmt.Println("no answer")
		} else {
			fmt.Println("send:", err)
		}
		return 1
	}
	buf := make([]byte, 64<<10)
	if lean {
		return leanAnswer(fd, buf)
	}
	for {
		n, _, _, _, err := unix.Recvmsg(fd, buf, nil, 0)
		if err != nil || n == 0 {
			fmt.Println("no answer")
			return 1
		}
		var r struct {
			Started  bool   `json:"started"`
			Fallback string `json:"fallback"`
			Exited   bool   `json:"exited"`
			Code     int    `json:"code"`
		}
		if err := json.Unmarshal(buf[:n], &r); err != nil {
			fmt.Println("odd answer:", err)
			return 1
		}
		switch {
		case r.Fallback != "":
			fmt.Println("fallback:", r.Fallback)
			return 1
		case r.Exited:
			fmt.Println("served: exit", r.Code)
			return 0
		}
	}
}

// leanRequest is the lean client's request for `agentbox run -C dir --
// argv...` as a CLI built as bin would send it from dir.
func leanRequest(state, id, bin, dir string, argv []string) ([]byte, error) {
	umask, err := ident.Umask()
	if err != nil {
		return nil, err
	}
	rl, err := ident.Rlimits()
	if err != nil {
		return nil, err
	}
	args := append([]string{bin, "run", "-C", dir, "--"}, argv...)
	return fastpath.Encode(&fastpath.Request{Binary: id, StateDir: state, Umask: umask, Rlimits: rl,
		Dir: dir, Executable: bin, Args: args, Env: os.Environ()}), nil
}

// leanAnswer reads the helper's lean replies (fastpath's wire format: 'S'
// started, 'F' and why, 'E' and the status).
func leanAnswer(fd int, buf []byte) int {
	for {
		n, _, _, _, err := unix.Recvmsg(fd, buf, nil, 0)
		if err != nil || n == 0 {
			fmt.Println("no answer")
			return 1
		}
		switch buf[0] {
		case 'F':
			fmt.Println("fallback:", string(buf[1:n]))
			return 1
		case 'E':
			if n < 9 {
				fmt.Println("odd answer")
				return 1
			}
			fmt.Println("served: exit", int(buf[8]))
			return 0
		}
	}
}
