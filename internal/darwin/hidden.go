package darwin

import (
	"fmt"
	"path"
	"strings"
)

// Hidden paths: what the command must not read (policy.Hidden and
// policy.HideRule). Three rule groups come last in the profile, so they
// override everything before them:
//
//	(deny file-read* file-write* (subpath HIDDEN) ...)
//	(deny file-read* (subpath BASE) (require-all (subpath BASE) (regex ...)) ...)
//	(allow file-read* (subpath REOPEN) (require-all (subpath BASE) (regex KEEP)) ...)
//	(allow file-read-metadata (literal HIDDEN-DIR-ON-THE-WAY) ...)
//
// and the directories above each hidden path and each rule's base cannot
// be renamed or removed, so a hidden file cannot be moved out from under
// its rule.
//
// A path found when the command starts is denied reading and writing, as
// the Linux backend's read-only masks are; a rule's base and its pattern
// are denied reading only, whenever a match appears, so a file the command
// creates later is hidden too (it may create it, not read it back).
//
// A pattern is the part of the rule below its base; the base is a
// parameter like every path, and the pattern becomes a regular expression
// that pins the base's depth with /[^/]+ repeats, as for protected names.
// Only glob syntax and plain ASCII reach the text as themselves; every
// other character (quotes, backslashes, brackets, non-ASCII) becomes a
// wider match ([^/] or [^/]+), which can hide more than the pattern says
// but never less. A hidden file reads as an error (EPERM) rather than as
// empty, and a hidden directory cannot be listed at all.

// HideRule is one rule of what the command must not read: the glob
// Pattern ("" = Base itself) below Base; Keep are name patterns of Base's
// direct entries that stay readable (.ssh's public keys).
type HideRule struct {
	Base, Pattern string
	Keep          []string
}

func (g *gen) validateHidden(in Input) error {
	for _, p := range append(append([]string{}, in.Hidden...), in.Reopen...) {
		if err := checkPath("hidden path", p); err != nil {
			return err
		}
	}
	for _, p := range in.Hidden {
		if p == "/" {
			return fmt.Errorf(`hidden path "/": the whole filesystem cannot be hidden`)
		}
	}
	for _, r := range in.HideRules {
		if err := checkPath("hide rule base", r.Base); err != nil {
			return err
		}
		if r.Pattern == "" && r.Base == "/" {
			return fmt.Errorf(`hide rule "/": the whole filesystem cannot be hidden`)
		}
		for _, el := range strings.Split(r.Pattern, "/") {
			if r.Pattern != "" && (el == "" || el == "." || el == "..") {
				return fmt.Errorf("hide rule %q below %q: empty, . or .. element", r.Pattern, r.Base)
			}
		}
		for _, k := range r.Keep {
			if k == "" || strings.Contains(k, "/") {
				return fmt.Errorf("hide rule %q: keep pattern %q is not one name", r.Base, k)
			}
		}
	}
	return nil
}

func (g *gen) hidden(b *strings.Builder, in Input) {
	hidden := dedupe(in.Hidden)
	if len(hidden) == 0 && len(in.HideRules) == 0 {
		return
	}
	g.rule(b, "\n; Hidden paths found when the command started: no reading, no writing.\n(deny file-read* file-write*", "subpath", "HIDDEN", hidden)
	var keep []string
	if len(in.HideRules) > 0 {
		b.WriteString("\n; Hide rules, for whatever matches them whenever it appears.\n(deny file-read*")
		for _, r := range in.HideRules {
			base := g.param("HIDEBASE", r.Base)
			if r.Pattern == "" {
				b.WriteString("\n  (subpath " + base + ")")
			} else {
				b.WriteString("\n  (require-all (subpath " + base + ")")
				b.WriteString("\n    (regex #\"^" + strings.Repeat("/[^/]+", depth(r.Base)) + patternRegex(r.Pattern) + "(/|$)\"))")
			}
			for _, k := range r.Keep {
				keep = append(keep, "\n  (require-all (subpath "+base+")\n    (regex #\"^"+strings.Repeat("/[^/]+", depth(r.Base))+"/"+elementRegex(k)+"$\"))")
			}
		}
		b.WriteString(")\n")
	}
	reopen := dedupe(in.Reopen)
	if len(reopen) > 0 || len(keep) > 0 {
		b.WriteString("\n; Re-opened inside hidden paths: readable again.\n(allow file-read*")
		g.filters(b, "subpath", "REOPEN", reopen)
		for _, k := range dedupe(keep) {
			b.WriteString(k)
		}
		b.WriteString(")\n")
	}
	// A re-opened path must stay reachable: the hidden directories on its
	// way keep their metadata (stat, not listing), in case Seatbelt
	// checks the components of a path it resolves.
	var meta []string
	for _, r := range reopen {
		for a := path.Dir(r); a != "/"; a = path.Dir(a) {
			if within(a, hidden) {
				meta = append(meta, a)
			}
		}
	}
	for _, r := range in.HideRules {
		if r.Pattern == "" && len(r.Keep) > 0 {
			meta = append(meta, r.Base)
		}
	}
	g.rule(b, "\n; Hidden directories holding re-opened paths: their metadata, not their listing.\n(allow file-read-metadata", "literal", "HIDDENDIR", dedupe(meta))
	var pinned []string
	for _, p := range hidden {
		pinned = ancestors(pinned, path.Dir(p))
	}
	for _, r := range in.HideRules {
		pinned = ancestors(pinned, r.Base)
	}
	g.rule(b, "\n; Directories above hidden paths and hide rules cannot be renamed or removed.\n(deny file-write-unlink", "literal", "ANCESTOR", dedupe(pinned))
}

// within reports whether p is one of dirs or lies beneath one.
func within(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// patternRegex is the regular expression for a slash glob below a base:
// "*", "?" and "[...]" within one element, "**" any number of elements.
// It starts with "/" (or matches nothing more, for a leading "**").
func patternRegex(pattern string) string {
	els := strings.Split(pattern, "/")
	var b strings.Builder
	for i, el := range els {
		if el == "**" {
			if i == len(els)-1 {
				b.WriteString("(/.*)?")
			} else {
				b.WriteString("(/[^/]+)*")
			}
			continue
		}
		b.WriteString("/" + elementRegex(el))
	}
	return b.String()
}

// elementRegex is the expression for one glob element. No backslash is
// ever written: a character that would need one is bracketed or widened.
func elementRegex(el string) string {
	var b strings.Builder
	wide := false
	for i := 0; i < len(el); i++ {
		c := el[i]
		if c >= 0x80 {
			// A run of non-ASCII bytes: one or more characters, whether
			// the engine counts bytes or code points.
			if !wide {
				b.WriteString("[^/]+")
			}
			wide = true
			continue
		}
		wide = false
		switch {
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '[':
			// A bracket expression matches one character: any one.
			if j := strings.IndexByte(el[i+1:], ']'); j >= 0 {
				i += j + 1
			}
			b.WriteString("[^/]")
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("_-,=@%~:! ", c) >= 0:
			b.WriteByte(c)
		case strings.IndexByte(".+()|${}", c) >= 0:
			b.WriteString("[" + string(c) + "]")
		default:
			// Quotes, backslash, ^, ], control characters.
			b.WriteString("[^/]")
		}
	}
	return b.String()
}
