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
	"github.com/agentbox/agentbox/policy"
)

// attackMode makes the wrapper binary (a copy of this test binary, which
// every test user may run) the resident helper's would-be attacker:
//
//	AGENTBOX_TEST_WRAPPER=resident-attack nouserns STATE_DIR AGENTBOX_BIN DIR FILE
//
// It sends the helper at STATE_DIR exactly the request an agentbox CLI
// built as AGENTBOX_BIN would send to run `echo pwned > DIR/FILE` with DIR
// as a writable workspace, and prints what happened: "connect: ERR" when
// the connect itself was refused, "no answer" when the helper hung up
// without a word (its peer check refused us), "fallback: WHY" when it
// declined the request, "served: exit N" when it ran it. It exits 0 only
// when served.
const attackMode = "resident-attack"

func residentAttackMain(args []string) int {
	if len(args) != 4 {
		fmt.Println("usage: STATE_DIR AGENTBOX_BIN DIR FILE")
		return 2
	}
	state, bin, dir, file := args[0], args[1], args[2], args[3]
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
	msg, err := resident.EncodeRequest(state, id, pol, []string{"/bin/sh", "-c", `echo pwned > "$0"`, filepath.Join(dir, file)}, os.Environ(), 0)
	if err != nil {
		fmt.Println("encode:", err)
		return 2
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
