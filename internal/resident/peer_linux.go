package resident

import "github.com/agentbox/agentbox/internal/resident/ident"

// checkPeer authenticates the process at the other end of the unix
// socket fd: this user, outside every sandbox (see package ident).
func checkPeer(fd int, allThreads bool) (int, error) { return ident.Check(fd, allThreads) }
