// Package stage is the code that runs only in agentbox re-executed as a
// sandbox's stage (a lone run's init, its degraded reaper, a session's
// zygote and mounter): it builds the sandbox from inside, hardens what the
// command is forked from, runs the command and reports on it.
package stage

import "github.com/agentbox/agentbox/internal/linux/spec"

// The contract with agentbox is package spec's; this package's code names
// its spec variable spec throughout, which would shadow the package at
// each use, so the names it reads are aliased here.
type (
	Spec        = spec.Spec
	Mount       = spec.Mount
	CacheMount  = spec.CacheMount
	Hide        = spec.Hide
	EtcFile     = spec.EtcFile
	PtySpec     = spec.PtySpec
	ReopenSpec  = spec.ReopenSpec
	Unreachable = spec.Unreachable

	message = spec.Message
	zreq    = spec.Request
	zresp   = spec.Answer
)

const (
	BindWritable = spec.BindWritable
	Pin          = spec.Pin
	BindReadOnly = spec.BindReadOnly
	PinLink      = spec.PinLink
	BindPrivate  = spec.BindPrivate
	MakeDir      = spec.MakeDir
	MakeFile     = spec.MakeFile
	BindHost     = spec.BindHost
)

const (
	specFD                = spec.SpecFD
	statusFD              = spec.StatusFD
	controlFD             = spec.ControlFD
	stageEnv              = spec.StageEnv
	stageValue            = spec.StageValue
	stageArg0             = spec.StageArg0
	reaperArg0            = spec.ReaperArg0
	reaperValue           = spec.ReaperValue
	initFDsEnv            = spec.InitFDsEnv
	maxPacket             = spec.MaxPacket
	maxBigRequest         = spec.MaxBigRequest
	maxHeld               = spec.MaxHeld
	handoverOK            = spec.HandoverOK
	handoverNoTransparent = spec.HandoverNoTransparent
	maxHandoverText       = spec.MaxHandoverText
)

var (
	sandboxDevices = spec.SandboxDevices
	devNumber      = spec.DevNumber
)
