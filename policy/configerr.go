package policy

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/agentbox/agentbox/internal/spelling"
)

// The decoder's messages name Go's types ("struct field
// policy.WorkspaceWriteSection.AllowGitWrites of type bool"), which mean
// nothing to someone editing a TOML file. configError rewrites them from
// the config's own shape, read from Config's toml tags: the key, the
// file and line, what the key takes and what was found; and for an
// unknown key, the section it belongs in when it is another section's,
// or the near spelling it may have meant.

func configError(path string, err error) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		var msgs []string
		for _, e := range strict.Errors {
			row, col := e.Position()
			// A [section] the config does not have is a "missing
			// table" to the decoder.
			table := strings.Contains(e.Error(), "missing table")
			msgs = append(msgs, fmt.Sprintf("config %s:%d:%d: %s", path, row, col, unknownKey(e.Key(), table)))
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		key := strings.Join(de.Key(), ".")
		msg := de.Error()
		if t, ok := keyType(de.Key()); ok && strings.Contains(msg, "cannot decode") {
			msg = "want " + describeType(t, de.Key()) + ", got " + found(msg, t)
		}
		if key != "" {
			return fmt.Errorf("config %s:%d:%d: key %s: %s", path, row, col, key, msg)
		}
		return fmt.Errorf("config %s:%d:%d: %s", path, row, col, msg)
	}
	return fmt.Errorf("config %s: %w", path, err)
}

// configType is the shape of config.toml.
var configType = reflect.TypeFor[Config]()

// tomlName is the key of a struct field, "" for one that is not a key.
func tomlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	return name
}

// keyType is the Go type the value at key decodes into (pointers
// removed).
func keyType(key []string) (reflect.Type, bool) {
	t := configType
	for _, k := range key {
		switch t.Kind() {
		case reflect.Struct:
			found := false
			for i := range t.NumField() {
				if f := t.Field(i); tomlName(f) == k {
					t, found = deref(f.Type), true
					break
				}
			}
			if !found {
				return nil, false
			}
		case reflect.Map:
			t = deref(t.Elem())
		default:
			return nil, false
		}
	}
	return t, true
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// describeType is what a key of type t takes, in TOML's words.
func describeType(t reflect.Type, key []string) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array of " + plural(describeType(deref(t.Elem()), nil))
	case reflect.Struct:
		if len(key) > 0 {
			return "a table ([" + strings.Join(key, ".") + "])"
		}
		return "a table"
	case reflect.Map:
		return "a table of " + plural(describeType(deref(t.Elem()), nil))
	}
	return "a value of another type"
}

// plural is "a string" as "strings", "a boolean (true or false)" as
// "booleans".
func plural(s string) string {
	s, _, _ = strings.Cut(s, " (")
	s = strings.TrimPrefix(strings.TrimPrefix(s, "an "), "a ")
	return s + "s"
}

// decodedRe finds what the decoder found, and the Go type it tried to
// put it in, in its message.
var decodedRe = regexp.MustCompile(`TOML (\w+) into .* of type (\S+)`)

// found says what the value was, from the decoder's message: "a string",
// or, when an element of an array was wrong, "a string in the array".
func found(msg string, t reflect.Type) string {
	m := decodedRe.FindStringSubmatch(msg)
	if m == nil {
		return "a value of another type"
	}
	what := m[1]
	article := "a "
	if strings.ContainsRune("aeiou", rune(what[0])) {
		article = "an "
	}
	s := article + what
	if (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && !strings.HasPrefix(m[2], "[]") && !strings.HasPrefix(m[2], "[") {
		s += " in the array"
	}
	return s
}

// unknownKey describes an unknown key (or, with table, section) and says
// where it may belong.
func unknownKey(key []string, table bool) string {
	known := 0
	for known < len(key)-1 {
		if t, ok := keyType(key[:known+1]); !ok || t.Kind() != reflect.Struct {
			break
		}
		known++
	}
	name := key[known]
	shown := "key " + strings.Join(key, ".")
	if t, ok := keyType(key[:known]); ok && !table && known == len(key)-1 && t.Kind() == reflect.Struct {
		// A key of a known section (or of the top level).
		if other, ok := homeOf(name, key[:known]); ok {
			if other == "" {
				return "unknown " + shown + "; it belongs at the top, before any [section]"
			}
			return "unknown " + shown + "; it belongs in [" + other + "]"
		}
		if near := spelling.Nearest(name, keysOf(t)); near != "" {
			return fmt.Sprintf("unknown %s (did you mean %s?)", shown, near)
		}
		return "unknown " + shown + " (remove it or check the spelling)"
	}
	// A section that does not exist.
	shown = "section [" + strings.Join(key, ".") + "]"
	if t, ok := keyType(key[:known]); ok && t.Kind() == reflect.Struct {
		var sections []string
		for _, k := range keysOf(t) {
			if st, _ := keyType(append(slices.Clone(key[:known]), k)); st != nil && st.Kind() == reflect.Struct {
				sections = append(sections, k)
			}
		}
		if near := spelling.Nearest(name, sections); near != "" {
			return fmt.Sprintf("unknown %s (did you mean [%s]?)", shown, strings.Join(append(slices.Clone(key[:known]), near), "."))
		}
	}
	return "unknown " + shown + " (remove it or check the spelling)"
}

// keysOf lists the keys of a table type.
func keysOf(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if n := tomlName(t.Field(i)); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// homeOf finds the section, other than not, that has a key name: ""
// for the top level. Sections are searched breadth first from the top.
func homeOf(name string, not []string) (string, bool) {
	type table struct {
		path []string
		t    reflect.Type
	}
	queue := []table{{nil, configType}}
	for len(queue) > 0 {
		tb := queue[0]
		queue = queue[1:]
		for i := range tb.t.NumField() {
			f := tb.t.Field(i)
			n := tomlName(f)
			if n == "" {
				continue
			}
			ft := deref(f.Type)
			if ft.Kind() == reflect.Struct {
				queue = append(queue, table{append(slices.Clone(tb.path), n), ft})
				continue
			}
			if n == name && !slices.Equal(tb.path, not) {
				return strings.Join(tb.path, "."), true
			}
		}
	}
	return "", false
}
