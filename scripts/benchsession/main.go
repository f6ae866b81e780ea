// Command benchsession is scripts/bench.sh's probe for the library
// Session: it prepares one session for the workspace given as its
// argument, then, for every line read on stdin, runs `true` in the
// session and answers "ok" on stdout. bench.sh times each line's round
// trip, alternating with the other tools in the same loop. At the end it
// prints the peak memory of itself and of the session's sandbox on stderr.
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/agentbox/agentbox/policy"
	"github.com/agentbox/agentbox/sandbox"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: benchsession WORKSPACE")
		os.Exit(2)
	}
	pol, err := policy.Resolve(policy.Options{Cwd: os.Args[1]})
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchsession:", err)
		os.Exit(1)
	}
	s, err := sandbox.NewSession(pol)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchsession:", err)
		os.Exit(1)
	}
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		if err := s.Command(context.Background(), "true").Run(); err != nil {
			fmt.Fprintln(os.Stderr, "benchsession: true:", err)
			os.Exit(1)
		}
		out.WriteString("ok\n")
		out.Flush()
	}
	fmt.Fprintf(os.Stderr, "benchsession: peak RSS: caller %s, session sandbox %s\n", hwm("self"), hwm(zygote()))
	s.Close()
}

// zygote finds the session's init, this process's child named agentbox-init.
func zygote() string {
	ents, _ := os.ReadDir("/proc")
	me := fmt.Sprint(os.Getpid())
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) > 3 && f[3] == me && strings.Contains(f[1], "exe") {
			return e.Name()
		}
	}
	return "none"
}

func hwm(pid string) string {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return "?"
}
