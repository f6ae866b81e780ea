package contract

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// TestRelay: signals reach send in the order they came. (That none
// does after stop is not observable without a race: stop does not wait
// for a send under way, as the exit path must not.)
func TestRelay(t *testing.T) {
	sigs := make(chan os.Signal, 4)
	got := make(chan os.Signal, 4)
	stop := Relay(sigs, func(s os.Signal) { got <- s })
	sigs <- syscall.SIGTERM
	sigs <- os.Interrupt
	for _, want := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		select {
		case s := <-got:
			if s != want {
				t.Fatalf("relayed %v, want %v", s, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%v was not relayed", want)
		}
	}
	stop()
}
