package elevated

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"
)

// A command that never reads its stdin, with more stdin queued than any
// pipe buffer holds: Kill must return at once and the tree must die within
// seconds (it used to wait on the mutex the stdin feed held while blocked
// writing to the pipe, and the runner's control loop sat in the stdin
// write, deaf to terminate).
func TestKillWithStdinBacklog(t *testing.T) {
	s := spec(t, "sleep")
	s.Stdin = bytes.NewReader(make([]byte, 8<<20))
	p, err := start(context.Background(), s, selfSID(t), selfLaunch(t))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // let the feed fill the pipes
	began := time.Now()
	kerr := make(chan error, 1)
	go func() { kerr <- p.Kill() }()
	select {
	case err := <-kerr:
		if err != nil {
			t.Errorf("Kill: %v", err)
		}
		if d := time.Since(began); d > time.Second {
			t.Errorf("Kill took %v", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Kill did not return within 10s")
	}
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(KillGrace + 10*time.Second):
		t.Fatal("killed command still running")
	}
	if d := time.Since(began); d > KillGrace+5*time.Second {
		t.Errorf("the tree took %v to die", d)
	}
}

// Past the runner's stdin limit, push waits; a command that stops
// reading (broken pipe) drops the queue and releases it.
func TestStdinQueueBoundedAndBroken(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	q := newStdinQueue(8)
	q.push([]byte("12345678")) // full: nobody writes yet
	pushed := make(chan struct{})
	go func() { q.push([]byte("more")); close(pushed) }()
	select {
	case <-pushed:
		t.Fatal("push did not wait on a full queue")
	case <-time.After(200 * time.Millisecond):
	}
	r.Close() // the command is gone
	go q.run(w)
	select {
	case <-pushed:
	case <-time.After(5 * time.Second):
		t.Fatal("push still waiting after the command's stdin broke")
	}
	q.close()
}
