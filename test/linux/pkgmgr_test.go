//go:build linux

package linux

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/agentdirs"
	"golang.org/x/mod/module"
)

// The package managers end to end, as a new user meets them: a plain
// user with an empty home installs packages inside the sandbox from the
// test's own registry (pkgregistry_test.go), reached through the
// allow-list, and nothing under the home changes; where the host already
// has caches, they are overlaid and hashed before and after. Programs
// that `go install` and `cargo install` build land in a private directory
// of the workspace, which the run names on stderr.

// privateDir is where agentbox keeps the private directory name of
// workspace ws for u (see policy.ToolCache.Layer).
func privateDir(u *testUser, ws, name string) string {
	state := filepath.Join(u.home, ".state", "agentbox")
	return filepath.Join(agentdirs.ToolCacheRoot(state), agentdirs.WorkspaceKey(ws), "private", name)
}

// pkgRun runs script (under set -e) in fx's sandbox with the registry
// allowed and env added.
func (r *pkgRegistry) pkgRun(t *testing.T, fx *fixture, env []string, script string, extra ...string) result {
	t.Helper()
	args := append([]string{"run", "-C", fx.ws}, r.allow...)
	args = append(append(args, extra...), "--", "/bin/sh", "-c", "set -e\n"+script)
	env = append(append(fx.env(), "AGENTBOX_TEST_HOSTS="+r.hosts), append(fixtureTmp(fx), env...)...)
	res := runWith(t, fx.u, runOpts{dir: fx.ws, env: env, timeout: 120 * time.Second}, args...)
	t.Logf("sandbox run: %v", res.dur.Round(time.Millisecond))
	return res
}

// fixtureTmp gives the tools the fixture's own temporary directory:
// they leave things there (yarn's compile cache, pnpm's store locks,
// which it keeps in $XDG_RUNTIME_DIR or else /tmp), which the machine's
// /tmp and other tests' checks of the suite's TMPDIR must not see. In the
// sandbox /tmp is private anyway, and a $TMPDIR that is $XDG_RUNTIME_DIR
// is refused; on the host (onHost) the runtime directory is the
// fixture's too.
func fixtureTmp(fx *fixture) []string {
	return []string{"TMPDIR=" + fx.tmpdir}
}

// onHost runs script (under set -e) on the host as fx's user, outside any
// sandbox, reaching the registry with it as the HTTP proxy (registry.test
// resolves nowhere else): this is how the host's own caches come to be.
func (r *pkgRegistry) onHost(t *testing.T, fx *fixture, env []string, script string) {
	t.Helper()
	proxy := fmt.Sprintf("http://127.0.0.1:%d", r.port)
	env = append(append(append(fx.env(), fixtureTmp(fx)...), "XDG_RUNTIME_DIR="+fx.tmpdir, "http_proxy="+proxy, "https_proxy="+proxy, "HTTP_PROXY="+proxy, "HTTPS_PROXY="+proxy,
		"npm_config_proxy="+proxy, "npm_config_https_proxy="+proxy), env...)
	h := host(t, fx.u, runOpts{dir: fx.dir, env: env, timeout: 120 * time.Second}, "/bin/sh", "-c", "set -e\n"+script)
	if h.code != 0 {
		t.Fatalf("on the host: %v", h)
	}
	t.Logf("host run: %v", h.dur.Round(time.Millisecond))
}

// assertUnchanged fails for every difference between before and now.
func assertUnchanged(t *testing.T, what, root string, before map[string]string) {
	t.Helper()
	if d := diffSnapshots(before, snapshot(t, root), nil); len(d) > 0 {
		t.Errorf("%s changed:\n%s", what, strings.Join(d, "\n"))
	}
}

// assertNonEmpty fails unless dir holds something: the tool wrote its
// private cache there.
func assertNonEmpty(t *testing.T, dir string) {
	t.Helper()
	if ents, err := os.ReadDir(dir); err != nil || len(ents) == 0 {
		t.Errorf("host: %s holds nothing (%v): the tool did not use it", dir, err)
	}
}

// programsNote is the line a run prints when the command installed
// programs into dir.
func programsNote(desc, dir, env string) string {
	return fmt.Sprintf("agentbox: %s are in %s (%s, private to this workspace)", desc, dir, env)
}

// ---------------------------------------------------------------------------
// Go

// goCaches are warm Go build caches, one per test user, outside every
// home: a cold one compiles the runtime first, 15-30 s on this machine
// for each run. Build caching with an empty home is TestToolCacheGo's
// subject; here the build cache is a host cache like any other, overlaid
// and hashed.
var (
	goSeedOnce sync.Once
	goSeed     string
	goSeedErr  error
	goCachesMu sync.Mutex
	goCaches   = map[int]string{}
)

// goCacheFor returns u's warm build cache.
func goCacheFor(t *testing.T, u *testUser) string {
	t.Helper()
	needGo(t)
	goSeedOnce.Do(func() { goSeed, goSeedErr = seedGoCache() })
	if goSeedErr != nil {
		t.Fatalf("warming a Go build cache: %v", goSeedErr)
	}
	goCachesMu.Lock()
	defer goCachesMu.Unlock()
	if d, ok := goCaches[u.uid]; ok {
		return d
	}
	d := filepath.Join(baseDir, "gocache-"+u.name)
	if err := copyTree(goSeed, d); err != nil {
		t.Fatal(err)
	}
	chownR(t, d, u)
	goCaches[u.uid] = d
	return d
}

// goTestEnv is the go command's environment for the tests: the
// toolchain running them, a warm build cache, the registry.
func goTestEnv(r *pkgRegistry, gocache string) []string {
	return append(r.goEnv(), "PATH="+goBin+":"+hostPATH, "GOCACHE="+gocache)
}

// seedGoCache builds a build cache holding what the tests' programs need
// of the standard library, taken from this process's own build cache (the
// build of agentbox warmed it) where it is there: `go list -export` names
// each dependency's compiled output, and the cache's action entries name
// their outputs. Whatever is missing is compiled.
func seedGoCache() (string, error) {
	src := filepath.Join(baseDir, "gocache-src")
	dst := filepath.Join(baseDir, "gocache-seed")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	os.WriteFile(filepath.Join(src, "go.mod"), []byte("module example.com/seed\n\ngo 1.22\n"), 0o644)
	os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nfunc main() { println(\"seed\") }\n"), 0o644)
	env := append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOTOOLCHAIN=local", "GOPROXY=off")
	own, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOCACHE: %w", err)
	}
	list := exec.Command("go", "list", "-export", "-deps", "-f", "{{.Export}}", ".")
	list.Dir, list.Env = src, env
	if out, err := list.Output(); err == nil {
		copyCacheOutputs(strings.TrimSpace(string(own)), dst, strings.Fields(string(out)))
	}
	build := exec.Command("go", "build", "-o", os.DevNull, ".")
	build.Dir, build.Env = src, append(env, "GOCACHE="+dst)
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return dst, nil
}

// copyCacheOutputs copies from the build cache own into dst the outputs
// exports (paths in own, NAME-d) and the action entries (NAME-a, "v1
// <action> <output> ...") that name them.
func copyCacheOutputs(own, dst string, exports []string) {
	want := map[string]bool{}
	for _, e := range exports {
		if name := filepath.Base(e); strings.HasSuffix(name, "-d") && strings.HasPrefix(e, own+"/") {
			want[strings.TrimSuffix(name, "-d")] = true
		}
	}
	if len(want) == 0 {
		return
	}
	cp := func(rel string) {
		b, err := os.ReadFile(filepath.Join(own, rel))
		if err == nil && os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755) == nil {
			os.WriteFile(filepath.Join(dst, rel), b, 0o644)
		}
	}
	dirs, _ := os.ReadDir(own)
	for _, d := range dirs {
		if !d.IsDir() || len(d.Name()) != 2 {
			continue
		}
		ents, _ := os.ReadDir(filepath.Join(own, d.Name()))
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), "-a") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(own, d.Name(), e.Name()))
			if f := strings.Fields(string(b)); err == nil && len(f) >= 3 && want[f[2]] {
				cp(filepath.Join(d.Name(), e.Name()))
				cp(filepath.Join(f[2][:2], f[2]+"-d"))
			}
		}
	}
}

// copyTree copies the directories and regular files under src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, 0o644)
		}
		return nil
	})
}

// goVersions hands out versions of example.test/greet never published
// before, each saying its version: one more record in the checksum
// database when first looked up.
var (
	goVersionsMu sync.Mutex
	goVersionN   int
)

func (r *pkgRegistry) newGreet(t *testing.T) string {
	t.Helper()
	goVersionsMu.Lock()
	goVersionN++
	v := fmt.Sprintf("v1.%d.0", goVersionN)
	goVersionsMu.Unlock()
	r.publishGo(t, "example.test/greet", v, map[string]string{
		"greet.go": "package greet\n\n// Hello greets.\nfunc Hello() string { return \"hello from greet " + v + "\" }\n",
	})
	return v
}

// goPrograms publishes example.test/hello, a program, once.
var goProgramsOnce sync.Once

func (r *pkgRegistry) goProgram(t *testing.T) string {
	t.Helper()
	goProgramsOnce.Do(func() {
		r.publishGo(t, "example.test/hello", "v1.0.0", map[string]string{"main.go": "package main\n\nfunc main() { println(\"hello program\") }\n"})
	})
	return "example.test/hello@v1.0.0"
}

// goApp writes a module in dir that uses example.test/greet.
func goApp(t *testing.T, dir string, u *testUser) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/app\n\ngo 1.22\n")
	writeFile(t, filepath.Join(dir, "main.go"), "package main\n\nimport \"example.test/greet\"\n\nfunc main() { println(greet.Hello()) }\n")
	chownR(t, dir, u)
}

// TestPkgGo: with the Go module proxy and its checksum database allowed,
// go get, go mod tidy, go build and go install work for a user with an
// empty home (the checksum database's state in a private GOPATH, the
// module cache private, programs in a private GOBIN that stderr names),
// again once the database has moved on, and for a user whose host
// already has a module cache and checksum database state (overlaid: the
// database's newer tree is recorded in the overlay, the host's state never
// changes). Neither the home nor the host build cache changes.
func TestPkgGo(t *testing.T) {
	needGo(t)
	r := localRegistry(t)
	program := r.goProgram(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		gocache := goCacheFor(t, u)
		env := goTestEnv(r, gocache)
		goApp(t, filepath.Join(fx.ws, "app"), u)
		homeBefore, cacheBefore := snapshot(t, fx.home), snapshot(t, gocache)
		gobin := privateDir(u, fx.ws, "go-bin")
		sumdb := filepath.Join(privateDir(u, fx.ws, "go-sumdb"), "pkg", "sumdb", r.sumdbName, "latest")

		// 1. An empty home.
		v1 := r.newGreet(t)
		r.sumdbLookups()
		res := r.pkgRun(t, fx, env, `cd "$WS/app"
go get example.test/greet@`+v1+`
go mod tidy
go build -o app .
./app
go install .
go install `+program+`
echo "GOBIN=$(go env GOBIN)"`)
		if res.code != 0 || !strings.Contains(res.stderr, "hello from greet "+v1) || !strings.Contains(res.stdout, "GOBIN="+gobin+"\n") {
			t.Fatalf("go get/tidy/build/install with an empty home: %v", res)
		}
		if l := r.sumdbLookups(); !containsAll(l, "example.test/greet@"+v1, program) {
			t.Errorf("the checksum database was not consulted (lookups %q): the test does not exercise $GOPATH/pkg/sumdb", l)
		}
		if !strings.Contains(res.stderr, programsNote("programs from go install", gobin, "GOBIN")) {
			t.Errorf("stderr does not say where go install put the programs: %q", res.stderr)
		}
		for _, p := range []string{"app", "hello"} {
			if _, err := os.Stat(filepath.Join(gobin, p)); err != nil {
				t.Errorf("host: go install did not put %s in the private GOBIN: %v", p, err)
			}
		}
		latest, err := os.ReadFile(sumdb)
		if err != nil {
			t.Errorf("host: no checksum database state in the private GOPATH: %v", err)
		}
		assertUnchanged(t, "the home", fx.home, homeBefore)
		assertUnchanged(t, "the host build cache", gocache, cacheBefore)
		// doctor says where each goes; a PATH holding the private
		// GOBIN is refused before anything runs.
		d := runWith(t, u, runOpts{dir: fx.ws, env: append(fx.env(), env...)}, "doctor", "-C", fx.ws)
		for _, want := range []string{"cache go-sumdb ", "GOPATH=" + privateDir(u, fx.ws, "go-sumdb"), "programs go-bin ", "GOBIN=" + gobin} {
			if !strings.Contains(d.stdout, want) {
				t.Errorf("doctor lacks %q:\n%s", want, d.stdout)
			}
		}
		res = r.pkgRun(t, fx, append(env, "PATH="+gobin+":"+hostPATH), `echo RAN`)
		if res.code != 125 || strings.Contains(res.stdout, "RAN") || !strings.Contains(res.stderr, gobin) || !strings.Contains(res.stderr, "remove it from PATH") {
			t.Errorf("a PATH holding the private GOBIN: want 125 naming it: %v", res)
		}

		// 2. The database moves on (a new record): the next run records
		// its new tree.
		v2 := r.newGreet(t)
		res = r.pkgRun(t, fx, env, `cd "$WS/app"
go get example.test/greet@`+v2+`
go build -o app . && ./app`)
		if res.code != 0 || !strings.Contains(res.stderr, "hello from greet "+v2) {
			t.Fatalf("go get after the checksum database moved on: %v", res)
		}
		if now, _ := os.ReadFile(sumdb); bytes.Equal(now, latest) {
			t.Errorf("host: the private checksum database state did not follow the database")
		}
		assertUnchanged(t, "the home", fx.home, homeBefore)

		// 3. The host has a module cache and the database's state; the
		// database moves on; a fresh workspace.
		// (The go command's telemetry writes its configuration directory
		// from a child that outlives it: elsewhere, so that the home is
		// settled when it is hashed.)
		r.onHost(t, fx, append(env, "XDG_CONFIG_HOME="+filepath.Join(fx.dir, "config")), `mkdir -p "$DIR/hostapp" && cp "$WS/app/go.mod" "$WS/app/main.go" "$DIR/hostapp" && cd "$DIR/hostapp"
go get example.test/greet@`+v2)
		homeBefore, cacheBefore = snapshot(t, fx.home), snapshot(t, gocache)
		if !exists(filepath.Join(fx.home, "go", "pkg", "sumdb", r.sumdbName, "latest")) {
			t.Fatal("host: go get left no checksum database state")
		}
		fx2 := newFixture(t, u)
		goApp(t, filepath.Join(fx2.ws, "app"), u)
		v3 := r.newGreet(t)
		res = r.pkgRun(t, fx2, append(env, "HOME="+fx.home), `cd "$WS/app"
go get example.test/greet@`+v3+`
go build -o app . && ./app
go install .
echo "GOMODCACHE=$(go env GOMODCACHE)"`)
		if res.code != 0 || !strings.Contains(res.stderr, "hello from greet "+v3) {
			t.Fatalf("go get over the host's module cache and checksum database state: %v", res)
		}
		if !strings.Contains(res.stdout, "GOMODCACHE="+filepath.Join(fx.home, "go", "pkg", "mod")+"\n") {
			t.Errorf("the host's module cache is not the one used (overlaid): %q", res.stdout)
		}
		if !strings.Contains(res.stderr, programsNote("programs from go install", privateDir(u, fx2.ws, "go-bin"), "GOBIN")) {
			t.Errorf("stderr does not say where go install put the program: %q", res.stderr)
		}
		assertUnchanged(t, "the home", fx.home, homeBefore)
		assertUnchanged(t, "the host build cache", gocache, cacheBefore)

	})
}

func containsAll(list []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, l := range list {
			found = found || l == w
		}
		if !found {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// npm, pnpm, yarn

// toolsDir is where scripts/test.sh installs pnpm and yarn for the tests
// (AGENTBOX_TEST_TOOLS overrides it).
func toolsDir() string {
	if d := os.Getenv("AGENTBOX_TEST_TOOLS"); d != "" {
		return d
	}
	return "/opt/agentbox-test-tools"
}

// findTool returns the directory holding name: the test tools' or a
// system one, "" when there is none.
func findTool(name string) string {
	for _, d := range append([]string{filepath.Join(toolsDir(), "bin")}, filepath.SplitList(hostPATH)...) {
		if fi, err := os.Stat(filepath.Join(d, name)); err == nil && fi.Mode()&0o111 != 0 {
			return d
		}
	}
	return ""
}

// needTool is findTool, skipping (naming scripts/test.sh) when the tool
// is absent.
func needTool(t *testing.T, name string) string {
	t.Helper()
	d := findTool(name)
	if d == "" {
		t.Skipf("no %s in %s/bin or on %s (scripts/test.sh installs it)", name, toolsDir(), hostPATH)
	}
	return d
}

// nodePackages publishes the registry's npm packages once: abx-hello
// (1.0.0, later 1.1.0) depending on abx-dep.
var nodeOnce sync.Once

func (r *pkgRegistry) nodePackages(t *testing.T) {
	t.Helper()
	nodeOnce.Do(func() {
		r.publishNpm(t, "abx-dep", "1.0.0", nil, "module.exports = 'dep';\n")
		r.publishNpm(t, "abx-hello", "1.0.0", map[string]string{"abx-dep": "^1.0.0"}, "module.exports = 'hi from abx-hello 1.0.0 and ' + require('abx-dep');\n")
	})
}

var node11Once sync.Once

func (r *pkgRegistry) nodeNewVersion(t *testing.T) {
	t.Helper()
	node11Once.Do(func() {
		r.publishNpm(t, "abx-hello", "1.1.0", map[string]string{"abx-dep": "^1.0.0"}, "module.exports = 'hi from abx-hello 1.1.0 and ' + require('abx-dep');\n")
	})
}

// nodeInstall is the script that installs abx-hello@version with tool in
// $WS/<tool><suffix> and requires it.
func nodeInstall(tool, suffix, version string) string {
	add := map[string]string{"npm": "npm install --no-audit --no-fund", "pnpm": "pnpm add", "yarn": "yarn add"}[tool]
	return fmt.Sprintf(`mkdir -p "$WS/%[1]s%[2]s" && cd "$WS/%[1]s%[2]s"
echo '{"name":"app","version":"1.0.0","private":true}' > package.json
%[3]s abx-hello@%[4]s
node -e 'console.log(require("abx-hello"))'
`, tool, suffix, add, version)
}

// TestPkgNode: npm, pnpm and yarn 1 install a package with a dependency
// from the registry for a user with an empty home: every cache, pnpm's
// store and metadata cache, private, and nothing under the home; pnpm
// then over the host's own store and cache (made by pnpm outside the
// sandbox), overlaid and unchanged. A yarn with a terminal does not try
// its daily update check, whose record would go to ~/.yarnrc.
func TestPkgNode(t *testing.T) {
	npm := needTool(t, "npm")
	r := localRegistry(t)
	r.nodePackages(t)
	r.nodeNewVersion(t)
	type tool struct {
		name, dir string
		private   []string // private directories the install must fill
	}
	tools := []tool{{"npm", npm, []string{"npm"}}, {"pnpm", findTool("pnpm"), []string{"pnpm-store", "pnpm-cache"}}, {"yarn", findTool("yarn"), []string{"yarn"}}}
	path := hostPATH
	for _, tl := range tools {
		if tl.dir != "" {
			path = tl.dir + ":" + path
		}
	}
	env := append(r.npmEnv(), "PATH="+path)
	forEachUser(t, func(t *testing.T, u *testUser) {
		for _, tl := range tools {
			t.Run(tl.name, func(t *testing.T) {
				if tl.dir == "" {
					needTool(t, tl.name) // skips, saying why
				}
				fx := newFixture(t, u)
				before := snapshot(t, fx.home)
				res := r.pkgRun(t, fx, env, nodeInstall(tl.name, "", "1.0.0"))
				if res.code != 0 || !strings.Contains(res.stdout, "hi from abx-hello 1.0.0 and dep") {
					t.Fatalf("%s install with an empty home: %v", tl.name, res)
				}
				for _, p := range tl.private {
					assertNonEmpty(t, privateDir(u, fx.ws, p))
				}
				assertUnchanged(t, "the home", fx.home, before)
				if tl.name != "pnpm" {
					// Their caches over the host's are plain overlays
					// (TestToolCacheNpmPip, TestToolCacheAttacks).
					return
				}
				// pnpm's store (a SQLite index beside the files) and its
				// metadata cache over the host's own, made by pnpm
				// outside the sandbox; a version the host never fetched.
				r.onHost(t, fx, env, nodeInstall(tl.name, "-host", "1.0.0"))
				before = snapshot(t, fx.home)
				for _, d := range []string{".local/share/pnpm/store", ".cache/pnpm"} {
					assertNonEmpty(t, filepath.Join(fx.home, d))
				}
				res = r.pkgRun(t, fx, env, nodeInstall(tl.name, "-2", "1.1.0"))
				if res.code != 0 || !strings.Contains(res.stdout, "hi from abx-hello 1.1.0 and dep") {
					t.Fatalf("%s install over the host's store and cache: %v", tl.name, res)
				}
				assertUnchanged(t, "the home", fx.home, before)
			})
		}
	})
	// yarn's update check asks yarnpkg.com when it has a terminal (and no
	// CI variable): with the check switched off the run reaches nothing
	// but the registry; with tool_caches = "off" (agentbox changes
	// nothing) it tries, which shows the check does run here. Root only:
	// the refused check retries for seconds.
	t.Run("yarn-update-check", func(t *testing.T) {
		needTool(t, "yarn")
		{
			u := users[0]
			fx := newFixture(t, u)
			off := filepath.Join(fx.dir, "off.toml")
			writeFile(t, off, "[sandbox_workspace_write]\ntool_caches = \"off\"\n")
			for _, c := range []struct {
				args  []string
				tries bool
			}{{nil, false}, {[]string{"--config", off}, true}} {
				report := filepath.Join(fx.dir, "report.json")
				args := append(append([]string{"run", "-C", fx.ws, "--report", report}, r.allow...), c.args...)
				script := nodeInstall("yarn", fmt.Sprint(len(c.args)), "1.0.0")
				if c.tries {
					script = "timeout 5 sh -c '" + strings.ReplaceAll(script, "'", `'\''`) + "' || true"
				}
				args = append(args, "--", "/bin/sh", "-c", script)
				out := ptyAll(t, u, runOpts{dir: fx.ws, env: append(append(append(fx.env(), "AGENTBOX_TEST_HOSTS="+r.hosts), fixtureTmp(fx)...), env...)}, binPath, args...)
				rep := readReport(t, report)
				tried := false
				for _, d := range rep.Network.Denied {
					tried = tried || d.Host == "yarnpkg.com"
				}
				if tried != c.tries {
					t.Errorf("%v: yarn asked yarnpkg.com: %v, want %v (report %+v)\n%s", c.args, tried, c.tries, rep.Network, out)
				}
			}
		}
	})
}

// ptyAll runs name as u with a fresh terminal as its stdin, stdout and
// stderr (and controlling terminal), and returns what it wrote.
func ptyAll(t *testing.T, u *testUser, o runOpts, name string, args ...string) string {
	t.Helper()
	master, slave, err := openPty()
	if err != nil {
		t.Skipf("cannot allocate a pty: %v", err)
	}
	defer master.Close()
	cmd := command(u, o, name, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, true, 0
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	slave.Close()
	var out bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		br := bufio.NewReader(master)
		io.Copy(&out, br) // ends with EIO once every holder of the slave is gone
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s did not finish", name)
	}
	select {
	case <-read:
	case <-time.After(2 * time.Second):
	}
	return out.String()
}

// ---------------------------------------------------------------------------
// pip

var pipOnce sync.Once

func (r *pkgRegistry) pipPackages(t *testing.T) {
	t.Helper()
	pipOnce.Do(func() {
		r.publishWheel(t, "abx-dep", "1.0", "X = 'dep'\n")
		r.publishWheel(t, "abx-hello", "1.0", "import abx_dep\nGREETING = 'hi from wheel 1.0 and ' + abx_dep.X\n", "abx-dep")
	})
}

// pipInstall makes a virtual environment in $WS/<dir> (on the system's
// pip, which is what python3 -m venv gives without ensurepip's 5 s copy)
// and installs abx-hello==version into it from the index.
func pipInstall(dir, version string) string {
	return fmt.Sprintf(`cd "$WS"
%[1]s -m venv --without-pip --system-site-packages %[2]s
%[2]s/bin/python -m pip install abx-hello==%[3]s
%[2]s/bin/python -c 'import abx_hello; print(abx_hello.GREETING)'
`, python, dir, version)
}

// TestPkgPip: pip installs a wheel with a dependency from a PEP 503 index
// into a virtual environment in the workspace, for a user with an empty
// home: its HTTP cache private, nothing under the home. (Debian's pip
// switches its self-version check off; upstream pip keeps its state in the
// same cache directory.)
func TestPkgPip(t *testing.T) {
	needPython(t)
	if out, err := exec.Command(python, "-m", "pip", "--version").CombinedOutput(); err != nil {
		t.Skipf("%s has no pip (python3-pip; scripts/test.sh installs it): %v %s", python, err, out)
	}
	if out, err := exec.Command(python, "-c", "import ensurepip, venv").CombinedOutput(); err != nil {
		t.Skipf("%s has no venv (python3-venv; scripts/test.sh installs it): %v %s", python, err, out)
	}
	r := localRegistry(t)
	r.pipPackages(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		before := snapshot(t, fx.home)
		res := r.pkgRun(t, fx, r.pipEnv(), pipInstall("venv", "1.0"))
		if res.code != 0 || !strings.Contains(res.stdout, "hi from wheel 1.0 and dep") {
			t.Fatalf("pip install with an empty home: %v", res)
		}
		assertNonEmpty(t, filepath.Join(privateDir(u, fx.ws, "pip"), "http"))
		assertUnchanged(t, "the home", fx.home, before)

		// (Its cache over the host's is a plain overlay:
		// TestToolCacheNpmPip.)
	})
}

// ---------------------------------------------------------------------------
// Cargo

// debianCargo is the Debian package's cargo (rustup's, under a user's
// home, is no use to the other test user).
const debianCargo = "/usr/bin/cargo"

var (
	cargoOnce sync.Once
	cargoGit  string // a git repository holding crate abx-git
)

func (r *pkgRegistry) cargoPackages(t *testing.T) {
	t.Helper()
	cargoOnce.Do(func() {
		r.publishCrate(t, "abx-dep", "1.0.0", "pub fn dep() -> &'static str { \"dep 1.0.0\" }\n")
		r.publishCrate(t, "abx-dep", "1.1.0", "pub fn dep() -> &'static str { \"dep 1.1.0\" }\n")
		cargoGit = filepath.Join(r.dir, "abx-git")
		writeFile(t, filepath.Join(cargoGit, "Cargo.toml"), "[package]\nname = \"abx-git\"\nversion = \"0.1.0\"\nedition = \"2018\"\n")
		writeFile(t, filepath.Join(cargoGit, "src", "lib.rs"), "pub fn git() -> &'static str { \"git\" }\n")
		gitIn(t, cargoGit, "init", "-q")
		gitIn(t, cargoGit, "add", "-A")
		gitIn(t, cargoGit, "commit", "-q", "-m", "abx-git")
	})
}

// cargoProject writes a binary crate in dir depending on abx-dep (from
// the registry, which replaces crates.io) and abx-git (a git dependency).
func (r *pkgRegistry) cargoProject(t *testing.T, dir, depVersion string, u *testUser) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "Cargo.toml"), fmt.Sprintf(`[package]
name = "abx-app"
version = "0.1.0"
edition = "2018"

[dependencies]
abx-dep = "=%s"
abx-git = { git = "file://%s" }
`, depVersion, cargoGit))
	writeFile(t, filepath.Join(dir, "src", "main.rs"), "fn main() { println!(\"app uses {} and {}\", abx_dep::dep(), abx_git::git()); }\n")
	writeFile(t, filepath.Join(dir, ".cargo", "config.toml"), fmt.Sprintf("[source.crates-io]\nreplace-with = \"abx\"\n\n[source.abx]\nregistry = %q\n", r.cargoIndex()))
	chownR(t, dir, u)
}

// TestPkgCargo: cargo build fetches a crate from the registry (a git
// index read through file://, downloads over HTTP) and a git dependency,
// and cargo install puts the program in a private directory that stderr
// names, for a user with an empty home (CARGO_HOME private, the lock
// file included), and over the host's own ~/.cargo (registry and git
// checkouts overlaid, ~/.cargo itself, its bin/ and .crates.toml never
// written).
func TestPkgCargo(t *testing.T) {
	if _, err := os.Stat(debianCargo); err != nil {
		t.Skipf("no %s (Debian's cargo; scripts/test.sh installs it): %v", debianCargo, err)
	}
	r := localRegistry(t)
	r.cargoPackages(t)
	env := []string{"PATH=" + hostPATH, "CARGO_TERM_COLOR=never"}
	const script = `cd "$WS/app"
cargo build
./target/debug/abx-app
cargo install --debug --path .
`
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		r.cargoProject(t, filepath.Join(fx.ws, "app"), "1.0.0", u)
		before := snapshot(t, fx.home)
		res := r.pkgRun(t, fx, env, script)
		if res.code != 0 || !strings.Contains(res.stdout, "app uses dep 1.0.0 and git") {
			t.Fatalf("cargo build/install with an empty home: %v", res)
		}
		install := privateDir(u, fx.ws, "cargo-install")
		if _, err := os.Stat(filepath.Join(install, "bin", "abx-app")); err != nil {
			t.Errorf("host: cargo install did not put the program in the private directory: %v", err)
		}
		if !strings.Contains(res.stderr, programsNote("programs from cargo install", filepath.Join(install, "bin"), "CARGO_INSTALL_ROOT")) {
			t.Errorf("stderr does not say where cargo install put the program: %q", res.stderr)
		}
		for _, d := range []string{"registry", "git"} {
			assertNonEmpty(t, filepath.Join(privateDir(u, fx.ws, "cargo-home"), d))
		}
		assertUnchanged(t, "the home", fx.home, before)

		// The host's own ~/.cargo, made by cargo outside the sandbox; a
		// crate version and a git commit it has never fetched.
		r.cargoProject(t, filepath.Join(fx.dir, "hostapp"), "1.0.0", u)
		r.onHost(t, fx, env, `cd "$DIR/hostapp" && cargo build -q`)
		before = snapshot(t, fx.home)
		if !exists(filepath.Join(fx.home, ".cargo", "registry")) || !exists(filepath.Join(fx.home, ".cargo", "git")) {
			t.Fatal("host: cargo left no registry or git checkouts in ~/.cargo")
		}
		gitIn(t, cargoGit, "commit", "-q", "--allow-empty", "-m", "moves on "+u.name)
		fx2 := newFixture(t, u)
		r.cargoProject(t, filepath.Join(fx2.ws, "app"), "1.1.0", u)
		res = r.pkgRun(t, fx2, append(env, "HOME="+fx.home), script+"cargo update -p abx-git\n")
		if res.code != 0 || !strings.Contains(res.stdout, "app uses dep 1.1.0 and git") {
			t.Fatalf("cargo build/install over the host's ~/.cargo: %v", res)
		}
		assertUnchanged(t, "the home", fx.home, before)
	})
}

// ---------------------------------------------------------------------------
// The other run paths

// TestPkgSession: through agentbox mcp (one session, the allow-list's
// proxy), go get and go install, and npm install, for a user with an empty
// home: the same placements as a lone run, the programs note in the
// call's stderr, the home unchanged.
func TestPkgSession(t *testing.T) {
	needGo(t)
	npm := needTool(t, "npm")
	r := localRegistry(t)
	program := r.goProgram(t)
	r.nodePackages(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		goApp(t, filepath.Join(fx.ws, "app"), u)
		env := append(append(goTestEnv(r, goCacheFor(t, u)), r.npmEnv()...), "PATH="+goBin+":"+npm+":"+hostPATH, "AGENTBOX_TEST_HOSTS="+r.hosts)
		before := snapshot(t, fx.home)
		args := append([]string{"mcp", "-C", fx.ws}, r.allow...)
		cs, _, hangUp := mcpServerCmd(t, command(u, runOpts{env: append(fx.env(), env...), dir: fx.ws}, binPath, args...))
		v := r.newGreet(t)
		gobin := privateDir(u, fx.ws, "go-bin")
		res := mcpSh(t, cs, `set -e; cd "$WS/app"; go get example.test/greet@`+v+`; go install `+program+`; go env GOBIN`)
		if res.ExitCode != 0 || res.Stdout != gobin+"\n" || !strings.Contains(res.Stderr, programsNote("programs from go install", gobin, "GOBIN")) {
			t.Fatalf("go get/install through agentbox mcp: %v", res)
		}
		if _, err := os.Stat(filepath.Join(gobin, "hello")); err != nil {
			t.Errorf("host: %v", err)
		}
		res = mcpSh(t, cs, nodeInstall("npm", "", "1.0.0"))
		if res.ExitCode != 0 || !strings.Contains(res.Stdout, "hi from abx-hello 1.0.0 and dep") {
			t.Fatalf("npm install through agentbox mcp: %v", res)
		}
		assertNonEmpty(t, privateDir(u, fx.ws, "npm"))
		hangUp.Close()
		time.Sleep(300 * time.Millisecond)
		assertUnchanged(t, "the home", fx.home, before)
	})
}

// TestPkgResident: through the resident helper, which serves runs without
// an allow-list only, go get and go install from the registry's files
// (GOPROXY=file://, the checksum database's answers as files) and npm
// install of a package tarball: the same placements, the programs note on
// the CLI's stderr, the home unchanged.
func TestPkgResident(t *testing.T) {
	needGo(t)
	npm := needTool(t, "npm")
	r := localRegistry(t)
	program := r.goProgram(t)
	r.nodePackages(t)
	forEachUser(t, func(t *testing.T, u *testUser) {
		fx := newFixture(t, u)
		goApp(t, filepath.Join(fx.ws, "app"), u)
		v := r.newGreet(t)
		dump := filepath.Join(fx.dir, "sumdb")
		genv := r.goFileEnv(t, dump, module.Version{Path: "example.test/greet", Version: v}, module.Version{Path: "example.test/hello", Version: "v1.0.0"})
		env := append(append(genv, "PATH="+goBin+":"+npm+":"+hostPATH, "GOCACHE="+goCacheFor(t, u)), "npm_config_offline=true")
		tgz := filepath.Join(fx.dir, "abx-dep-1.0.0.tgz")
		writeFile(t, tgz, string(r.npmTarball("abx-dep", "1.0.0")))
		chownR(t, fx.dir, u)
		re := newResidentEnv(t, fx, env...)
		re.warm(t)
		before := snapshot(t, fx.home)
		state := filepath.Join(re.state, "agentbox")
		gobin := filepath.Join(agentdirs.ToolCacheRoot(state), agentdirs.WorkspaceKey(fx.ws), "private", "go-bin")
		served, res := re.served(t, runOpts{timeout: 120 * time.Second}, nil, `set -e; cd "$WS/app"; go get example.test/greet@`+v+`; go install `+program+`; go env GOBIN
mkdir -p "$WS/npm" && cd "$WS/npm" && echo '{"name":"app","version":"1.0.0","private":true}' > package.json
npm install --no-audit --no-fund `+tgz+`
node -e 'console.log(require("abx-dep"))'`)
		if !served {
			t.Fatalf("the helper did not serve the run: %v", res)
		}
		if res.code != 0 || !strings.HasPrefix(res.stdout, gobin+"\n") || !strings.HasSuffix(res.stdout, "\ndep\n") || !strings.Contains(res.stderr, programsNote("programs from go install", gobin, "GOBIN")) {
			t.Fatalf("go get/install and npm install through the resident helper: %v", res)
		}
		if _, err := os.Stat(filepath.Join(gobin, "hello")); err != nil {
			t.Errorf("host: %v", err)
		}
		assertNonEmpty(t, filepath.Join(agentdirs.ToolCacheRoot(state), agentdirs.WorkspaceKey(fx.ws), "private", "npm"))
		assertUnchanged(t, "the home", fx.home, before)
	})
}
