// Package refusals prints the network refusals of a run the way agentbox's
// CLI and its MCP server show them at the end of a command.
package refusals

import (
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/agentbox/agentbox/sandbox"
)

// Write prints one line per destination the allow-list proxy refused,
// "agentbox: network: refused host:port (reason[, N times])". A nil
// report, or one without a network section, prints nothing.
func Write(w io.Writer, r *sandbox.RunReport) {
	if r == nil || r.Network == nil {
		return
	}
	for _, d := range r.Network.Denied {
		times := ""
		if d.Count > 1 {
			times = fmt.Sprintf(", %d times", d.Count)
		}
		fmt.Fprintf(w, "agentbox: network: refused %s (%s%s)\n", net.JoinHostPort(d.Host, strconv.Itoa(int(d.Port))), d.Reason, times)
	}
}
