package contract

import (
	"os"
	"syscall"
)

// Forwarded are the signals `agentbox run` catches and passes on to its
// command (a user's Ctrl-C, a harness's TERM, a closed terminal's HUP,
// QUIT): agentbox itself waits for the command to end, and exits with
// its status. The lean client (internal/resident/client) keeps a copy
// of this list, as it runs before anything heavy is linked in.
var Forwarded = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// Relay passes each signal that arrives on sigs to send, in order, from
// a goroutine of its own, until stop is called: the one host-side relay
// of a lone run (send signals the command) and of a run the resident
// helper serves (send tells the helper).
func Relay(sigs <-chan os.Signal, send func(os.Signal)) (stop func()) {
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				send(s)
			case <-done:
				return
			}
		}
	}()
	return func() { close(done) }
}
