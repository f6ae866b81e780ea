package linux

import (
	"github.com/agentbox/agentbox/internal/linux/spec"
	"github.com/agentbox/agentbox/internal/linux/stage"
)

// IsInit reports whether this process is a re-executed stage (package
// stage): the init or, in degraded mode, the reaper above it. RunInit
// runs either.
func IsInit() bool { return stage.IsInit() }

// RunInit runs the stage this process is (see IsInit). It never returns.
func RunInit() { stage.RunInit() }

// PortOwners is the table of a session's port owners (package spec).
type PortOwners = spec.PortOwners

var (
	newPortOwners  = spec.NewPortOwners
	makeDirBeneath = stage.MakeDirBeneath
	replaceEnv     = stage.ReplaceEnv
	readMessage    = spec.ReadMessage
)
