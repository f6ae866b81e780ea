//go:build linux

package linux

import (
	"archive/zip"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goBin is the directory of the Go toolchain running these tests
// (usually outside hostPATH, such as /usr/local/go/bin).
var goBin string

func needGo(t *testing.T) {
	t.Helper()
	p, err := exec.LookPath("go")
	if err == nil {
		p, err = filepath.EvalSymlinks(p)
	}
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	goBin = filepath.Dir(p)
}

// goModule writes a small module with three packages, one depending on
// another, and tests.
func goModule(t *testing.T, dir string) {
	t.Helper()
	files := map[string]string{
		"go.mod":      "module example.com/m\n\ngo 1.22\n",
		"main.go":     "package main\n\nimport \"example.com/m/b\"\n\nfunc main() { println(b.Twice(21)) }\n",
		"a/a.go":      "package a\n\n// Add adds.\nfunc Add(x, y int) int { return x + y }\n",
		"a/a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(\"bad\")\n\t}\n}\n",
		"b/b.go":      "package b\n\nimport \"example.com/m/a\"\n\n// Twice doubles.\nfunc Twice(x int) int { return a.Add(x, x) }\n",
		"b/b_test.go": "package b\n\nimport \"testing\"\n\nfunc TestTwice(t *testing.T) {\n\tif Twice(2) != 4 {\n\t\tt.Fatal(\"bad\")\n\t}\n}\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func goEnv(fx *fixture) []string {
	return append(fx.env(), "PATH="+goBin+":"+hostPATH, "GOTOOLCHAIN=local", "GOPROXY=off", "GOFLAGS=", "CGO_ENABLED=0")
}

const goScript = `set -e
cd "$WS/mod"
go build ./...
go vet ./...
go test ./...
echo GOCACHE=$(go env GOCACHE)
`

// TestToolCacheGo: go build, vet and test work in the sandbox for a user
// with no Go cache at all (private per-workspace caches), then with a host
// cache (overlays); the second run of each kind reuses the per-workspace
// layer (go test reports "(cached)"); the host's cache is unchanged and a
// file planted at the cache's path inside never reaches it.
func TestToolCacheGo(t *testing.T) {
	needGo(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		goModule(t, filepath.Join(fx.ws, "mod"))
		chownR(t, fx.ws, u)
		hostCache := filepath.Join(fx.home, ".cache", "go-build")
		modCache := filepath.Join(fx.home, "go", "pkg", "mod")
		o := runOpts{dir: fx.ws, env: goEnv(fx), timeout: 240e9}
		sandboxGo := func(script string) result {
			return runWith(t, u, o, "run", "-C", fx.ws, "--", "/bin/sh", "-c", script)
		}

		// 1. No cache on the host: private per-workspace directories.
		r := sandboxGo(goScript)
		if r.code != 0 {
			t.Fatalf("go build/vet/test without a host cache failed: %v", r)
		}
		if strings.Contains(r.stdout, "GOCACHE="+hostCache+"\n") {
			t.Errorf("without a host cache GOCACHE should be private, got %q", r.stdout)
		}
		assertAbsent(t, hostCache)
		assertAbsent(t, filepath.Join(fx.home, "go"))
		r = sandboxGo(goScript)
		if r.code != 0 || !strings.Contains(r.stdout, "(cached)") {
			t.Fatalf("second run did not reuse the private cache (want go test \"(cached)\"): %v", r)
		}

		// 2. A host cache exists: overlays, host never written.
		h := host(t, u, runOpts{dir: filepath.Join(fx.ws, "mod"), env: goEnv(fx), timeout: 240e9}, goBin+"/go", "build", "./...")
		if h.code != 0 {
			t.Fatalf("host go build: %v", h)
		}
		if err := os.MkdirAll(modCache, 0o755); err != nil {
			t.Fatal(err)
		}
		chownR(t, fx.home, u)
		before := snapshot(t, fx.home)
		r = sandboxGo(goScript + `
echo planted > "$(go env GOCACHE)/planted"
echo planted > "$(go env GOMODCACHE)/planted"
mkdir -p "$(go env GOMODCACHE)/ro/dir" && touch "$(go env GOMODCACHE)/ro/dir/f" && chmod -R a-w "$(go env GOMODCACHE)/ro"
rm -rf "$(go env GOCACHE)/00"
go clean -modcache 2>/dev/null || true # empties the view; the mount point itself stays
`)
		if r.code != 0 {
			t.Fatalf("go build/vet/test with a host cache failed: %v", r)
		}
		if !strings.Contains(r.stdout, "GOCACHE="+hostCache+"\n") {
			t.Errorf("with a host cache GOCACHE should be the host path (overlaid), got %q", r.stdout)
		}
		if d := diffSnapshots(before, snapshot(t, fx.home), nil); len(d) > 0 {
			t.Errorf("the host's caches changed:\n%s", strings.Join(d, "\n"))
		}
		assertAbsent(t, filepath.Join(hostCache, "planted"))
		assertAbsent(t, filepath.Join(modCache, "planted"))
		r = sandboxGo(goScript + `test -f "$(go env GOCACHE)/planted" && echo STILL-PLANTED`)
		if r.code != 0 || !strings.Contains(r.stdout, "(cached)") || !strings.Contains(r.stdout, "STILL-PLANTED") {
			t.Fatalf("second overlay run did not reuse the per-workspace upper layer: %v", r)
		}
		if d := diffSnapshots(before, snapshot(t, fx.home), nil); len(d) > 0 {
			t.Errorf("the host's caches changed:\n%s", strings.Join(d, "\n"))
		}

		// 3. cleanup removes the layers, read-only directories (as Go's
		// module cache makes them) included.
		layers := filepath.Join(u.home, ".state", "agentbox", "toolcache")
		if _, err := os.Stat(layers); err != nil {
			t.Fatalf("no per-workspace layers: %v", err)
		}
		if r := runWith(t, u, o, "cleanup"); r.code != 0 || !strings.Contains(r.stdout, "removed tool cache layer") {
			t.Fatalf("cleanup: %v", r)
		}
		assertAbsent(t, layers)

		// 4. tool_caches = "off": the caches stay read-only, as before.
		cfg := filepath.Join(fx.dir, "off.toml")
		if err := os.WriteFile(cfg, []byte("[sandbox_workspace_write]\ntool_caches = \"off\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r = runWith(t, u, o, "run", "-C", fx.ws, "--config", cfg, "--", "/bin/sh", "-c", `touch "$HOME/.cache/go-build/x" && echo WROTE`)
		if strings.Contains(r.stdout, "WROTE") {
			t.Errorf("with tool_caches = off the host cache was writable: %v", r)
		}
		assertAbsent(t, filepath.Join(hostCache, "x"))
	})
}

// TestToolCacheAttacks: caches inside a writable root (XDG_CACHE_HOME and
// npm_config_cache in the workspace; a workspace holding $HOME is
// refused), one reached through a symlink on the host, with agentbox's
// state directory inside the workspace too. Writes land in the overlay only;
// symlinks inside the host cache lead nowhere writable; the directories and
// links on the way cannot be renamed or replaced; the upper layer cannot be
// written at its own path.
func TestToolCacheAttacks(t *testing.T) {
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		home := filepath.Join(fx.ws, "home")
		state := filepath.Join(fx.ws, "state")
		realCache := filepath.Join(fx.out, "cache")
		for _, d := range []string{home, state, filepath.Join(realCache, "go-build"), filepath.Join(home, ".npm")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(realCache, filepath.Join(home, ".cache")); err != nil {
			t.Fatal(err)
		}
		entry := filepath.Join(realCache, "go-build", "entry")
		npmEntry := filepath.Join(home, ".npm", "entry")
		for _, f := range []string{entry, npmEntry} {
			if err := os.WriteFile(f, []byte("orig\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(filepath.Join(fx.out, "file.txt"), filepath.Join(realCache, "go-build", "link")); err != nil {
			t.Fatal(err)
		}
		chownR(t, fx.dir, u)
		env := append(fx.env(), "C="+home, "XDG_CACHE_HOME="+filepath.Join(home, ".cache"), "npm_config_cache="+filepath.Join(home, ".npm"), "XDG_STATE_HOME="+state)
		script := `cd /
echo new > "$C/.cache/go-build/entry" && echo COW-OK
echo new > "$C/.npm/entry" && echo COW2-OK
echo x > "$C/.cache/go-build/link" && echo LINK-WROTE
echo x > "$C/.cache/go-build/planted"
mv "$C/.npm" "$C/npm2" && echo MOVED-NPM
mv "$C" "$WS/home2" && echo MOVED-HOME
rm "$C/.cache" && echo RM-LINK
ln -sfn /tmp "$C/.cache" && echo RELINK
for d in "$XDG_STATE_HOME"/agentbox/toolcache/*/*/upper; do
	echo x > "$d/direct" && echo UPPER-WROTE
	rm -rf "$d"/* && echo UPPER-EMPTIED
done
cat "$C/.cache/go-build/entry"
true`
		before := snapshot(t, fx.dir)
		r := runWith(t, u, runOpts{dir: fx.ws, env: env}, "run", "-C", fx.ws, "--", "/bin/sh", "-c", script)
		if r.code != 0 || !strings.Contains(r.stdout, "COW-OK") || !strings.Contains(r.stdout, "COW2-OK") {
			t.Fatalf("copy-on-write writes to the caches failed: %v", r)
		}
		for _, bad := range []string{"LINK-WROTE", "MOVED-NPM", "MOVED-HOME", "RM-LINK", "RELINK", "UPPER-WROTE", "UPPER-EMPTIED"} {
			if strings.Contains(r.stdout, bad) {
				t.Errorf("%s: the attack succeeded: %v", bad, r)
			}
		}
		assertContent(t, entry, "orig\n")
		assertContent(t, npmEntry, "orig\n")
		assertContent(t, filepath.Join(fx.out, "file.txt"), fx.txt)
		assertAbsent(t, filepath.Join(realCache, "go-build", "planted"))
		if d := diffSnapshots(before, snapshot(t, fx.dir), func(p string) bool {
			return strings.HasPrefix(p, state+"/") || p == state
		}); len(d) > 0 {
			t.Errorf("the host changed:\n%s", strings.Join(d, "\n"))
		}
	})
}

// TestToolCacheNpmPip: npm install of a local tarball and pip install of a
// local wheel succeed without the network, and leave the host's caches
// alone.
func TestToolCacheNpmPip(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil || !strings.HasPrefix(npm, "/usr/") {
		t.Skipf("no npm on hostPATH (%v)", err)
	}
	needPython(t)
	if err := exec.Command(python, "-m", "pip", "--version").Run(); err != nil {
		t.Skipf("%s has no pip: %v", python, err)
	}
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		tgz := filepath.Join(fx.ws, "hello-1.0.0.tgz")
		writeTarGz(t, tgz, map[string]string{
			"package/package.json": `{"name":"hello","version":"1.0.0","main":"index.js"}`,
			"package/index.js":     "module.exports = 'hi from hello';\n",
		})
		writeFile(t, filepath.Join(fx.ws, "package.json"), `{"name":"app","version":"1.0.0","private":true}`)
		whl := filepath.Join(fx.ws, "hello-1.0-py3-none-any.whl")
		writeZip(t, whl, map[string]string{
			"hello.py":                     "GREETING = 'hi from wheel'\n",
			"hello-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: hello\nVersion: 1.0\n",
			"hello-1.0.dist-info/WHEEL":    "Wheel-Version: 1.0\nGenerator: agentbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
			"hello-1.0.dist-info/RECORD":   "hello.py,,\nhello-1.0.dist-info/METADATA,,\nhello-1.0.dist-info/WHEEL,,\nhello-1.0.dist-info/RECORD,,\n",
		})
		// A host npm cache exists for the overlay path; pip has none.
		writeFile(t, filepath.Join(fx.home, ".npm", "_cacache", "keep"), "orig\n")
		chownR(t, fx.dir, u)
		before := snapshot(t, fx.home)
		r := runWith(t, u, runOpts{dir: fx.ws, env: append(fx.env(), "npm_config_update_notifier=false"), timeout: 120e9},
			"run", "-C", fx.ws, "--", "/bin/sh", "-c", `set -e
cd "$WS"
npm install --no-audit --no-fund --offline ./hello-1.0.0.tgz
node -e 'console.log(require("hello"))'
`+python+` -m pip install --no-index --disable-pip-version-check --target "$WS/site" ./hello-1.0-py3-none-any.whl
PYTHONPATH="$WS/site" `+python+` -c 'import hello; print(hello.GREETING)'
`)
		if r.code != 0 || !strings.Contains(r.stdout, "hi from hello") || !strings.Contains(r.stdout, "hi from wheel") {
			t.Fatalf("npm/pip install in the sandbox failed: %v", r)
		}
		if d := diffSnapshots(before, snapshot(t, fx.home), nil); len(d) > 0 {
			t.Errorf("the host's caches changed:\n%s", strings.Join(d, "\n"))
		}
	})
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeTarGz(t *testing.T, p string, files map[string]string) {
	t.Helper()
	writeFile(t, p, string(tarGz(t, files)))
}

func writeZip(t *testing.T, p string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	zw.Close()
	writeFile(t, p, buf.String())
}

// TestToolCacheDegraded: without user namespaces there are no overlays;
// the tools are pointed at private directories that Landlock lets the
// command write, and the host's cache stays read-only.
func TestToolCacheDegraded(t *testing.T) {
	needGo(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		hostCache := filepath.Join(fx.home, ".cache", "go-build")
		writeFile(t, filepath.Join(hostCache, "entry"), "orig\n")
		chownR(t, fx.dir, u)
		r := degraded(t, fx, []string{"--allow-degraded"}, `PATH=`+goBin+`:$PATH
c=$(go env GOCACHE)
echo "GOCACHE=$c"
mkdir -p "$c" && echo x > "$c/planted" && echo PRIVATE-OK # tools create their cache directory
echo x > "$HOME/.cache/go-build/entry" && echo HOST-WROTE
true`)
		if r.code != 0 || !strings.Contains(r.stdout, "PRIVATE-OK") || strings.Contains(r.stdout, "GOCACHE="+hostCache+"\n") {
			t.Fatalf("degraded run did not get a private, writable GOCACHE: %v", r)
		}
		if strings.Contains(r.stdout, "HOST-WROTE") {
			t.Errorf("degraded run wrote the host's cache: %v", r)
		}
		assertContent(t, filepath.Join(hostCache, "entry"), "orig\n")
	})
}

// TestToolCacheOverlayFallback: where the kernel refuses the overlay (here
// the state directory is itself on overlayfs, as in a container), the run
// still works with a private cache, says so, and the host's cache stays
// untouched. Root only: the test mounts an overlay on the host to make the
// refusal happen.
func TestToolCacheOverlayFallback(t *testing.T) {
	u := users[0]
	if !u.root() {
		t.Skip("needs root to mount an overlayfs state directory on the host")
	}
	fx := newFixture(t, u)
	ov := filepath.Join(fx.dir, "ov")
	for _, d := range []string{"l", "u", "w", "m"} {
		if err := os.MkdirAll(filepath.Join(ov, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m := filepath.Join(ov, "m")
	if out, err := exec.Command("mount", "-t", "overlay", "overlay", "-o",
		"lowerdir="+filepath.Join(ov, "l")+",upperdir="+filepath.Join(ov, "u")+",workdir="+filepath.Join(ov, "w"), m).CombinedOutput(); err != nil {
		t.Fatalf("mount overlay: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", m).Run() })
	writeFile(t, filepath.Join(fx.home, ".npm", "entry"), "orig\n")
	env := append(fx.env(), "XDG_STATE_HOME="+m)
	r := runWith(t, u, runOpts{dir: fx.ws, env: env}, "run", "-C", fx.ws, "--", "/bin/sh", "-c",
		`echo "C=$npm_config_cache"; mkdir -p "$npm_config_cache" && echo x > "$npm_config_cache/x" && echo PRIVATE-OK; echo x > "$HOME/.npm/entry" && echo HOST-WROTE; true`)
	if r.code != 0 || !strings.Contains(r.stdout, "PRIVATE-OK") || !strings.Contains(r.stdout, "C="+m+"/") {
		t.Fatalf("no private fallback when the overlay is refused: %v", r)
	}
	if !strings.Contains(r.stderr, "using a private cache instead") {
		t.Errorf("the fallback was not reported: %v", r)
	}
	if strings.Contains(r.stdout, "HOST-WROTE") {
		t.Errorf("host cache written: %v", r)
	}
	assertContent(t, filepath.Join(fx.home, ".npm", "entry"), "orig\n")
	runWith(t, u, runOpts{env: env}, "cleanup")
}
