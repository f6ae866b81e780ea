// Command benchsession is scripts/bench.sh's probe for sessions. For
// every line read on stdin it runs `true` once and answers "ok" on stdout,
// so that bench.sh can alternate it with the other tools in one loop:
//
//	benchsession WORKSPACE              through a library Session
//	benchsession -mcp AGENTBOX WORKSPACE through `AGENTBOX mcp -C WORKSPACE`,
//	                                     with the official SDK's client
//
// BENCHSESSION_ALLOW=PATTERN[,PATTERN...] gives the library session's
// policy a network allow-list (as --allow-domain would), so that each
// command gets its proxy listeners; BENCHSESSION_CONFIG=FILE resolves
// the library session's policy with that config file.
//
// At the end it prints on stderr the median, p10 and p90 of the time each
// command took as seen by the caller (Run, or CallTool: the client round
// trip included), and the peak memory of the processes involved.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/policy"
	"github.com/agentbox/agentbox/sandbox"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "benchsession:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var once func() error
	var peaks func() string
	var closeAll func()
	switch {
	case len(args) == 1:
		var allow []string
		if v := os.Getenv("BENCHSESSION_ALLOW"); v != "" {
			allow = strings.Split(v, ",")
		}
		var cfg *policy.Config
		if path := os.Getenv("BENCHSESSION_CONFIG"); path != "" {
			var err error
			if cfg, err = policy.LoadConfig(path); err != nil {
				return err
			}
		}
		pol, err := policy.Resolve(policy.Options{Cwd: args[0], AllowDomains: allow, Config: cfg})
		if err != nil {
			return err
		}
		s, err := sandbox.NewSession(pol)
		if err != nil {
			return err
		}
		closeAll = func() { s.Close() }
		once = func() error { return s.Command(context.Background(), "true").Run() }
		peaks = func() string {
			return fmt.Sprintf("caller %s KiB, session sandbox %s KiB", hwm("self"), hwm(childNamed(os.Getpid(), "exe")))
		}
	case len(args) == 3 && args[0] == "-mcp":
		cmd := exec.Command(args[1], "mcp", "-C", args[2])
		cmd.Stderr = os.Stderr
		client := mcp.NewClient(&mcp.Implementation{Name: "benchsession", Version: "v0"}, nil)
		cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			return err
		}
		closeAll = func() { cs.Close() }
		once = func() error {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"command": []string{"true"}}})
			if err != nil {
				return err
			}
			var out struct {
				ExitCode int `json:"exit_code"`
			}
			b, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(b, &out); err != nil || out.ExitCode != 0 || res.IsError {
				return fmt.Errorf("run true: %s", b)
			}
			return nil
		}
		peaks = func() string {
			pid := cmd.Process.Pid
			return fmt.Sprintf("client %s KiB, agentbox mcp %s KiB, its session sandbox %s KiB",
				hwm("self"), hwm(fmt.Sprint(pid)), hwm(childNamed(pid, "exe")))
		}
	default:
		return errors.New("usage: benchsession [-mcp AGENTBOX] WORKSPACE")
	}
	var times []time.Duration
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		start := time.Now()
		if err := once(); err != nil {
			return err
		}
		times = append(times, time.Since(start))
		out.WriteString("ok\n")
		out.Flush()
	}
	p := peaks()
	closeAll()
	if len(times) == 0 {
		return nil
	}
	slices.Sort(times)
	us := func(q float64) int64 { return times[int(q*float64(len(times)-1))].Microseconds() }
	fmt.Fprintf(os.Stderr, "in-process: median %d us, p10 %d us, p90 %d us, n %d; peak RSS: %s\n", us(0.5), us(0.1), us(0.9), len(times), p)
	return nil
}

// childNamed finds a child of pid whose command name is comm.
func childNamed(pid int, comm string) string {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) > 3 && f[3] == fmt.Sprint(pid) && f[1] == "("+comm+")" {
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
			return strings.Fields(v)[0]
		}
	}
	return "?"
}
