package sandbox

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/policytest"
	"github.com/agentbox/agentbox/policy"
)

// TestCheckPorts: published ports and host ports are carried on Linux
// only; elsewhere a policy with them is refused, naming the option.
func TestCheckPorts(t *testing.T) {
	none := policytest.New(policytest.Fields{Mode: policy.WorkspaceWrite})
	if err := checkPorts(none); err != nil {
		t.Errorf("no ports: %v", err)
	}
	for _, c := range []struct {
		f    policytest.Fields
		name string
	}{
		{policytest.Fields{Mode: policy.WorkspaceWrite, Publish: []policy.PortMap{{Host: 8080, Inner: 3000}}}, "Options.Publish"},
		{policytest.Fields{Mode: policy.WorkspaceWrite, HostPorts: []uint16{5432}}, "Options.HostPorts"},
	} {
		err := checkPorts(policytest.New(c.f))
		if runtime.GOOS == "linux" {
			if err != nil {
				t.Errorf("%s on linux: %v", c.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), runtime.GOOS) {
			t.Errorf("%s on %s: %v; want ErrUnsupported naming the option and the OS", c.name, runtime.GOOS, err)
		}
	}
}
