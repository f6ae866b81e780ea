package linux

import "github.com/agentbox/agentbox/internal/linux/spec"

// The contract with the stage is package spec's. Its types keep their
// names here for agentbox's callers (package sandbox builds a Spec from
// its parts), and for this package's code, which names its spec variable
// spec throughout: that would shadow the package at each use.
type (
	Spec       = spec.Spec
	MountKind  = spec.MountKind
	Mount      = spec.Mount
	CacheMount = spec.CacheMount
	Hide       = spec.Hide
	EtcFile    = spec.EtcFile
	PtySpec    = spec.PtySpec
	ReopenSpec = spec.ReopenSpec
	// Unreachable is a destination the command could not reach.
	Unreachable = spec.Unreachable

	message = spec.Message
	zreq    = spec.Request
	zresp   = spec.Answer
)

// The mount plan's kinds of step.
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
	specFD        = spec.SpecFD
	statusFD      = spec.StatusFD
	controlFD     = spec.ControlFD
	stageEnv      = spec.StageEnv
	stageValue    = spec.StageValue
	stageArg0     = spec.StageArg0
	reaperArg0    = spec.ReaperArg0
	reaperValue   = spec.ReaperValue
	initFDsEnv    = spec.InitFDsEnv
	maxPacket     = spec.MaxPacket
	maxBigRequest = spec.MaxBigRequest
	maxHeld       = spec.MaxHeld

	handoverNoTransparent = spec.HandoverNoTransparent
	maxHandoverText       = spec.MaxHandoverText
)

var (
	zreqStart      = spec.StartRequest
	sandboxDevices = spec.SandboxDevices
	devNumber      = spec.DevNumber
)
