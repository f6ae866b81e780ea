package secrets

import (
	"slices"
	"strings"
)

// Inherit is shell_environment_policy's inherit: where the command's
// environment starts from.
type Inherit string

const (
	InheritAll  Inherit = "all"  // the caller's whole environment
	InheritCore Inherit = "core" // only [CoreVars]
	InheritNone Inherit = "none" // nothing
)

// EnvPolicy is Codex's shell_environment_policy plus agentbox's
// --env NAME. The zero value inherits everything but the default
// secret patterns.
type EnvPolicy struct {
	Inherit               Inherit // "" = all
	IgnoreDefaultExcludes bool
	Exclude               []string // patterns removed
	IncludeOnly           []string // when non-empty, only matches stay
	Set                   []EnvVar // set after the excludes
	// Pass are names the caller's value reaches the command of, whatever
	// the rules above say (--env NAME); a Set entry of the name wins.
	Pass []string
}

// EnvVar is one NAME=VALUE of [EnvPolicy.Set].
type EnvVar struct{ Name, Value string }

// coreVars are Codex's "core" variables.
var coreVars = []string{"HOME", "LOGNAME", "PATH", "SHELL", "USER", "USERNAME", "TMPDIR", "TEMP", "TMP"}

// windowsCore are the variables Windows programs cannot start without
// (the system directories, the executable extensions), kept by "core"
// there too.
var windowsCore = []string{"SYSTEMROOT", "WINDIR", "COMSPEC", "PATHEXT", "SYSTEMDRIVE", "USERPROFILE", "APPDATA", "LOCALAPPDATA", "PROGRAMDATA", "PROGRAMFILES", "PROGRAMFILES(X86)", "PROGRAMW6432", "COMMONPROGRAMFILES", "NUMBER_OF_PROCESSORS", "PROCESSOR_ARCHITECTURE", "OS"}

// CoreVars returns the names inherit = "core" keeps on goos.
func CoreVars(goos string) []string {
	if goos == "windows" {
		return slices.Concat(coreVars, windowsCore)
	}
	return slices.Clone(coreVars)
}

// ParseInherit checks an inherit value.
func ParseInherit(s string) (Inherit, error) {
	switch Inherit(s) {
	case InheritAll, InheritCore, InheritNone:
		return Inherit(s), nil
	}
	return "", &ValueError{Value: s, Want: `"all", "core" or "none"`}
}

// ValueError is a bad value of a key.
type ValueError struct{ Value, Want string }

func (e *ValueError) Error() string {
	return "invalid value " + quote(e.Value) + " (want " + e.Want + ")"
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// FilterEnv applies p to env (NAME=VALUE entries, as os.Environ gives
// them) in Codex's order: inherit, the default excludes (the secret
// patterns, unless IgnoreDefaultExcludes), Exclude, Set, IncludeOnly;
// then Pass restores the caller's value of each name it lists that is
// not there. It returns the command's environment and the sorted names of
// the caller's variables that did not reach it. Names compare
// case-insensitively on Windows (goos), as the system does.
func FilterEnv(p EnvPolicy, env []string, goos string) (out []string, withheld []string) {
	fold := goos == "windows"
	key := func(n string) string {
		if fold {
			return strings.ToUpper(n)
		}
		return n
	}
	var core map[string]bool
	if p.Inherit == InheritCore {
		core = map[string]bool{}
		for _, n := range CoreVars(goos) {
			core[key(n)] = true
		}
	}
	// Sized for env up front: a session filters its caller's environment
	// for every command, and growing these maps was most of the cost.
	// entry is env's own NAME=VALUE string while value is env's, reused
	// for the result rather than joined again.
	type kv struct{ name, value, entry string }
	vars := make([]kv, 0, len(env))
	index := make(map[string]int, len(env))
	caller := make(map[string]string, len(env))
	callerNames := make([]string, 0, len(env))
	for _, e := range env {
		name, value, ok := strings.Cut(e, "=")
		if !ok {
			continue
		}
		if name == "" && fold {
			// Windows' per-drive directories ("=C:=C:\\x") have no name
			// before the first "=".
			if n2, v2, ok2 := strings.Cut(value, "="); ok2 {
				name, value = "="+n2, v2
			}
		}
		if _, dup := caller[key(name)]; !dup {
			callerNames = append(callerNames, name)
		}
		caller[key(name)] = value
		keep := false
		switch p.Inherit {
		case InheritAll, "":
			keep = true
		case InheritCore:
			keep = core[key(name)]
		}
		if !keep {
			continue
		}
		if i, ok := index[key(name)]; ok {
			vars[i].value, vars[i].entry = value, e // the last wins, as for getenv
			continue
		}
		index[key(name)] = len(vars)
		vars = append(vars, kv{name, value, e})
	}
	drop := func(pred func(string) bool) {
		vars = slices.DeleteFunc(vars, func(v kv) bool { return pred(v.name) })
	}
	if !p.IgnoreDefaultExcludes {
		drop(IsSecretName)
	}
	if len(p.Exclude) > 0 {
		exclude := compileNames(p.Exclude)
		drop(func(n string) bool { return matchAny(exclude, strings.ToUpper(n)) })
	}
	for _, s := range p.Set {
		i := slices.IndexFunc(vars, func(v kv) bool { return key(v.name) == key(s.Name) })
		if i >= 0 {
			vars[i].value, vars[i].entry = s.Value, ""
		} else {
			vars = append(vars, kv{s.Name, s.Value, ""})
		}
	}
	if len(p.IncludeOnly) > 0 {
		only := compileNames(p.IncludeOnly)
		drop(func(n string) bool { return !matchAny(only, strings.ToUpper(n)) })
	}
	for _, n := range p.Pass {
		v, ok := caller[key(n)]
		if !ok || slices.ContainsFunc(vars, func(x kv) bool { return key(x.name) == key(n) }) {
			continue
		}
		vars = append(vars, kv{n, v, ""})
	}
	have := make(map[string]bool, len(vars))
	if len(vars) > 0 {
		out = make([]string, 0, len(vars))
	}
	for _, v := range vars {
		have[key(v.name)] = true
		if v.entry == "" {
			v.entry = v.name + "=" + v.value
		}
		out = append(out, v.entry)
	}
	for _, n := range callerNames {
		if !have[key(n)] {
			withheld = append(withheld, n)
		}
	}
	slices.Sort(withheld)
	return out, withheld
}
