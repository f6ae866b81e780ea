package secrets

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Bounds limit a glob's expansion: a pattern is expanded by walking the
// directories it can match under, once when a command starts (and again
// for each later command of a session), so an unbounded walk would make
// every command as slow as the largest tree it names.
type Bounds struct {
	// MaxDepth is how many directories deep "**" reaches below the
	// pattern's base (Codex's glob_scan_max_depth).
	MaxDepth int
	// MaxEntries is how many directory entries one expansion may read.
	MaxEntries int
	// MaxMatches is how many paths one pattern may hide.
	MaxMatches int
}

// DefaultBounds are the bounds unless the config sets glob_scan_max_depth.
var DefaultBounds = Bounds{MaxDepth: 32, MaxEntries: 200_000, MaxMatches: 4096}

// ErrBound is wrapped by the errors of an expansion that went past a
// bound: the command must not run, since a match beyond the bound would
// be readable.
var ErrBound = errors.New("glob expansion over its bound")

// HasMeta reports whether a pattern element holds glob syntax.
func HasMeta(s string) bool { return strings.ContainsAny(s, "*?[") }

// ValidPattern reports a malformed glob (an unclosed "[", an empty
// element).
func ValidPattern(pattern string) error {
	for _, el := range strings.Split(pattern, "/") {
		if el == "**" || !HasMeta(el) {
			continue
		}
		if _, err := path.Match(el, ""); err != nil {
			return fmt.Errorf("pattern %q: %w", pattern, err)
		}
	}
	return nil
}

// SplitBase splits a slash pattern into the longest leading part free of
// glob syntax and the rest ("" when there is none).
func SplitBase(pattern string) (base, rest string) {
	els := strings.Split(pattern, "/")
	for i, el := range els {
		if HasMeta(el) {
			return strings.Join(els[:i], "/"), strings.Join(els[i:], "/")
		}
	}
	return pattern, ""
}

// Expand returns the paths under base (an OS path) that the slash
// pattern rest matches, in walk order. "*", "?" and "[...]" match within
// one element, a leading dot included; "**" matches any number of
// elements, none included. Symbolic links are not followed while
// walking (a link whose name matches is returned; the caller resolves
// it). A directory that cannot be read is skipped (the command cannot
// read it either, running as the same user). Going past b is an error
// wrapping [ErrBound].
func Expand(base, rest string, b Bounds) ([]string, error) {
	if b == (Bounds{}) {
		b = DefaultBounds
	}
	x := expander{b: b, pattern: strings.Split(rest, "/")}
	if err := x.walk(base, 0, 0); err != nil {
		return nil, err
	}
	return x.out, nil
}

type expander struct {
	b       Bounds
	pattern []string
	entries int
	out     []string
}

// walk matches x.pattern[i:] against the entries below dir, which lies
// depth directories below the base.
func (x *expander) walk(dir string, i, depth int) error {
	if i == len(x.pattern) {
		return x.add(dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		// Gone, unreadable to this user (so to the command too), or not
		// a directory: nothing to match below it.
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil
		}
		if fi, serr := os.Stat(dir); serr == nil && !fi.IsDir() {
			return nil
		}
		return fmt.Errorf("reading %s: %w", dir, err)
	}
	x.entries += len(ents)
	if x.entries > x.b.MaxEntries {
		return fmt.Errorf("%w: more than %d directory entries read (under %s)", ErrBound, x.b.MaxEntries, dir)
	}
	return x.match(dir, ents, i, depth)
}

// match matches x.pattern[i:] against ents, the entries of dir: each
// directory is read once, however many "**" reach it.
func (x *expander) match(dir string, ents []fs.DirEntry, i, depth int) error {
	if i == len(x.pattern) {
		return x.add(dir)
	}
	el := x.pattern[i]
	if el == "**" {
		// Zero elements: the rest of the pattern right here.
		if err := x.match(dir, ents, i+1, depth); err != nil {
			return err
		}
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			if !e.IsDir() {
				// A trailing "**" matches files too.
				if i+1 == len(x.pattern) {
					if err := x.add(p); err != nil {
						return err
					}
				}
				continue
			}
			if depth+1 > x.b.MaxDepth {
				return fmt.Errorf("%w: %s is more than %d directories deep", ErrBound, p, x.b.MaxDepth)
			}
			if err := x.walk(p, i, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	for _, e := range ents {
		if ok, _ := path.Match(el, e.Name()); !ok {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if i+1 == len(x.pattern) {
			if err := x.add(p); err != nil {
				return err
			}
		} else if e.IsDir() {
			if err := x.walk(p, i+1, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func (x *expander) add(p string) error {
	x.out = append(x.out, p)
	if len(x.out) > x.b.MaxMatches {
		return fmt.Errorf("%w: more than %d matches", ErrBound, x.b.MaxMatches)
	}
	return nil
}
