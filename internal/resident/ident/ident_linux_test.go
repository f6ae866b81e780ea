package ident

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

func TestUmask(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	if m, err := Umask(); err != nil || m != 0o027 {
		t.Fatalf("Umask() = %o, %v; want 27", m, err)
	}
}

// A file rewritten in place, same size, is another build.
func TestFileID(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bin")
	os.WriteFile(p, []byte("one"), 0o755)
	a, err := FileID(p)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := FileID(p); b != a {
		t.Fatalf("the same file: %q then %q", a, b)
	}
	f, _ := os.OpenFile(p, os.O_WRONLY, 0)
	f.WriteAt([]byte("two"), 0)
	f.Close()
	if b, _ := FileID(p); b == a {
		t.Fatalf("rewritten in place, same identity %q", a)
	}
	if _, err := FileID(p + ".missing"); err == nil {
		t.Fatal("a missing file has an identity")
	}
}

func TestRlimits(t *testing.T) {
	rl, err := Rlimits()
	if err != nil || len(rl) != RlimitCount {
		t.Fatalf("Rlimits() = %v, %v", rl, err)
	}
	var l syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_STACK, &l)
	if rl[syscall.RLIMIT_STACK] != [2]uint64{l.Cur, l.Max} {
		t.Fatalf("RLIMIT_STACK %v, want %v", rl[syscall.RLIMIT_STACK], l)
	}
}

func TestParsing(t *testing.T) {
	var got []string
	for l := range lines([]byte("a: 1\n\nb:\t2 \r\nlast")) {
		got = append(got, l)
	}
	if !slices.Equal(got, []string{"a: 1", "", "b:\t2 \r", "last"}) {
		t.Fatalf("lines: %q", got)
	}
	if k, v, ok := cut("Seccomp_filters:\t2", ':'); !ok || k != "Seccomp_filters" || trimSpace(v) != "2" {
		t.Fatalf("cut: %q %q %v", k, v, ok)
	}
	if _, _, ok := cut("no colon", ':'); ok {
		t.Fatal("cut found a colon")
	}
}

// Our own facts: the namespaces and the leader's seccomp state.
func TestSelfFacts(t *testing.T) {
	f, err := selfFacts()
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range nsNames {
		if len(f.ns[i]) < len(n)+3 || f.ns[i][:len(n)+2] != n+":[" {
			t.Errorf("ns/%s reads %q", n, f.ns[i])
		}
	}
	if len(f.threads) != 1 || f.threads[0].seccomp == "" || f.threads[0].nnp == "" {
		t.Errorf("leader facts %+v", f.threads)
	}
}

// A peer with other groups or capabilities (another login's
// supplementary groups, a process that dropped capabilities) is not us:
// the helper would read the client's files and start its command with
// credentials the client does not have.
func TestSameFactsCredentials(t *testing.T) {
	me, err := selfFacts()
	if err != nil {
		t.Fatal(err)
	}
	if me.threads[0].creds == "" {
		t.Fatal("no credentials read")
	}
	same := *me
	if err := sameFacts(me, &same); err != nil {
		t.Fatalf("ourselves: %v", err)
	}
	other := *me
	th := me.threads[0]
	th.creds += "Groups:4242;"
	other.threads = []threadFacts{me.threads[0], th}
	if err := sameFacts(me, &other); err == nil {
		t.Fatal("a thread with other groups passed")
	}
}

// A peer in another cgroup (its memory limit) or under another security
// label would have its command run outside them: not us.
func TestSameFactsCgroupAndLabel(t *testing.T) {
	me, err := selfFacts()
	if err != nil {
		t.Fatal(err)
	}
	if me.cgroup == "" {
		t.Fatal("our cgroup was not read")
	}
	for name, edit := range map[string]func(*facts){
		"cgroup": func(f *facts) { f.cgroup += "0::/other.scope\n" },
		"label":  func(f *facts) { f.label = "snap.agent (enforce)" },
	} {
		other := *me
		edit(&other)
		if err := sameFacts(me, &other); err == nil {
			t.Errorf("a peer with another %s passed", name)
		}
	}
}
