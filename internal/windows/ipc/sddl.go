package ipc

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
)

// PipeSDDL is the security descriptor of the runner pipe: a protected DACL
// with one ACE, full access for the sandbox user's SID. agentbox, which
// creates the pipe, holds its server handle already and needs no ACE; no
// other account (not even the real user's other processes, nor
// Administrators) can open the client end.
func PipeSDDL(userSID string) (string, error) {
	if !strings.HasPrefix(userSID, "S-1-") || strings.ContainsAny(userSID, "();: ") {
		return "", fmt.Errorf("ipc: %q is not a SID string", userSID)
	}
	return "D:P(A;;GA;;;" + userSID + ")", nil
}

// PipeName returns a fresh, unguessable pipe path. The random part keeps
// another process from pre-creating the name (squatting) before we do;
// FILE_FLAG_FIRST_PIPE_INSTANCE then makes the creation fail if it did.
func PipeName() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("ipc: pipe name: %w", err)
	}
	return `\\.\pipe\agentbox-runner-` + hex.EncodeToString(b[:]), nil
}
