// Package git is what agentbox knows of git, read without running git:
// config files (parsed as git parses them) and the paths they make git
// run or trust, the gitlinks of an index, the files through which one
// git directory names another, and what git takes for a git directory.
// It decides nothing: what a run protects is the policy's, what is
// moved aside after one is gitguard's. Everything here is bounded in
// time and memory, whatever the file holds.
package git

import (
	"bytes"
	"fmt"
	"strings"
)

// ConfigEntry is one variable as git's own parser (config.c,
// git_parse_source) reports it.
type ConfigEntry struct {
	// Name is git's canonical name: the section and the key lowercased,
	// a quoted subsection kept as written, a legacy [section.sub]
	// subsection lowercased. "section.key" or "section.sub.key".
	Name string
	// Value is the unquoted, unescaped value; NoValue marks a key given
	// with no "=" at all (git's implicit true).
	Value   string
	NoValue bool
	Line    int
}

// Section is the part of Name before the first dot, as git splits it.
func (e ConfigEntry) Section() string {
	s, _, _ := strings.Cut(e.Name, ".")
	return s
}

// Key is the part of Name after the last dot.
func (e ConfigEntry) Key() string {
	return e.Name[strings.LastIndexByte(e.Name, '.')+1:]
}

// Subsection is what lies between the section and the key ("" for none).
func (e ConfigEntry) Subsection() string {
	i, j := strings.IndexByte(e.Name, '.'), strings.LastIndexByte(e.Name, '.')
	if i < 0 || i == j {
		return ""
	}
	return e.Name[i+1 : j]
}

// ConfigError is a line git would reject ("bad config line N").
type ConfigError struct {
	Line   int
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("bad config line %d: %s", e.Line, e.Reason)
}

// ParseConfig parses the text of a git config file exactly as git
// does, so that agentbox sees every variable git will act on. It is strict
// where git is strict: git refuses to run with a file it cannot parse, and
// a more lenient reading here could miss a variable git honours.
//
// The grammar (git-config(1) "CONFIGURATION FILE", and config.c):
//   - "#" and ";" start a comment outside a quoted value;
//   - "[section]", "[section.sub]" (legacy: lowercased) and
//     `[section "sub"]` (subsection case kept, `\x` means x) headers, with
//     variables allowed on the same line after the "]";
//   - keys start with a letter and hold letters, digits and "-",
//     case-insensitive; a key with no "=" is a boolean true;
//   - values: leading and trailing blanks dropped, inner blanks each become
//     one space, `"` toggles quoting, escapes \n \t \b \" \\ and a
//     backslash-newline continuation; anything else is an error;
//   - CRLF line ends; a UTF-8 byte-order mark at the start is skipped.
func ParseConfig(data []byte) ([]ConfigEntry, error) {
	p := &gitConfigParser{data: bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")), line: 1}
	return p.parse()
}

type gitConfigParser struct {
	data []byte
	pos  int
	line int
	eof  bool
}

// next returns the next character as git's get_next_char does: CRLF
// becomes LF, and the end of the data reads as a final LF with eof set.
func (p *gitConfigParser) next() byte {
	if p.pos >= len(p.data) {
		p.eof = true
		return '\n'
	}
	c := p.data[p.pos]
	p.pos++
	if c == '\r' && p.pos < len(p.data) && p.data[p.pos] == '\n' {
		c = '\n'
		p.pos++
	}
	if c == '\n' {
		p.line++
	}
	return c
}

func (p *gitConfigParser) fail(line int, format string, a ...any) error {
	return &ConfigError{Line: line, Reason: fmt.Sprintf(format, a...)}
}

func isKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// isSpace is git's isspace (its own sane_ctype table, not C's): space,
// \t, \n and \r only.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func (p *gitConfigParser) parse() ([]ConfigEntry, error) {
	var out []ConfigEntry
	var base []byte // "section." or "section.sub." once a header was read
	comment := false
	for {
		line := p.line
		c := p.next()
		if c == '\n' {
			if p.eof {
				return out, nil
			}
			comment = false
			continue
		}
		if comment || isSpace(c) {
			continue
		}
		if c == '#' || c == ';' {
			comment = true
			continue
		}
		if c == '[' {
			b, err := p.header(line)
			if err != nil {
				return nil, err
			}
			base = append(b, '.')
			continue
		}
		if !isAlpha(c) {
			return nil, p.fail(line, "unexpected %q", c)
		}
		// A variable before any header is accepted, named without a
		// section, as git does (it matches no real variable).
		e, err := p.variable(line, base, c)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
}

// header reads a section header after its "[" (git's get_base_var and
// get_extended_base_var).
func (p *gitConfigParser) header(line int) ([]byte, error) {
	var name []byte
	for {
		c := p.next()
		if p.eof {
			return nil, p.fail(line, "unterminated section header")
		}
		if c == ']' {
			if len(name) == 0 {
				return nil, p.fail(line, "empty section name")
			}
			return name, nil
		}
		if isSpace(c) {
			if c == '\n' {
				return nil, p.fail(line, "section header broken across lines")
			}
			return p.extendedHeader(line, name)
		}
		if !isKeyChar(c) && c != '.' {
			return nil, p.fail(line, "bad character %q in section name", c)
		}
		name = append(name, lower(c))
	}
}

func (p *gitConfigParser) extendedHeader(line int, name []byte) ([]byte, error) {
	c := p.next()
	for isSpace(c) {
		if c == '\n' {
			return nil, p.fail(line, "section header broken across lines")
		}
		c = p.next()
	}
	if c != '"' {
		return nil, p.fail(line, `section header wants [section "subsection"]`)
	}
	// As in git, `[ "x"]` is accepted: an empty section, subsection x.
	name = append(name, '.')
	for {
		c := p.next()
		if c == '\n' {
			return nil, p.fail(line, "subsection name broken across lines")
		}
		if c == '"' {
			break
		}
		if c == '\\' {
			if c = p.next(); c == '\n' {
				return nil, p.fail(line, "subsection name broken across lines")
			}
		}
		name = append(name, c)
	}
	if c := p.next(); c != ']' {
		return nil, p.fail(line, `expected "]" after the subsection name`)
	}
	return name, nil
}

// variable reads one "key [= value]" whose first character is c (git's
// get_value and parse_value).
func (p *gitConfigParser) variable(line int, base []byte, c byte) (ConfigEntry, error) {
	name := append([]byte(nil), base...)
	name = append(name, lower(c))
	for {
		c = p.next()
		if p.eof || !isKeyChar(c) {
			break
		}
		name = append(name, lower(c))
	}
	for c == ' ' || c == '\t' {
		c = p.next()
	}
	e := ConfigEntry{Name: string(name), Line: line}
	if c == '\n' {
		e.NoValue = true
		return e, nil
	}
	if c != '=' {
		return e, p.fail(line, "expected \"=\" after key %q, got %q", name, c)
	}
	v, err := p.value(line)
	if err != nil {
		return e, err
	}
	e.Value = v
	return e, nil
}

func (p *gitConfigParser) value(line int) (string, error) {
	var v []byte
	quote, comment, space := false, false, 0
	for {
		c := p.next()
		if c == '\n' {
			if quote {
				return "", p.fail(line, "unterminated quoted value")
			}
			return string(v), nil
		}
		if comment {
			continue
		}
		if isSpace(c) && !quote {
			if len(v) > 0 {
				space++
			}
			continue
		}
		if !quote && (c == ';' || c == '#') {
			comment = true
			continue
		}
		for ; space > 0; space-- {
			v = append(v, ' ')
		}
		if c == '\\' {
			c = p.next()
			switch c {
			case '\n':
				continue
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'n':
				c = '\n'
			case '\\', '"':
			default:
				return "", p.fail(line, "unknown escape \\%c", c)
			}
			v = append(v, c)
			continue
		}
		if c == '"' {
			quote = !quote
			continue
		}
		v = append(v, c)
	}
}

// Bool reports whether v is one of git's boolean spellings, and which.
// NoValue entries are true.
func Bool(e ConfigEntry) (val, ok bool) {
	if e.NoValue {
		return true, true
	}
	switch strings.ToLower(e.Value) {
	case "true", "yes", "on", "1":
		return true, true
	case "false", "no", "off", "0", "":
		return false, true
	}
	return false, false
}
