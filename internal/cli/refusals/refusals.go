// Package refusals prints the network refusals of a run the way agentbox's
// CLI and its MCP server show them at the end of a command.
package refusals

import (
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/agentbox/agentbox/internal/netpolicy"
	"github.com/agentbox/agentbox/sandbox"
)

// Write prints what the network refused the run. With an allow-list, one
// line per refused destination, "agentbox: network: refused host:port
// (reason[, N times])", or "refused the name host (...)" for a look-up
// the sandbox's name server refused. With the network off, one line for them all,
// naming the host asked for most and how to allow it:
// "agentbox: network is off: refused HOST (and N more); allow a host
// with --allow-domain HOST". A nil report, one without a network section
// or without refusals prints nothing.
func Write(w io.Writer, r *sandbox.RunReport) {
	if r == nil || r.Network == nil || len(r.Network.Denied) == 0 {
		return
	}
	if r.Network.Mode == sandbox.NetworkOff {
		writeOff(w, r.Network.Denied)
		return
	}
	for _, d := range r.Network.Denied {
		times := ""
		if d.Count > 1 {
			times = fmt.Sprintf(", %d times", d.Count)
		}
		if d.Port == 0 {
			// A look-up the sandbox's name server refused.
			fmt.Fprintf(w, "agentbox: network: refused the name %s (%s%s)\n", d.Host, d.Reason, times)
			continue
		}
		fmt.Fprintf(w, "agentbox: network: refused %s (%s%s)\n", net.JoinHostPort(d.Host, strconv.Itoa(int(d.Port))), d.Reason, times)
	}
}

// writeOff is Write's line for a run without network. A host is counted
// once whether it was looked up, asked of the proxy or connected to; the
// one named is the one asked for most (the first by name on a tie), and
// only a host refused because the network is off (not a malformed
// request) is offered to --allow-domain.
func writeOff(w io.Writer, denied []sandbox.NetworkDenied) {
	counts := map[string]int{}
	var hosts []string
	off := map[string]bool{}
	for _, d := range denied {
		if _, ok := counts[d.Host]; !ok {
			hosts = append(hosts, d.Host)
		}
		counts[d.Host] += d.Count
		if d.Reason == netpolicy.ReasonNetworkOff {
			off[d.Host] = true
		}
	}
	top := hosts[0]
	for _, h := range hosts[1:] {
		if off[h] && !off[top] || off[h] == off[top] && counts[h] > counts[top] {
			top = h
		}
	}
	line := "agentbox: network is off: refused " + top
	if len(hosts) > 1 {
		line += fmt.Sprintf(" (and %d more)", len(hosts)-1)
	}
	if off[top] {
		line += "; allow a host with --allow-domain " + top
	}
	fmt.Fprintln(w, line)
}

// GitWritesHint prints how to let git write, for a command that exited
// non-zero after a write under a .git directory (path) was refused
// because allow_git_writes is off.
//
// It is the seam for the filesystem section of the run report: agentbox
// does not yet observe refused writes (the observer of refused file
// operations is to come), so nothing calls it today; once the report
// lists refused writes, Write calls it for the first one under .git of a
// run that failed, at most once.
func GitWritesHint(w io.Writer, path string) {
	fmt.Fprintf(w, "agentbox: a write to %s was refused: .git is read-only in the sandbox; to let git commit, run with --allow-git-writes (or set allow_git_writes = true in [sandbox_workspace_write])\n", path)
}
