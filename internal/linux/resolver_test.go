package linux

import (
	"slices"
	"strings"
	"testing"
)

func TestResolverFiles(t *testing.T) {
	host := "127.0.0.1 localhost\n127.0.1.1\tbox.example box # mine\n::1 localhost ip6-localhost\n" +
		"10.0.0.5 intranet\nff02::1 ip6-allnodes\n127.0.0.2 evil\x1b[2J ok.local\nnot-an-address foo\n"
	files, names := ResolverFiles([]byte(host), "box")
	if len(files) != 2 || files[0].Path != "/etc/resolv.conf" || files[1].Path != "/etc/hosts" {
		t.Fatalf("files: %+v", files)
	}
	if !strings.Contains(files[0].Content, "\nnameserver 127.0.0.1\n") || strings.Count(files[0].Content, "nameserver") != 1 {
		t.Errorf("resolv.conf: %q", files[0].Content)
	}
	var lines []string
	for _, l := range strings.Split(files[1].Content, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	want := []string{"127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback", "127.0.1.1\tbox.example box", "127.0.0.2\tok.local"}
	if !slices.Equal(lines, want) {
		t.Errorf("hosts:\n got %q\nwant %q", lines, want)
	}
	if w := []string{"localhost", "ip6-localhost", "ip6-loopback", "box.example", "box", "ok.local"}; !slices.Equal(names, w) {
		t.Errorf("names %q, want %q", names, w)
	}
	// The host name gets an address when the host's file has none for it.
	files, names = ResolverFiles(nil, "vm-1")
	if !strings.Contains(files[1].Content, "\n127.0.1.1\tvm-1\n") || !slices.Contains(names, "vm-1") {
		t.Errorf("without a hosts file: %q %q", files[1].Content, names)
	}
	// A host name that cannot stand in the file is left out.
	files, _ = ResolverFiles(nil, "a b")
	if strings.Contains(files[1].Content, "a b") {
		t.Errorf("bad host name written: %q", files[1].Content)
	}
}
