package contract

// The refusals of a run (file operations of a command that failed,
// network destinations), as every path shows them at the end of a
// command.

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/fsreport"
	"github.com/agentbox/agentbox/policy"
	"github.com/agentbox/agentbox/sandbox"
)

// WriteRefusals prints what the sandbox refused the run: for a command that
// exited non-zero, its refused file operations (writeFiles); then what
// the network refused. With an allow-list, one
// line per refused destination, "agentbox: network: refused host:port
// (reason[, N times])", or "refused the name host (...)" for a look-up
// the sandbox's name server refused. With the network off, one line for them all,
// naming the host asked for most and how to allow it:
// "agentbox: network is off: refused HOST (and N more); allow a host
// with --allow-domain HOST". A nil report, one without a network section
// or without refusals prints nothing.
func WriteRefusals(w io.Writer, r *sandbox.RunReport) {
	if r == nil {
		return
	}
	writeFiles(w, r)
	if r.Network == nil || len(r.Network.Denied) == 0 {
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

// writeOff is WriteRefusals' line for a run without network. A host is counted
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
		if d.Reason == policy.ReasonNetworkOff {
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

// maxFileLines bounds the lines Write prints for the file refusals.
const maxFileLines = 5

// writeFiles prints what the sandbox refused the command's file
// operations, for a command that failed: one line per refusal, "agentbox:
// filesystem: refused OP PATH (REASON[, N times]; HOW TO ALLOW)", at most
// five lines, the fifth counting the rest when there are more.
func writeFiles(w io.Writer, r *sandbox.RunReport) {
	if r.Filesystem == nil || r.ExitCode == 0 {
		return
	}
	var ds []sandbox.FilesystemDenied
	others := 0
	for _, d := range r.Filesystem.Denied {
		if d.Path == fsreport.OtherPaths {
			others += d.Count
			continue
		}
		ds = append(ds, d)
	}
	shown := ds
	if len(ds) > maxFileLines || len(ds) == maxFileLines && others > 0 {
		shown = ds[:maxFileLines-1]
	}
	for _, d := range shown {
		fmt.Fprintf(w, "agentbox: filesystem: refused %s %s (%s)\n", d.Op, d.Path, fileWhy(d))
	}
	if rest := len(ds) - len(shown); rest > 0 || others > 0 {
		more := fmt.Sprintf("%d more", rest)
		if others > 0 {
			more = "more"
		}
		fmt.Fprintf(w, "agentbox: filesystem: refused %s (--report FILE lists them)\n", more)
	}
}

// fileWhy is the parenthesis of a file refusal's line: the rule, how
// often, and the narrowest way to allow it where there is one.
func fileWhy(d sandbox.FilesystemDenied) string {
	why := d.Reason
	if d.Reason == sandbox.FileReasonGit {
		why = ".git is read-only"
	}
	if d.Count > 1 {
		why += fmt.Sprintf(", %d times", d.Count)
	}
	switch d.Reason {
	case sandbox.FileReasonGit:
		why += "; --allow-git-writes to allow"
	case sandbox.FileReasonHidden:
		// Never suggested to the agent (SetSuggest): re-opening a
		// secret is the human's call.
		if d.Op == sandbox.FileOpRead && filepath.IsAbs(d.Path) {
			why += "; --allow-read " + shellQuote(d.Path) + " to allow"
		}
	case sandbox.FileReasonOutside:
		if dir := filepath.Dir(d.Path); filepath.IsAbs(d.Path) && dir != "/" && dir != d.Path {
			why += "; --add-dir " + shellQuote(dir) + " to allow"
		}
	}
	return why
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+,:@%=", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
