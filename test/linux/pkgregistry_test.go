//go:build linux

package linux

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb"
	"golang.org/x/mod/sumdb/dirhash"
	"golang.org/x/mod/sumdb/note"
	modzip "golang.org/x/mod/zip"
)

// pkgRegistry is one local package registry for the whole test process,
// on the host's loopback, speaking each package manager's own protocol:
//
//	/gomod/    the Go module proxy protocol (list, .info, .mod, .zip),
//	           files under dir/gomod, also usable as GOPROXY=file://
//	/sumdb/    a Go checksum database (x/mod/sumdb's server), signed
//	           with a key of the test's own
//	/npm/      an npm registry (packuments and tarballs)
//	/simple/   a PEP 503 simple index, /files/ its wheels
//	/crates/   Cargo downloads; the index is a git repository read
//	           through file:// (the sparse protocol needs Cargo 1.68,
//	           newer than Debian 12's)
//
// The sandbox reaches it through agentbox's allow-list proxy under the
// name registry.test (tools send their own loopback, 127.0.0.1, past
// the proxy: NO_PROXY), which only the proxy resolves.
type pkgRegistry struct {
	port  int
	base  string   // http://registry.test:PORT
	hosts string   // an AGENTBOX_TEST_HOSTS file naming registry.test
	allow []string // the run flags that allow it
	dir   string   // the registry's files, readable by every test user

	sumdbName, sumdbVKey string
	sumdb                *sumdb.TestServer
	sumdbHandler         http.Handler

	mu      sync.Mutex
	goMods  map[string][]string // module path -> published versions
	npm     map[string][]npmVersion
	wheels  map[string][]string // normalized project -> wheel file names
	crates  map[string][]byte   // "name/version" -> .crate
	lookups []string            // sumdb lookups served, for the tests' checks
}

type npmVersion struct {
	Version string
	Deps    map[string]string
	Tarball []byte
}

var (
	registryOnce sync.Once
	registry     *pkgRegistry
	registryErr  error
)

// localRegistry starts the process's registry on first use.
func localRegistry(t *testing.T) *pkgRegistry {
	t.Helper()
	registryOnce.Do(func() { registry, registryErr = startRegistry() })
	if registryErr != nil {
		t.Fatalf("local registry: %v", registryErr)
	}
	return registry
}

func startRegistry() (*pkgRegistry, error) {
	dir, err := os.MkdirTemp(baseDir, "registry-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &pkgRegistry{
		port:   ln.Addr().(*net.TCPAddr).Port,
		dir:    dir,
		goMods: map[string][]string{},
		npm:    map[string][]npmVersion{},
		wheels: map[string][]string{},
		crates: map[string][]byte{},
	}
	r.base = fmt.Sprintf("http://registry.test:%d", r.port)
	r.allow = []string{"--allow-domain", fmt.Sprintf("registry.test:%d", r.port), "--allow-domain", fmt.Sprintf("127.0.0.1:%d", r.port)}
	r.hosts = filepath.Join(dir, "hosts")
	if err := os.WriteFile(r.hosts, []byte("127.0.0.1 registry.test\n"), 0o644); err != nil {
		return nil, err
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, "sum.registry.test")
	if err != nil {
		return nil, err
	}
	r.sumdbName, r.sumdbVKey = "sum.registry.test", vkey
	r.sumdb = sumdb.NewTestServer(skey, r.goSum)
	r.sumdbHandler = sumdb.NewServer(r.sumdb)

	mux := http.NewServeMux()
	mux.Handle("/gomod/", http.StripPrefix("/gomod", http.FileServer(http.Dir(filepath.Join(dir, "gomod")))))
	mux.Handle("/sumdb/", http.StripPrefix("/sumdb", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasPrefix(req.URL.Path, "/lookup/") {
			r.mu.Lock()
			r.lookups = append(r.lookups, strings.TrimPrefix(req.URL.Path, "/lookup/"))
			r.mu.Unlock()
		}
		r.sumdbHandler.ServeHTTP(w, req)
	})))
	mux.HandleFunc("/npm/", r.serveNpm)
	mux.HandleFunc("/simple/", r.serveSimple)
	files := http.StripPrefix("/files", http.FileServer(http.Dir(filepath.Join(dir, "files"))))
	mux.Handle("/files/", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// As PyPI's: cacheable, so that pip's HTTP cache is written.
		w.Header().Set("Cache-Control", "max-age=365000000, immutable, public")
		files.ServeHTTP(w, req)
	}))
	mux.HandleFunc("/crates/", r.serveCrate)
	go (&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(ln)
	return r, nil
}

// ---------------------------------------------------------------------------
// Go

// goEnv is what points the go command at the registry over HTTP: its
// module proxy and its checksum database, so that verification (and
// $GOPATH/pkg/sumdb) is exercised as with sum.golang.org.
func (r *pkgRegistry) goEnv() []string {
	return []string{
		"GOPROXY=" + r.base + "/gomod",
		fmt.Sprintf("GOSUMDB=%s %s/sumdb", r.sumdbVKey, r.base),
		"GOTOOLCHAIN=local", "GOFLAGS=", "CGO_ENABLED=0", "GONOSUMDB=", "GOPRIVATE=", "GONOPROXY=", "GOINSECURE=",
	}
}

// goModFile is a module's go.mod for the registry.
func goModFile(path string) string { return "module " + path + "\n\ngo 1.22\n" }

// publishGo adds version of the module at path with files (go.mod is
// added) to the proxy. The checksum database learns of it when a client
// first looks it up, and grows by one record then.
func (r *pkgRegistry) publishGo(t *testing.T, path, version string, files map[string]string) {
	t.Helper()
	src, err := os.MkdirTemp(r.dir, "gosrc-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(src)
	files = maps(files, map[string]string{"go.mod": goModFile(path)})
	for name, body := range files {
		writeFile(t, filepath.Join(src, name), body)
	}
	epath, err := module.EscapePath(path)
	if err != nil {
		t.Fatal(err)
	}
	vdir := filepath.Join(r.dir, "gomod", epath, "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		t.Fatal(err)
	}
	var zbuf bytes.Buffer
	if err := modzip.CreateFromDir(&zbuf, module.Version{Path: path, Version: version}, src); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(vdir, version+".zip"), zbuf.String())
	writeFile(t, filepath.Join(vdir, version+".mod"), files["go.mod"])
	writeFile(t, filepath.Join(vdir, version+".info"), fmt.Sprintf(`{"Version":%q,"Time":"2024-01-02T03:04:05Z"}`, version))
	r.mu.Lock()
	r.goMods[path] = append(r.goMods[path], version)
	list := strings.Join(r.goMods[path], "\n") + "\n"
	r.mu.Unlock()
	writeFile(t, filepath.Join(vdir, "list"), list)
}

// goSum is the checksum database's source of truth: the go.sum lines of
// a published module version, hashed from the proxy's own files.
func (r *pkgRegistry) goSum(path, version string) ([]byte, error) {
	epath, err := module.EscapePath(path)
	if err != nil {
		return nil, err
	}
	vdir := filepath.Join(r.dir, "gomod", epath, "@v")
	zh, err := dirhash.HashZip(filepath.Join(vdir, version+".zip"), dirhash.Hash1)
	if err != nil {
		return nil, err
	}
	mh, err := dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
		return os.Open(filepath.Join(vdir, version+".mod"))
	})
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, "%s %s %s\n%s %s/go.mod %s\n", path, version, zh, path, version, mh), nil
}

// sumdbLookups returns (and forgets) the lookups the checksum database
// served over HTTP.
func (r *pkgRegistry) sumdbLookups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lookups
	r.lookups = nil
	return l
}

// goFileEnv points the go command at the registry's files instead of its
// server, for runs without a network (the resident helper serves no
// allow-list): GOPROXY=file:// and the checksum database's answers for
// mods, as a client with an empty cache asks for them, written under
// dir. The database serves exactly what its HTTP server would.
func (r *pkgRegistry) goFileEnv(t *testing.T, dir string, mods ...module.Version) []string {
	t.Helper()
	ops := &recordingOps{r: r, dir: dir, key: r.sumdbVKey, config: map[string][]byte{}}
	c := sumdb.NewClient(ops)
	for _, m := range mods {
		if _, err := c.Lookup(m.Path, m.Version); err != nil {
			t.Fatalf("sumdb lookup %v: %v", m, err)
		}
	}
	if ops.err != nil {
		t.Fatal(ops.err)
	}
	env := r.goEnv()
	env[0] = "GOPROXY=file://" + filepath.Join(r.dir, "gomod")
	env[1] = fmt.Sprintf("GOSUMDB=%s file://%s", r.sumdbVKey, dir)
	return env
}

// recordingOps is a checksum database client's storage that fetches from
// the registry's database in-process and keeps every answer as a file.
type recordingOps struct {
	r      *pkgRegistry
	dir    string
	key    string
	config map[string][]byte
	err    error
}

func (o *recordingOps) ReadRemote(p string) ([]byte, error) {
	rec := httptest.NewRecorder()
	o.r.sumdbHandler.ServeHTTP(rec, httptest.NewRequest("GET", p, nil))
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", p, rec.Code, rec.Body)
	}
	f := filepath.Join(o.dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		o.err = err
	} else if err := os.WriteFile(f, rec.Body.Bytes(), 0o644); err != nil {
		o.err = err
	}
	return rec.Body.Bytes(), nil
}

func (o *recordingOps) ReadConfig(file string) ([]byte, error) {
	if file == "key" {
		return []byte(o.key), nil
	}
	return o.config[file], nil
}

func (o *recordingOps) WriteConfig(file string, old, new []byte) error {
	if !bytes.Equal(o.config[file], old) {
		return sumdb.ErrWriteConflict
	}
	o.config[file] = new
	return nil
}

func (o *recordingOps) ReadCache(string) ([]byte, error) { return nil, os.ErrNotExist }
func (o *recordingOps) WriteCache(string, []byte)        {}
func (o *recordingOps) Log(string)                       {}
func (o *recordingOps) SecurityError(msg string)         { o.err = fmt.Errorf("sumdb: %s", msg) }

// ---------------------------------------------------------------------------
// npm

// npmEnv points npm, pnpm and yarn 1 at the registry.
func (r *pkgRegistry) npmEnv() []string {
	reg := r.base + "/npm/"
	return []string{"npm_config_registry=" + reg, "pnpm_config_registry=" + reg, "YARN_REGISTRY=" + reg}
}

// publishNpm adds a package version whose index.js exports greeting.
func (r *pkgRegistry) publishNpm(t *testing.T, name, version string, deps map[string]string, js string) {
	t.Helper()
	pj, _ := json.Marshal(map[string]any{"name": name, "version": version, "main": "index.js", "dependencies": deps})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.npm[name] = append(r.npm[name], npmVersion{Version: version, Deps: deps, Tarball: tarGz(t, map[string]string{
		"package/package.json": string(pj),
		"package/index.js":     js,
	})})
}

// npmTarball is a published version's tarball, nil if there is none.
func (r *pkgRegistry) npmTarball(name, version string) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.npm[name] {
		if v.Version == version {
			return v.Tarball
		}
	}
	return nil
}

func (r *pkgRegistry) serveNpm(w http.ResponseWriter, req *http.Request) {
	p := strings.TrimPrefix(req.URL.Path, "/npm/")
	r.mu.Lock()
	defer r.mu.Unlock()
	if name, file, ok := strings.Cut(p, "/-/"); ok {
		for _, v := range r.npm[name] {
			if file == name+"-"+v.Version+".tgz" {
				w.Header().Set("Content-Type", "application/octet-stream")
				w.Write(v.Tarball)
				return
			}
		}
		http.NotFound(w, req)
		return
	}
	vs, ok := r.npm[p]
	if !ok {
		http.NotFound(w, req)
		return
	}
	// Published long ago, so that no minimum release age holds it back.
	const published = "2020-01-02T03:04:05.000Z"
	versions := map[string]any{}
	times := map[string]string{"created": published, "modified": published}
	latest := ""
	for _, v := range vs {
		sha1sum := sha1.Sum(v.Tarball)
		sha512sum := sha512.Sum512(v.Tarball)
		versions[v.Version] = map[string]any{
			"name": p, "version": v.Version, "main": "index.js", "dependencies": v.Deps,
			"dist": map[string]any{
				"tarball":   fmt.Sprintf("%s/npm/%s/-/%s-%s.tgz", r.base, p, p, v.Version),
				"shasum":    hex.EncodeToString(sha1sum[:]),
				"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sha512sum[:]),
			},
		}
		times[v.Version] = published
		latest = v.Version
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"name": p, "dist-tags": map[string]string{"latest": latest}, "versions": versions, "time": times})
}

// ---------------------------------------------------------------------------
// pip

// publishWheel adds a pure-Python wheel of project (a module of the same
// name, with underscores) holding py, requiring requires.
func (r *pkgRegistry) publishWheel(t *testing.T, project, version, py string, requires ...string) {
	t.Helper()
	mod := strings.ReplaceAll(project, "-", "_")
	di := mod + "-" + version + ".dist-info"
	meta := "Metadata-Version: 2.1\nName: " + project + "\nVersion: " + version + "\n"
	for _, q := range requires {
		meta += "Requires-Dist: " + q + "\n"
	}
	files := map[string]string{
		mod + ".py":      py,
		di + "/METADATA": meta,
		di + "/WHEEL":    "Wheel-Version: 1.0\nGenerator: agentbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
	}
	var record strings.Builder
	for _, name := range sortedKeys(files) {
		sum := sha256.Sum256([]byte(files[name]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", name, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[name]))
	}
	record.WriteString(di + "/RECORD,,\n")
	files[di+"/RECORD"] = record.String()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range sortedKeys(files) {
		fw, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		fw.Write([]byte(files[name]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	whl := mod + "-" + version + "-py3-none-any.whl"
	writeFile(t, filepath.Join(r.dir, "files", whl), buf.String())
	r.mu.Lock()
	r.wheels[project] = append(r.wheels[project], whl)
	r.mu.Unlock()
}

func (r *pkgRegistry) serveSimple(w http.ResponseWriter, req *http.Request) {
	project := strings.Trim(strings.TrimPrefix(req.URL.Path, "/simple/"), "/")
	r.mu.Lock()
	whls := slices.Clone(r.wheels[project])
	r.mu.Unlock()
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html><body>\n")
	if project == "pip" {
		// pip's self-version check asks the index for pip and records
		// the answer in its cache directory: list an old one (never
		// downloaded), so that the check completes quietly.
		b.WriteString("<a href=\"/files/pip-1.0-py3-none-any.whl\">pip-1.0-py3-none-any.whl</a><br>\n</body></html>\n")
		io.WriteString(w, b.String())
		return
	}
	if len(whls) == 0 {
		http.NotFound(w, req)
		return
	}
	for _, f := range whls {
		body, err := os.ReadFile(filepath.Join(r.dir, "files", f))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		sum := sha256.Sum256(body)
		fmt.Fprintf(&b, "<a href=\"/files/%s#sha256=%x\">%s</a><br>\n", html.EscapeString(f), sum, html.EscapeString(f))
	}
	b.WriteString("</body></html>\n")
	w.Header().Set("Content-Type", "text/html")
	w.Header().Set("Cache-Control", "max-age=600, public")
	io.WriteString(w, b.String())
}

// pipEnv points pip at the simple index.
func (r *pkgRegistry) pipEnv() []string {
	return []string{"PIP_INDEX_URL=" + r.base + "/simple/", "PIP_TRUSTED_HOST=registry.test"}
}

// ---------------------------------------------------------------------------
// Cargo

// publishCrate adds a library crate to the index (a git repository
// under dir, read through file://) and its .crate to the downloads.
func (r *pkgRegistry) publishCrate(t *testing.T, name, version, lib string) {
	t.Helper()
	root := name + "-" + version + "/"
	crate := tarGz(t, map[string]string{
		root + "Cargo.toml": fmt.Sprintf("[package]\nname = %q\nversion = %q\nedition = \"2018\"\n", name, version),
		root + "src/lib.rs": lib,
	})
	sum := sha256.Sum256(crate)
	line, _ := json.Marshal(map[string]any{"name": name, "vers": version, "deps": []any{}, "cksum": hex.EncodeToString(sum[:]), "features": map[string]any{}, "yanked": false})
	index := filepath.Join(r.dir, "cargo-index")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.crates[name+"/"+version] = crate
	if _, err := os.Stat(filepath.Join(index, ".git")); err != nil {
		writeFile(t, filepath.Join(index, "config.json"), fmt.Sprintf(`{"dl":"%s/crates/{crate}/{version}/download"}`, r.base))
		gitIn(t, index, "init", "-q")
	}
	f := filepath.Join(index, crateIndexPath(name))
	old, _ := os.ReadFile(f)
	writeFile(t, f, string(old)+string(line)+"\n")
	gitIn(t, index, "add", "-A")
	gitIn(t, index, "commit", "-q", "-m", "publish "+name+" "+version)
}

// cargoIndex is the index's URL.
func (r *pkgRegistry) cargoIndex() string { return "file://" + filepath.Join(r.dir, "cargo-index") }

// crateIndexPath is where the index keeps a crate's lines (The Cargo
// Book, "Registry Index").
func crateIndexPath(name string) string {
	switch n := strings.ToLower(name); len(n) {
	case 1, 2:
		return path.Join(fmt.Sprint(len(n)), n)
	case 3:
		return path.Join("3", n[:1], n)
	default:
		return path.Join(n[:2], n[2:4], n)
	}
}

func (r *pkgRegistry) serveCrate(w http.ResponseWriter, req *http.Request) {
	// /crates/NAME/VERSION/download
	parts := strings.Split(strings.TrimPrefix(req.URL.Path, "/crates/"), "/")
	if len(parts) != 3 || parts[2] != "download" {
		http.NotFound(w, req)
		return
	}
	r.mu.Lock()
	crate, ok := r.crates[parts[0]+"/"+parts[1]]
	r.mu.Unlock()
	if !ok {
		http.NotFound(w, req)
		return
	}
	w.Write(crate)
}

// gitIn runs git in dir with a fixed identity and no user configuration.
func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=agentbox-test", "-c", "user.email=test@agentbox.invalid", "-c", "init.defaultBranch=master"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
	}
}

// ---------------------------------------------------------------------------
// Helpers

func tarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range sortedKeys(files) {
		body := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg, ModTime: time.Unix(1577934245, 0)}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// maps returns the union of ms, later ones winning.
func maps(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
