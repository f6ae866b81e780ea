package toolcache

import (
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/agentdirs"
)

// cacheDef is one entry of the table of known caches.
type cacheDef struct {
	// Name is short, stable and a valid directory name: it names the
	// per-workspace layer.
	Name string
	// Desc is for doctor.
	Desc string
	// Env is the variable that relocates this cache alone; "" when there
	// is none (cargo's registry moves only with all of CARGO_HOME, which
	// also holds its config and bin directory), so private placement is
	// impossible and the cache stays read-only outside overlays.
	Env string
	// EnvValue builds Env's value for dir given its current value; nil
	// means dir itself.
	EnvValue func(dir, old string) string
	// Path is the host location on goos; "" when it cannot be named.
	Path func(e cacheEnv) string
	// Programs marks a directory of programs (`go install`, `cargo
	// install`) rather than a cache: it is on the user's PATH, so it is
	// never overlaid; its variable always points at a private directory,
	// and the user is told when a command installed something there. Bin
	// is the subdirectory of that directory that holds the programs (""
	// for the directory itself).
	Programs bool
	Bin      string
	// PinEnv sets Env to the cache's own path when it is overlaid too,
	// because another entry may move the directory the tool derives the
	// default from (go-sumdb moves GOPATH, and GOMODCACHE defaults to
	// $GOPATH/pkg/mod).
	PinEnv bool
	// Covers, for a tool's whole home (CARGO_HOME), names the table's
	// entries inside it. A home is never overlaid (it holds the tool's
	// configuration and programs); it is pointed at a private directory
	// only when none of the entries it covers is overlaid and it holds
	// none of Keeps, files the tool reads that a private home would lack.
	Covers []string
	Keeps  []string
	// Settings are NAME=value pairs set whenever this cache is placed:
	// they switch off the tool's writes that no cache can take (yarn 1
	// records its daily update check in ~/.yarnrc, its configuration).
	Settings []string
}

// cacheEnv is what a cache's default path depends on.
type cacheEnv struct {
	getenv func(string) string
	goos   string
	home   string
}

// abs returns getenv(v) when it is an absolute path.
func (e cacheEnv) abs(v string) string {
	if d := e.getenv(v); d != "" && agentdirs.Abs(d, e.goos) {
		return d
	}
	return ""
}

// under joins elements onto base, "" when base is "".
func (e cacheEnv) under(base string, elem ...string) string {
	if base == "" {
		return ""
	}
	if e.goos == "windows" {
		return strings.TrimRight(base, `\/`) + `\` + strings.Join(elem, `\`)
	}
	return filepath.Join(append([]string{base}, elem...)...)
}

// userCache is the platform's per-user cache directory, as Go's
// os.UserCacheDir names it: $XDG_CACHE_HOME or ~/.cache on Linux,
// ~/Library/Caches on macOS, %LocalAppData% on Windows.
func (e cacheEnv) userCache() string {
	switch e.goos {
	case "windows":
		return e.abs("LOCALAPPDATA")
	case "darwin":
		return e.under(e.home, "Library", "Caches")
	}
	if d := e.abs("XDG_CACHE_HOME"); d != "" {
		return d
	}
	return e.under(e.home, ".cache")
}

// xdgCache is $XDG_CACHE_HOME or ~/.cache on every Unix, macOS included
// (uv and sccache on Linux follow it).
func (e cacheEnv) xdgCache() string {
	if d := e.abs("XDG_CACHE_HOME"); d != "" {
		return d
	}
	return e.under(e.home, ".cache")
}

// override returns the path given by v, or def().
func (e cacheEnv) override(v string, def func() string) string {
	if d := e.abs(v); d != "" {
		return d
	}
	return def()
}

// gopath is the first entry of $GOPATH, or ~/go: where the go command
// keeps the checksum database's state (pkg/sumdb), installs programs
// without GOBIN (bin) and, without GOMODCACHE, the module cache (pkg/mod).
func (e cacheEnv) gopath() string {
	sep := ":"
	if e.goos == "windows" {
		sep = ";"
	}
	if first, _, _ := strings.Cut(e.getenv("GOPATH"), sep); first != "" && agentdirs.Abs(first, e.goos) {
		return first
	}
	return e.under(e.home, "go")
}

// cargoHome is $CARGO_HOME or ~/.cargo (%USERPROFILE%\.cargo).
func (e cacheEnv) cargoHome() string {
	if d := e.abs("CARGO_HOME"); d != "" {
		return d
	}
	return e.under(e.home, ".cargo")
}

// knownCaches is the table of tool caches agentbox knows, and of the
// directories of programs the same tools install into. Each entry's
// default path and variable follow the tool's own documentation:
//
//   - Go: `go help cache` (GOCACHE, default os.UserCacheDir()/go-build) and
//     `go help modules`/`go help gopath` (GOMODCACHE, default
//     $GOPATH[0]/pkg/mod, GOPATH default ~/go). The module cache's files
//     and directories are read-only by design (`go clean -modcache` makes
//     them writable first); the overlay copies them up on demand and a
//     `go clean -modcache` inside removes only the sandbox's view. Its
//     download directory holds the lock files and the checksum
//     database's tiles. The checksum database's signed tree head is in
//     $GOPATH[0]/pkg/sumdb/<db>/latest (cmd/go's cfg.SumdbDir), which
//     only GOPATH moves: a private go-sumdb is a private GOPATH, so
//     GOMODCACHE is set explicitly where it is overlaid. `go install`
//     writes $GOBIN, default $GOPATH[0]/bin, which is on the user's PATH:
//     GOBIN is always a private directory. Settings made with `go env -w`
//     (the go/env file) are not read: a cache moved that way stays
//     read-only. Telemetry (~/.config/go/telemetry) stays read-only, as
//     configuration does; the go command then records nothing.
//   - npm: `npm help config` cache (npm_config_cache, default ~/.npm,
//     %LocalAppData%\npm-cache on Windows); its logs and update-check
//     stamp are in it.
//   - Yarn 1: `yarn cache dir` (YARN_CACHE_FOLDER; ~/.cache/yarn,
//     ~/Library/Caches/Yarn, %LocalAppData%\Yarn\Cache). Its daily
//     update check (interactive runs only) records its time in ~/.yarnrc,
//     its configuration, which stays read-only:
//     YARN_DISABLE_SELF_UPDATE_CHECK switches the check off.
//   - pnpm: store-dir ($XDG_DATA_HOME/pnpm/store or
//     ~/.local/share/pnpm/store, ~/Library/pnpm/store,
//     %LocalAppData%\pnpm\store), cache-dir ($XDG_CACHE_HOME/pnpm or
//     ~/.cache/pnpm, ~/Library/Caches/pnpm, %LocalAppData%\pnpm-cache) and
//     state-dir ($XDG_STATE_HOME/pnpm or ~/.local/state/pnpm,
//     ~/.pnpm-state, %LocalAppData%\pnpm-state). pnpm 11 and later read
//     pnpm_config_store_dir and its siblings; pnpm 10 and older read
//     npm_config_store_dir, which agentbox does not set because npm warns
//     about it on every command. Hard links from a store on another file
//     system fall back to copies.
//   - pip: `pip cache dir` (PIP_CACHE_DIR; ~/.cache/pip,
//     ~/Library/Caches/pip, %LocalAppData%\pip\Cache), which also holds
//     its self-version-check state.
//   - uv: docs.astral.sh/uv/reference/storage (UV_CACHE_DIR;
//     $XDG_CACHE_HOME/uv or ~/.cache/uv on Linux and macOS,
//     %LOCALAPPDATA%\uv\cache).
//   - Cargo: $CARGO_HOME/registry and $CARGO_HOME/git (The Cargo Book,
//     "Cargo Home"); no variable moves these alone, and CARGO_HOME holds
//     config.toml and bin/ (on PATH) too, so the home is never overlaid.
//     Where neither cache is overlaid and the home holds no config.toml
//     (no ~/.cargo at all, or rustup's bin/ and env only), CARGO_HOME is
//     a private directory, its .package-cache lock included. `cargo
//     install` writes CARGO_INSTALL_ROOT (default $CARGO_HOME): bin/,
//     .crates.toml and .crates2.json; it is always a private directory.
//   - Maven: ~/.m2/repository, moved with -Dmaven.repo.local in
//     MAVEN_OPTS (read by the mvn launcher script).
//   - Gradle: $GRADLE_USER_HOME/caches and .../wrapper (default
//     ~/.gradle). Private placement moves all of GRADLE_USER_HOME, so the
//     private Gradle home lacks the user's gradle.properties and init.d
//     scripts; the wrapper's distributions then live there too.
//   - ccache: CCACHE_DIR (ccache(1): $XDG_CACHE_HOME/ccache or
//     ~/.cache/ccache, ~/Library/Caches/ccache, %LOCALAPPDATA%\ccache);
//     a legacy ~/.ccache is not detected.
//   - sccache: SCCACHE_DIR (docs/Local.md: ~/.cache/sccache,
//     ~/Library/Caches/Mozilla.sccache, %LOCALAPPDATA%\Mozilla\sccache).
//
// Order matters where an entry covers others (cargo-home after
// cargo-registry and cargo-git): they are placed first.
var knownCaches = []cacheDef{
	{Name: "go-build", Desc: "Go build cache", Env: "GOCACHE", Path: func(e cacheEnv) string {
		return e.override("GOCACHE", func() string { return e.under(e.userCache(), "go-build") })
	}},
	{Name: "go-mod", Desc: "Go module cache", Env: "GOMODCACHE", PinEnv: true, Path: func(e cacheEnv) string {
		return e.override("GOMODCACHE", func() string { return e.under(e.gopath(), "pkg", "mod") })
	}},
	{Name: "go-sumdb", Desc: "Go checksum database state", Env: "GOPATH", Path: func(e cacheEnv) string {
		return e.under(e.gopath(), "pkg", "sumdb")
	}},
	{Name: "go-bin", Desc: "programs from go install", Env: "GOBIN", Programs: true, Path: func(e cacheEnv) string {
		return e.override("GOBIN", func() string { return e.under(e.gopath(), "bin") })
	}},
	{Name: "npm", Desc: "npm cache", Env: "npm_config_cache", Path: func(e cacheEnv) string {
		return e.override("npm_config_cache", func() string {
			if e.goos == "windows" {
				return e.under(e.abs("LOCALAPPDATA"), "npm-cache")
			}
			return e.under(e.home, ".npm")
		})
	}},
	{Name: "yarn", Desc: "Yarn 1 cache", Env: "YARN_CACHE_FOLDER", Settings: []string{"YARN_DISABLE_SELF_UPDATE_CHECK=true"}, Path: func(e cacheEnv) string {
		return e.override("YARN_CACHE_FOLDER", func() string {
			switch e.goos {
			case "windows":
				return e.under(e.abs("LOCALAPPDATA"), "Yarn", "Cache")
			case "darwin":
				return e.under(e.home, "Library", "Caches", "Yarn")
			}
			return e.under(e.xdgCache(), "yarn")
		})
	}},
	{Name: "pnpm-store", Desc: "pnpm content-addressable store", Env: "pnpm_config_store_dir", Path: func(e cacheEnv) string {
		return e.override("pnpm_config_store_dir", func() string {
			switch e.goos {
			case "windows":
				return e.under(e.abs("LOCALAPPDATA"), "pnpm", "store")
			case "darwin":
				return e.under(e.home, "Library", "pnpm", "store")
			}
			if d := e.abs("XDG_DATA_HOME"); d != "" {
				return e.under(d, "pnpm", "store")
			}
			return e.under(e.home, ".local", "share", "pnpm", "store")
		})
	}},
	{Name: "pnpm-cache", Desc: "pnpm metadata cache", Env: "pnpm_config_cache_dir", Path: func(e cacheEnv) string {
		return e.override("pnpm_config_cache_dir", func() string {
			switch e.goos {
			case "windows":
				return e.under(e.abs("LOCALAPPDATA"), "pnpm-cache")
			case "darwin":
				return e.under(e.home, "Library", "Caches", "pnpm")
			}
			return e.under(e.xdgCache(), "pnpm")
		})
	}},
	{Name: "pnpm-state", Desc: "pnpm state (update checks)", Env: "pnpm_config_state_dir", Path: func(e cacheEnv) string {
		return e.override("pnpm_config_state_dir", func() string {
			switch e.goos {
			case "windows":
				return e.under(e.abs("LOCALAPPDATA"), "pnpm-state")
			case "darwin":
				return e.under(e.home, ".pnpm-state")
			}
			if d := e.abs("XDG_STATE_HOME"); d != "" {
				return e.under(d, "pnpm")
			}
			return e.under(e.home, ".local", "state", "pnpm")
		})
	}},
	{Name: "pip", Desc: "pip cache", Env: "PIP_CACHE_DIR", Path: func(e cacheEnv) string {
		return e.override("PIP_CACHE_DIR", func() string {
			switch e.goos {
			case "windows":
				return e.under(e.abs("LOCALAPPDATA"), "pip", "Cache")
			case "darwin":
				return e.under(e.home, "Library", "Caches", "pip")
			}
			return e.under(e.xdgCache(), "pip")
		})
	}},
	{Name: "uv", Desc: "uv cache", Env: "UV_CACHE_DIR", Path: func(e cacheEnv) string {
		return e.override("UV_CACHE_DIR", func() string {
			if e.goos == "windows" {
				return e.under(e.abs("LOCALAPPDATA"), "uv", "cache")
			}
			return e.under(e.xdgCache(), "uv")
		})
	}},
	{Name: "cargo-registry", Desc: "Cargo registry cache", Path: func(e cacheEnv) string {
		return e.under(e.cargoHome(), "registry")
	}},
	{Name: "cargo-git", Desc: "Cargo git checkouts", Path: func(e cacheEnv) string {
		return e.under(e.cargoHome(), "git")
	}},
	{Name: "cargo-home", Desc: "Cargo home", Env: "CARGO_HOME",
		Covers: []string{"cargo-registry", "cargo-git"}, Keeps: []string{"config.toml", "config"},
		Path: func(e cacheEnv) string { return e.cargoHome() }},
	{Name: "cargo-install", Desc: "programs from cargo install", Env: "CARGO_INSTALL_ROOT", Programs: true, Bin: "bin", Path: func(e cacheEnv) string {
		return e.under(e.override("CARGO_INSTALL_ROOT", e.cargoHome), "bin")
	}},
	{Name: "maven", Desc: "Maven local repository", Env: "MAVEN_OPTS",
		EnvValue: func(dir, old string) string {
			return strings.TrimSpace(old + " -Dmaven.repo.local=" + dir)
		},
		Path: func(e cacheEnv) string { return e.under(e.home, ".m2", "repository") }},
	{Name: "gradle-caches", Desc: "Gradle caches", Env: "GRADLE_USER_HOME", Path: func(e cacheEnv) string {
		return e.under(e.override("GRADLE_USER_HOME", func() string { return e.under(e.home, ".gradle") }), "caches")
	}},
	{Name: "gradle-wrapper", Desc: "Gradle wrapper distributions", Path: func(e cacheEnv) string {
		return e.under(e.override("GRADLE_USER_HOME", func() string { return e.under(e.home, ".gradle") }), "wrapper")
	}},
	{Name: "ccache", Desc: "ccache", Env: "CCACHE_DIR", Path: func(e cacheEnv) string {
		return e.override("CCACHE_DIR", func() string {
			switch e.goos {
			case "windows":
				return e.under(e.abs("LOCALAPPDATA"), "ccache")
			case "darwin":
				return e.under(e.home, "Library", "Caches", "ccache")
			}
			return e.under(e.xdgCache(), "ccache")
		})
	}},
	{Name: "sccache", Desc: "sccache local cache", Env: "SCCACHE_DIR", Path: func(e cacheEnv) string {
		return e.override("SCCACHE_DIR", func() string {
			switch e.goos {
			case "windows":
				return e.under(e.abs("LOCALAPPDATA"), "Mozilla", "sccache")
			case "darwin":
				return e.under(e.home, "Library", "Caches", "Mozilla.sccache")
			}
			return e.under(e.xdgCache(), "sccache")
		})
	}},
}
