// Command agentbox-setup does the administrator part of agentbox's
// elevated Windows sandbox: sandbox users, encrypted credentials, firewall
// rules, read grants, and their removal. It is its own executable so that
// only it carries a requireAdministrator manifest; `agentbox setup` and
// `agentbox cleanup` start it through the UAC prompt with one encoded
// request argument. Run those instead of this.
package main

//go:generate go run github.com/tc-hib/go-winres@v0.3.3 simply --arch amd64,arm64 --manifest cli --admin --product-name agentbox-setup --file-description "agentbox elevated sandbox setup"

import (
	"os"

	"github.com/agentbox/agentbox/internal/windows/setup"
)

func main() {
	os.Exit(setup.Main(os.Args[1:], os.Stdout))
}
