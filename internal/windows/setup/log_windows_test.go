package setup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/windows"
)

// openLog creates the report new inside base\logs and never opens what is
// already at its name (a planted file or link); the setup process no
// longer writes anywhere the caller names.
func TestOpenLogCreatesNewInBase(t *testing.T) {
	tmp, err := os.MkdirTemp("", "agentbox-log")
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(tmp, "agentbox")
	defer func() {
		os.Remove(LogPath(base, strings.Repeat("a", 32)))
		os.Remove(LogPath(base, strings.Repeat("b", 32)))
		os.Remove(filepath.Join(base, LogsDir))
		os.Remove(base)
		os.Remove(tmp)
	}()
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		t.Fatal(err)
	}
	me := u.User.Sid.String()
	id := strings.Repeat("a", 32)
	f, err := openLog(base, id, me)
	if err != nil {
		t.Fatalf("openLog: %v", err)
	}
	f.WriteString("report\n")
	f.Close()
	if b, err := os.ReadFile(LogPath(base, id)); err != nil || string(b) != "report\n" {
		t.Errorf("log = %q, %v", b, err)
	}
	if _, err := openLog(base, id, me); err == nil {
		t.Error("openLog opened an existing file (CREATE_NEW expected)")
	}
	// Something planted at the next name is refused, not written through.
	planted := LogPath(base, strings.Repeat("b", 32))
	os.WriteFile(planted, []byte("planted"), 0o644)
	if f, err := openLog(base, strings.Repeat("b", 32), me); err == nil {
		f.Close()
		t.Error("openLog opened a planted file")
	}
	if b, _ := os.ReadFile(planted); string(b) != "planted" {
		t.Errorf("planted file changed: %q", b)
	}
	if _, err := openLog(base, "../../x", me); err == nil {
		t.Error("openLog accepted a path as id")
	}
}
