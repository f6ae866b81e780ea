// Package ipc is the private channel between agentbox and agentbox-runner in
// Windows elevated mode: length-prefixed JSON frames with a size cap, carried
// over a pair of named pipes whose DACL admits only the sandbox user.
//
// The framing and message types are platform-free so they are tested on
// every OS; the pipes themselves live in the _windows files.
package ipc
