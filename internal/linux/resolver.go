package linux

import (
	"bufio"
	"bytes"
	"github.com/agentbox/agentbox/internal/linux/spec"
	"net/netip"
	"slices"
	"strings"
)

// resolvConf names agentbox's name server, on the sandbox's own loopback,
// and nothing else. One try of one second: if the name server cannot
// answer (it answers at once), a look-up still ends soon.
const resolvConf = `# agentbox: the network is off. agentbox answers every name at once with
# "no such name" and lists the names asked for at the end of the run;
# --allow-domain NAME (or --network) opens the network.
nameserver 127.0.0.1
options timeout:1 attempts:1
`

// resolvConfAllowList is resolvConf for a sandbox with an allow-list:
// agentbox answers the names the list admits (with addresses it carries
// to them), and no others.
const resolvConfAllowList = `# agentbox: the sandbox's name server answers the names of the allow-list
# with addresses agentbox carries to them, and every other name at once
# with "no such name" (listed at the end of the run).
nameserver 127.0.0.1
options timeout:1 attempts:1
`

// AllowListResolverFiles are ResolverFiles for a sandbox with an
// allow-list and transparent networking: the same hosts file, and a
// resolv.conf that says what the name server answers.
func AllowListResolverFiles(hosts []byte, hostname string) (files []spec.EtcFile, names []string) {
	files, names = ResolverFiles(hosts, hostname)
	files[0].Content = resolvConfAllowList
	files[1].Content = strings.Replace(files[1].Content, " (the network is off)", "", 1)
	return files, names
}

// maxHostsNames bounds the names kept from the host's /etc/hosts.
const maxHostsNames = 256

// ResolverFiles are the sandbox's /etc/resolv.conf and /etc/hosts when its
// network is off, from the host's /etc/hosts and the host name (the
// sandbox's UTS namespace starts with the host's). The hosts file keeps
// the host's loopback entries (what a command can still reach inside),
// and gives localhost and the host name a loopback address if the host's
// does not: look-ups of the machine's own name keep working. Entries for
// other addresses are left out: nothing would be reachable there, and a
// look-up of such a name reaches agentbox's name server, which records
// it. names are every name of the file, for NO_PROXY.
func ResolverFiles(hosts []byte, hostname string) (files []spec.EtcFile, names []string) {
	var b strings.Builder
	b.WriteString("# agentbox: the sandbox's own hosts file (the network is off): the host's\n# loopback entries, localhost and the machine's name.\n")
	seen := map[string]bool{}    // names
	entries := map[string]bool{} // address and name
	add := func(addr netip.Addr, ns []string) {
		var keep []string
		for _, n := range ns {
			l := strings.ToLower(n)
			e := addr.String() + " " + l
			if entries[e] || len(entries) >= maxHostsNames {
				continue
			}
			entries[e] = true
			keep = append(keep, n)
			if !seen[l] {
				seen[l] = true
				names = append(names, n)
			}
		}
		if len(keep) > 0 {
			b.WriteString(addr.String() + "\t" + strings.Join(keep, " ") + "\n")
		}
	}
	add(netip.MustParseAddr("127.0.0.1"), []string{"localhost"})
	add(netip.IPv6Loopback(), []string{"localhost", "ip6-localhost", "ip6-loopback"})
	sc := bufio.NewScanner(bytes.NewReader(hosts))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		a, err := netip.ParseAddr(f[0])
		if err != nil || !a.Unmap().IsLoopback() || a.Zone() != "" {
			continue
		}
		add(a, slices.DeleteFunc(f[1:], func(n string) bool { return !hostName(n) }))
	}
	if hostName(hostname) && !seen[strings.ToLower(hostname)] {
		add(netip.MustParseAddr("127.0.1.1"), []string{hostname})
	}
	return []spec.EtcFile{{Path: "/etc/resolv.conf", Content: resolvConf}, {Path: "/etc/hosts", Content: b.String()}}, names
}

// hostName reports whether n may stand in a hosts file (and in NO_PROXY):
// letters, digits, '-', '_' and dots, as host names are written.
func hostName(n string) bool {
	if n == "" || len(n) > 253 {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
