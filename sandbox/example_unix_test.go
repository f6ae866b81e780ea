//go:build linux || darwin

package sandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/policy"
	"github.com/agentbox/agentbox/sandbox"
)

// workspace makes a throwaway workspace for the examples.
func workspace() string {
	dir, err := os.MkdirTemp("", "example-workspace-")
	if err != nil {
		log.Fatal(err)
	}
	dir, err = filepath.EvalSymlinks(dir)
	if err != nil {
		log.Fatal(err)
	}
	return dir
}

// A command may write its workspace, and nothing outside the writable
// roots: the write to the home directory fails.
func ExampleCommand() {
	ws := workspace()
	defer os.RemoveAll(ws)
	pol, err := policy.Resolve(policy.Options{Cwd: ws})
	if err != nil {
		log.Fatal(err)
	}
	out, err := sandbox.Command(pol, "sh", "-c", `echo hello > greeting; cat greeting; echo x > "$HOME/agentbox-example" 2>/dev/null || echo "home is read-only"`).Output()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(out))
	// Output:
	// hello
	// home is read-only
}

// Every finished command carries a run report, the object `agentbox run
// --report FILE` writes.
func ExampleCmd_Report() {
	ws := workspace()
	defer os.RemoveAll(ws)
	pol, err := policy.Resolve(policy.Options{Cwd: ws})
	if err != nil {
		log.Fatal(err)
	}
	c := sandbox.Command(pol, "sh", "-c", "exit 3")
	err = c.Run()
	fmt.Println(err)
	b, err := json.Marshal(c.Report.Network)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Report.ExitCode, string(b))
	// Where the command's /tmp is on the host (this workspace's own).
	for _, t := range c.Report.Tmp {
		fmt.Println(t.Path, filepath.Base(t.Host))
	}
	// Output:
	// exit status 3
	// 3 {"mode":"off","allowed":[],"denied":[]}
	// /tmp tmp
}

// A session prepares the sandbox once; each command in it is as isolated
// as a lone one, and files in the workspace persist between them.
func ExampleSession() {
	ws := workspace()
	defer os.RemoveAll(ws)
	pol, err := policy.Resolve(policy.Options{Cwd: ws})
	if err != nil {
		log.Fatal(err)
	}
	s, err := sandbox.NewSession(pol)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Command(ctx, "sh", "-c", "echo 1 > count").Run(); err != nil {
		log.Fatal(err)
	}
	out, err := s.Command(ctx, "cat", "count").Output()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(out))
	// Output: 1
}
