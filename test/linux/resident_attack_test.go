//go:build linux

package linux

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/resident"
	"github.com/agentbox/agentbox/internal/resident/ident"
	"github.com/agentbox/agentbox/internal/resident/proto"
	"github.com/agentbox/agentbox/internal/wire"
)

// attackMode makes the wrapper binary (a copy of this test binary, which
// every test user may run) the resident helper's would-be attacker:
//
//	AGENTBOX_TEST_WRAPPER=resident-attack nouserns STATE_DIR AGENTBOX_BIN DIR FILE [ATTACK]
//
// It sends the helper at STATE_DIR exactly the request the lean client
// (internal/resident/client) of an agentbox built as AGENTBOX_BIN would
// send from DIR for `agentbox run -C DIR -- sh -c 'echo pwned > DIR/FILE'`,
// or with ATTACK one of the malformed messages of attacks made of it,
// and prints what happened: "connect: ERR" when the connect itself was
// refused, "no answer" when the helper hung up without a word (its peer
// check refused us, or the message), "fallback: WHY" when it declined
// the request, "served: exit N" when it ran it. It exits 0 only when
// served.
const attackMode = "resident-attack"

// attacks are the malformed messages the attacker can send, each made
// of the genuine request (the first) by the function given; report
// attacks answer the helper's OpenReport with the message returned.
var attacks = map[string]func(msg []byte) (send []byte, fds []int){
	"request": func(msg []byte) ([]byte, []int) { return msg, stdioFds },
	// Cut short: inside the Run's fields.
	"truncated": func(msg []byte) ([]byte, []int) { return msg[:len(msg)/2], stdioFds },
	// A byte more than the fields hold.
	"trailing": func(msg []byte) ([]byte, []int) { return append(msg, 0), stdioFds },
	// The first string's length is 2^64-1.
	"huge-length": func(msg []byte) ([]byte, []int) {
		return append(wire.AppendUint([]byte{byte(proto.KindRun)}, ^uint64(0)), msg[9:]...), stdioFds
	},
	// The limits' count is 2^40: nothing may be allocated for it.
	"huge-count": func(msg []byte) ([]byte, []int) {
		b := wire.AppendString(wire.AppendString([]byte{byte(proto.KindRun)}, "x"), "/s")
		return wire.AppendUint(wire.AppendUint(b, 0o22), 1<<40), stdioFds
	},
	"unknown-tag":   func(msg []byte) ([]byte, []int) { return append([]byte{'Z'}, msg[1:]...), stdioFds },
	"empty":         func(msg []byte) ([]byte, []int) { return []byte{}, stdioFds },
	"oversize":      func(msg []byte) ([]byte, []int) { return make([]byte, proto.MaxMessage+1), stdioFds },
	"json":          func(msg []byte) ([]byte, []int) { return []byte(`{"op":"run","argv":["/bin/sh"]}`), stdioFds },
	"fds-none":      func(msg []byte) ([]byte, []int) { return msg, nil },
	"fds-two":       func(msg []byte) ([]byte, []int) { return msg, stdioFds[:2] },
	"fds-four":      func(msg []byte) ([]byte, []int) { return msg, append(stdioFds, 0) },
	"stop-with-fds": func(msg []byte) ([]byte, []int) { return []byte{byte(proto.KindStopIdle)}, stdioFds },
	// A reply kind sent to the helper.
	"helper-kind": func(msg []byte) ([]byte, []int) { return []byte{byte(proto.KindExited), 0, 0, 0, 0, 0, 0, 0, 0}, nil },
	// A signal, not a run.
	"signal-first": func(msg []byte) ([]byte, []int) {
		return (&proto.Message{Kind: proto.KindSignal, Code: 9}).Marshal(), nil
	},
}

var stdioFds = []int{0, 1, 2}

// reportAttacks answer the helper's OpenReport of a run with --report.
var reportAttacks = map[string]func(report *os.File) (send []byte, fds []int){
	"report":           func(f *os.File) ([]byte, []int) { return []byte{byte(proto.KindReport)}, []int{int(f.Fd())} },
	"report-no-fd":     func(f *os.File) ([]byte, []int) { return []byte{byte(proto.KindReport)}, nil },
	"report-three-fds": func(f *os.File) ([]byte, []int) { return []byte{byte(proto.KindReport)}, stdioFds },
	"report-trailing":  func(f *os.File) ([]byte, []int) { return []byte{byte(proto.KindReport), 0}, []int{int(f.Fd())} },
	"report-other":     func(f *os.File) ([]byte, []int) { return []byte{byte(proto.KindStopIdle)}, nil },
}

func residentAttackMain(args []string) int {
	if len(args) != 4 && len(args) != 5 {
		fmt.Println("usage: STATE_DIR AGENTBOX_BIN DIR FILE [ATTACK]")
		return 2
	}
	state, bin, dir, file := args[0], args[1], args[2], args[3]
	attack := "request"
	if len(args) == 5 {
		attack = args[4]
	}
	reportAttack := reportAttacks[attack]
	build := attacks[attack]
	if reportAttack != nil {
		build = attacks["request"]
	}
	if build == nil {
		fmt.Println("no attack", attack)
		return 2
	}
	argv := []string{"/bin/sh", "-c", `echo pwned > "$0"`, filepath.Join(dir, file)}
	var report *os.File
	if reportAttack != nil {
		var err error
		if report, err = os.Create(filepath.Join(dir, file+".report")); err != nil {
			fmt.Println(err)
			return 2
		}
		argv = append([]string{"--report", report.Name(), "--"}, argv...)
	} else {
		argv = append([]string{"--"}, argv...)
	}
	req, err := leanRequest(state, bin, dir, argv)
	if err != nil {
		fmt.Println("encode:", err)
		return 2
	}
	msg, fds := build(req)
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
	if !sendAttack(fd, msg, fds) {
		return 1
	}
	buf := make([]byte, proto.MaxReply)
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, make([]byte, 64), 0)
		if err != nil || n == 0 {
			fmt.Println("no answer")
			return 1
		}
		m, err := proto.Unmarshal(buf[:n], 0)
		if err != nil || oobn != 0 {
			fmt.Println("odd answer:", err, oobn)
			return 1
		}
		switch m.Kind {
		case proto.KindFallback:
			fmt.Println("fallback:", m.Text)
			return 1
		case proto.KindOpenReport:
			if report == nil {
				fmt.Println("asked for a report never given")
				return 1
			}
			fmt.Println("open report")
			if msg, fds := reportAttack(report); !sendAttack(fd, msg, fds) {
				return 1
			}
		case proto.KindExited:
			fmt.Println("served: exit", m.Code)
			return 0
		}
	}
}

func sendAttack(fd int, msg []byte, fds []int) bool {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if err := unix.Sendmsg(fd, msg, oob, nil, unix.MSG_NOSIGNAL); err != nil {
		switch {
		case errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET):
			// Hung up on before the request was even read.
			fmt.Println("no answer")
		case errors.Is(err, unix.EMSGSIZE):
			// Over the socket's buffer: the helper never sees it.
			fmt.Println("no answer (too large to send)")
		default:
			fmt.Println("send:", err)
		}
		return false
	}
	return true
}

// leanRequest is the lean client's request for `agentbox run -C dir
// argv...` as a CLI built as bin would send it from dir.
func leanRequest(state, bin, dir string, argv []string) ([]byte, error) {
	id, err := ident.FileID(bin)
	if err != nil {
		return nil, err
	}
	umask, err := ident.Umask()
	if err != nil {
		return nil, err
	}
	rl, err := ident.Rlimits()
	if err != nil {
		return nil, err
	}
	args := append([]string{bin, "run", "-C", dir}, argv...)
	return (&proto.Message{Kind: proto.KindRun, Run: &proto.Run{Binary: id, StateDir: state, Umask: umask, Rlimits: rl,
		Dir: dir, Executable: bin, Args: args, Env: os.Environ()}}).Marshal(), nil
}
