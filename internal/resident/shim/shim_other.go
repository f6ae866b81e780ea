//go:build !linux

// Package shim is PID 1 of every command agentbox's resident helper runs
// (Linux only).
package shim

// Arg0 is argv[0] of the shim.
const Arg0 = "agentbox-resident-init"
