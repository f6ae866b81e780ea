package winapi

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/windows/acl"
	"github.com/agentbox/agentbox/internal/windows/sid"
)

// makeLink makes link point at target: a symbolic link, or a junction
// (mklink /J, no privilege needed) when symlinks are not allowed.
func makeLink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err == nil {
		if _, err := os.Lstat(link); err == nil {
			return
		}
		os.Remove(link)
	}
	out, err := exec.Command("cmd", "/c", "mklink", "/J", link, target).CombinedOutput()
	if _, lerr := os.Lstat(link); err != nil || lerr != nil {
		// Wine 8: os.Symlink reports success and leaves no link.
		t.Skipf("cannot make a symlink or junction here (unverified under Wine): %v %v: %s", err, lerr, out)
	}
}

// The link calls address the link object by handle (the call sequence
// runs under Wine; the ACE read back only on Windows, which stores DACLs).
func TestFileStoreLinkObject(t *testing.T) {
	dir, err := os.MkdirTemp("", "agentbox-link")
	if err != nil {
		t.Fatal(err)
	}
	target, link := filepath.Join(dir, "target"), filepath.Join(dir, "link")
	defer func() { os.Remove(link); os.Remove(target); os.Remove(dir) }()
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	var st FileStore
	if is, err := st.IsLink(target); err != nil || is {
		t.Fatalf("IsLink(target) = %v, %v", is, err)
	}
	if _, err := st.IsLink(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("IsLink(missing) = %v", err)
	}
	// The handle-based calls on a plain directory (FILE_FLAG_OPEN_REPARSE_POINT
	// opens a non-link normally): what Wine can run.
	d, err := st.GetLinkDACL(target)
	if err != nil {
		t.Fatalf("GetLinkDACL: %v", err)
	}
	if err := st.SetLinkDACL(target, d, false); err != nil {
		t.Fatalf("SetLinkDACL: %v", err)
	}
	makeLink(t, target, link)
	if is, err := st.IsLink(link); err != nil || !is {
		t.Fatalf("IsLink(link) = %v, %v", is, err)
	}
	s, _ := sid.New()
	pl := acl.Plan{Entries: []acl.Entry{{Path: link, OnLink: true,
		ACE: acl.ACE{Deny: true, Flags: acl.ObjectInherit | acl.ContainerInherit, Mask: acl.DenyWrite, SID: s}}}}
	if _, err := acl.Apply(st, pl); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	got, err := st.GetLinkDACL(link)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, s) {
		if IsWine() {
			t.Logf("Wine does not store ACLs: link DACL %s (unverified under Wine)", got)
		} else {
			t.Errorf("link object DACL %s lacks the deny for %s", got, s)
		}
	}
	if _, err := acl.Revoke(st, []string{link}, s); err != nil {
		t.Errorf("Revoke: %v", err)
	}
}

// A writable root or protected path deeper than MAX_PATH: the security
// calls get the \\?\ form (package os adds it for its own calls only).
func TestFileStoreLongPath(t *testing.T) {
	dir, err := os.MkdirTemp("", "agentbox-long")
	if err != nil {
		t.Fatal(err)
	}
	deep := dir
	var made []string
	for len(deep) < 300 {
		deep = filepath.Join(deep, strings.Repeat("d", 40))
		made = append(made, deep)
	}
	defer func() {
		for i := len(made) - 1; i >= 0; i-- {
			os.Remove(made[i])
		}
		os.Remove(dir)
	}()
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	var st FileStore
	d, err := st.GetDACL(deep)
	if err != nil {
		t.Fatalf("GetDACL of a %d-character path: %v", len(deep), err)
	}
	parsed, err := acl.ParseDACL(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetDACL(deep, parsed.Explicit(), false); err != nil {
		t.Errorf("SetDACL of a %d-character path: %v", len(deep), err)
	}
	if is, err := st.IsLink(deep); err != nil || is {
		t.Errorf("IsLink of a %d-character path = %v, %v", len(deep), is, err)
	}
}
