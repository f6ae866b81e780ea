// Package deps pins modules that several packages of agentbox are about to
// use, so concurrent work does not fight over go.mod. It is removed once
// every dependency is imported for real.
package deps

import (
	_ "github.com/landlock-lsm/go-landlock/landlock"
	_ "github.com/pelletier/go-toml/v2"
	_ "github.com/spf13/cobra"
	_ "golang.org/x/net/bpf"
	_ "golang.org/x/sys/unix"
)
