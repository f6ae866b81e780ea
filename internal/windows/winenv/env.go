// Package winenv builds what a Windows child process is given: its
// environment (with agentbox's advisory network block), the environment
// block CreateProcess takes, and its command line, quoted for the MSVCRT
// argument parser or for cmd.exe when the program is a batch file.
//
// It is platform-free so all of it is tested on Linux.
//
// # Advisory network block
//
// Without administrator rights Windows offers no way to cut one process
// tree off the network, so the unelevated sandbox only steers well-behaved
// tools: proxy variables point at a closed port (127.0.0.1:9), git's ssh
// transport and ssh/scp on PATH fail, package managers are told to stay
// offline. A program that ignores these can still reach the network;
// callers must say so to the user.
package winenv

import (
	"errors"
	"slices"
	"strings"
	"unicode/utf16"
)

// DeadProxy is where proxy variables point: the discard port on loopback,
// on which nothing listens, so connections fail at once.
const DeadProxy = "http://127.0.0.1:9"

// StubNames are the programs the denybin directory shadows.
var StubNames = []string{"ssh", "scp"}

// stubExts are written for each stub; PATHEXT is reordered so they come
// before .EXE and .COM.
var stubExts = []string{".CMD", ".BAT"}

// Offline returns the variables the advisory block sets. They override any
// inherited value: a proxy the agent's environment already names is exactly
// what must not be used.
func Offline() []string {
	return []string{
		"HTTP_PROXY=" + DeadProxy,
		"HTTPS_PROXY=" + DeadProxy,
		"ALL_PROXY=" + DeadProxy,
		"GIT_HTTP_PROXY=" + DeadProxy,
		"GIT_HTTPS_PROXY=" + DeadProxy,
		"NO_PROXY=localhost,127.0.0.1,::1",
		// git runs this through its shell; cmd's "exit 1" fails at
		// once and needs no file that could go missing.
		"GIT_SSH_COMMAND=cmd.exe /d /c exit 1",
		// Only local repositories may be cloned or fetched.
		"GIT_ALLOW_PROTOCOL=file",
		"PIP_NO_INDEX=1",
		"PIP_DISABLE_PIP_VERSION_CHECK=1",
		"NPM_CONFIG_OFFLINE=true",
		"YARN_ENABLE_OFFLINE_MODE=1",
		"CARGO_NET_OFFLINE=true",
		"GOPROXY=off",
		"AGENTBOX_NETWORK=advisory-off",
	}
}

// StubScript is the content of each denybin stub: it says why it failed on
// stderr and exits 1. cmd.exe needs CRLF line endings; a batch file with
// bare LF can misparse labels and blocks.
func StubScript(name string) string {
	return "@echo off\r\n" +
		"echo agentbox: " + name + " is blocked: network access is off in this sandbox (advisory block) 1>&2\r\n" +
		"exit /b 1\r\n"
}

// StubFiles maps file names to contents for the denybin directory.
func StubFiles() map[string]string {
	m := map[string]string{}
	for _, n := range StubNames {
		for _, e := range stubExts {
			m[n+strings.ToLower(e)] = StubScript(n)
		}
	}
	return m
}

// Get returns the value of key in env, matching names case-insensitively
// as Windows does; the last entry wins.
func Get(env []string, key string) (string, bool) {
	val, ok := "", false
	for _, kv := range env {
		k, v, found := cutEnv(kv)
		if found && strings.EqualFold(k, key) {
			val, ok = v, true
		}
	}
	return val, ok
}

// Set returns env with key set to val, removing every other spelling of
// key.
func Set(env []string, key, val string) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, ok := cutEnv(kv)
		return ok && strings.EqualFold(k, key)
	})
	return append(out, key+"="+val)
}

// cutEnv splits KEY=VALUE. Windows keeps per-drive current directories as
// "=C:=C:\dir"; the leading '=' is part of the name.
func cutEnv(kv string) (k, v string, ok bool) {
	i := strings.IndexByte(kv[min(1, len(kv)):], '=')
	if i < 0 {
		return kv, "", false
	}
	i += min(1, len(kv))
	return kv[:i], kv[i+1:], true
}

// NoNetwork rewrites env for the advisory block: the Offline variables,
// denybin first on PATH, and PATHEXT with the stub extensions first.
func NoNetwork(env []string, denybin string) []string {
	for _, kv := range Offline() {
		k, v, _ := cutEnv(kv)
		env = Set(env, k, v)
	}
	path, _ := Get(env, "PATH")
	var keep []string
	for _, d := range strings.Split(path, ";") {
		if d != "" && !strings.EqualFold(strings.TrimRight(d, `\`), strings.TrimRight(denybin, `\`)) {
			keep = append(keep, d)
		}
	}
	env = Set(env, "PATH", strings.Join(append([]string{denybin}, keep...), ";"))
	pathext, ok := Get(env, "PATHEXT")
	if !ok || pathext == "" {
		pathext = ".COM;.EXE;.BAT;.CMD"
	}
	return Set(env, "PATHEXT", ReorderPathext(pathext))
}

// ReorderPathext puts .CMD and .BAT first and keeps the rest in order, so
// a lookup that tries extensions before directories still finds the stubs
// before ssh.exe.
func ReorderPathext(pathext string) string {
	out := slices.Clone(stubExts)
	for _, e := range strings.Split(pathext, ";") {
		if e != "" && !slices.ContainsFunc(out, func(x string) bool { return strings.EqualFold(x, e) }) {
			out = append(out, e)
		}
	}
	return strings.Join(out, ";")
}

// Dedup keeps the last value of each name, comparing names
// case-insensitively as Windows does, and keeps first-seen order.
func Dedup(env []string) []string {
	last := map[string]int{}
	for i, kv := range env {
		k, _, _ := cutEnv(kv)
		last[strings.ToUpper(k)] = i
	}
	var out []string
	for i, kv := range env {
		k, _, _ := cutEnv(kv)
		if last[strings.ToUpper(k)] == i {
			out = append(out, kv)
		}
	}
	return out
}

// ErrNUL is returned for an environment entry containing a NUL character,
// which would silently truncate the block.
var ErrNUL = errors.New("environment entry contains a NUL character")

// Block builds a CREATE_UNICODE_ENVIRONMENT block: entries de-duplicated
// case-insensitively, SYSTEMROOT added from systemRoot when missing (many
// Windows DLLs fail to initialise without it), sorted by upper-cased name
// as CreateProcess documents, each NUL-terminated, and a final NUL.
func Block(env []string, systemRoot string) ([]uint16, error) {
	env = Dedup(env)
	if _, ok := Get(env, "SYSTEMROOT"); !ok && systemRoot != "" {
		env = append(env, "SYSTEMROOT="+systemRoot)
	}
	for _, kv := range env {
		if strings.IndexByte(kv, 0) >= 0 {
			return nil, ErrNUL
		}
	}
	slices.SortStableFunc(env, func(a, b string) int {
		ka, _, _ := cutEnv(a)
		kb, _, _ := cutEnv(b)
		return strings.Compare(strings.ToUpper(ka), strings.ToUpper(kb))
	})
	var b []uint16
	for _, kv := range env {
		b = append(b, utf16.Encode([]rune(kv))...)
		b = append(b, 0)
	}
	if len(env) == 0 {
		b = append(b, 0)
	}
	return append(b, 0), nil
}
