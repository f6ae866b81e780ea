package stdio

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The test binary is its own child: STDIO_HELPER names what it does.
func TestMain(m *testing.M) {
	if h := os.Getenv("STDIO_HELPER"); h != "" {
		helper(h)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func helper(name string) {
	switch name {
	case "cat": // stdin to stdout, then the byte count to stderr
		n, _ := io.Copy(os.Stdout, os.Stdin)
		fmt.Fprintf(os.Stderr, "%d\n", n)
	case "big": // 10 MiB to stdout and to stderr, interleaved
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for range 160 {
			os.Stdout.Write(chunk)
			os.Stderr.Write(chunk)
		}
	case "ignore": // never reads its input
	}
}

// run runs the helper with the relay and returns its error.
func run(t *testing.T, helper string, c Config) error {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rl, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	f := rl.Files()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "STDIO_HELPER="+helper)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = f[0], f[1], f[2]
	if err := cmd.Start(); err != nil {
		rl.Abort()
		t.Fatal(err)
	}
	rl.CloseChild()
	rl.Start()
	werr := cmd.Wait()
	if err := rl.Wait(10 * time.Second); err != nil {
		return err
	}
	return werr
}

func TestStdinEOFAndOutput(t *testing.T) {
	in := strings.Repeat("line\n", 1<<20) // 5 MiB, more than any pipe holds
	var out, errb bytes.Buffer
	if err := run(t, "cat", Config{Stdin: strings.NewReader(in), Stdout: &out, Stderr: &errb}); err != nil {
		t.Fatal(err)
	}
	if out.String() != in {
		t.Errorf("stdout: %d bytes, want %d", out.Len(), len(in))
	}
	if got := strings.TrimSpace(errb.String()); got != fmt.Sprint(len(in)) {
		t.Errorf("the child read %s bytes, want %d", got, len(in))
	}
}

func TestNilIsNullDevice(t *testing.T) {
	var out Buffer
	if err := run(t, "cat", Config{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "" {
		t.Errorf("stdout %q, want nothing", out.String())
	}
}

func TestLargeOutputSharedPipe(t *testing.T) {
	var b Buffer
	if err := run(t, "big", Config{Stdout: &b, Stderr: &b}); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(bytes.Repeat([]byte("x"), 20<<20))
	if got := sha256.Sum256(b.Bytes()); got != want {
		t.Errorf("combined output: %d bytes, want %d", len(b.Bytes()), 20<<20)
	}
}

func TestLargeOutputToRelayedFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows relays only consoles; a relayed file takes the Unix copy")
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	never := func(*os.File) bool { return false }
	if err := run(t, "big", Config{Stdout: f, Stderr: io.Discard, Pass: never}); err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 10<<20 {
		t.Errorf("file: %d bytes, want %d", st.Size(), 10<<20)
	}
}

func TestUnreadInputIsNoError(t *testing.T) {
	pr, pw := io.Pipe() // a reader that never ends
	defer pw.Close()
	if err := run(t, "ignore", Config{Stdin: pr}); err != nil {
		t.Fatal(err)
	}
}

type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestOutputErrorReported(t *testing.T) {
	err := run(t, "big", Config{Stdout: failing{}})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("err = %v, want the writer's error", err)
	}
}
