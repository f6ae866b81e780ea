package darwin

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// This file holds a small reader for the subset of SBPL the generator
// writes, and a model of how Seatbelt decides a file operation, so the
// generated profiles can be checked on any platform. The model encodes our
// understanding of Seatbelt (last matching rule wins; subpath is
// component-wise; regexes match the whole path); it is no substitute for
// the darwin integration tests.

type nodeKind int

const (
	nList nodeKind = iota
	nSymbol
	nString // "..."
	nRegex  // #"..."
)

type node struct {
	kind nodeKind
	val  string
	kids []*node
}

func (n *node) String() string {
	switch n.kind {
	case nList:
		parts := make([]string, len(n.kids))
		for i, k := range n.kids {
			parts[i] = k.String()
		}
		return "(" + strings.Join(parts, " ") + ")"
	case nString:
		return fmt.Sprintf("%q", n.val)
	case nRegex:
		return "#" + fmt.Sprintf("%q", n.val)
	}
	return n.val
}

// parseSBPL reads every top-level form of src. It rejects anything it does
// not understand, so an injected quote or parenthesis shows up as an error
// or as a different tree.
func parseSBPL(src string) ([]*node, error) {
	p := &reader{src: src}
	var forms []*node
	for {
		p.skip()
		if p.pos >= len(p.src) {
			return forms, nil
		}
		n, err := p.form()
		if err != nil {
			return nil, err
		}
		if n.kind != nList {
			return nil, fmt.Errorf("top-level atom %s", n)
		}
		forms = append(forms, n)
	}
}

type reader struct {
	src string
	pos int
}

// skip passes over white space and ; comments.
func (p *reader) skip() {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ';':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		case c == ' ' || c == '\n' || c == '\t':
			p.pos++
		default:
			return
		}
	}
}

func (p *reader) form() (*node, error) {
	p.skip()
	if p.pos >= len(p.src) {
		return nil, fmt.Errorf("unexpected end of profile")
	}
	switch c := p.src[p.pos]; {
	case c == '(':
		p.pos++
		n := &node{kind: nList}
		for {
			p.skip()
			if p.pos >= len(p.src) {
				return nil, fmt.Errorf("unclosed list")
			}
			if p.src[p.pos] == ')' {
				p.pos++
				return n, nil
			}
			k, err := p.form()
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, k)
		}
	case c == ')':
		return nil, fmt.Errorf("unbalanced ) at byte %d", p.pos)
	case c == '"':
		p.pos++
		var b strings.Builder
		for p.pos < len(p.src) && p.src[p.pos] != '"' {
			if p.src[p.pos] == '\\' {
				return nil, fmt.Errorf("escape in string at byte %d: the generator never writes one", p.pos)
			}
			b.WriteByte(p.src[p.pos])
			p.pos++
		}
		if p.pos >= len(p.src) {
			return nil, fmt.Errorf("unterminated string")
		}
		p.pos++
		return &node{kind: nString, val: b.String()}, nil
	case c == '#':
		if !strings.HasPrefix(p.src[p.pos:], `#"`) {
			return nil, fmt.Errorf("unknown # syntax at byte %d", p.pos)
		}
		end := strings.IndexByte(p.src[p.pos+2:], '"')
		if end < 0 {
			return nil, fmt.Errorf("unterminated regex")
		}
		n := &node{kind: nRegex, val: p.src[p.pos+2 : p.pos+2+end]}
		p.pos += 2 + end + 1
		return n, nil
	default:
		start := p.pos
		for p.pos < len(p.src) && !strings.ContainsRune(" \t\n();\"", rune(p.src[p.pos])) {
			p.pos++
		}
		return &node{kind: nSymbol, val: p.src[start:p.pos]}, nil
	}
}

// model decides file operations the way we understand Seatbelt to.
type model struct {
	rules  []*node
	params map[string]string
}

// modelOf is the model of in's profile.
func modelOf(t *testing.T, in Input) *model {
	t.Helper()
	profile, params, err := Profile(in)
	if err != nil {
		t.Fatal(err)
	}
	return newModel(t, profile, params)
}

// A decision is an operation on a path, and whether the profile allows it.
type decision struct {
	op, path string
	allow    bool
}

// check reports each of cases m decides otherwise.
func (m *model) check(t *testing.T, cases []decision) {
	t.Helper()
	for _, c := range cases {
		if got := m.allowed(t, c.op, c.path); got != c.allow {
			t.Errorf("%s %q: allowed=%v, want %v", c.op, c.path, got, c.allow)
		}
	}
}

func newModel(t *testing.T, profile string, params []Param) *model {
	t.Helper()
	forms, err := parseSBPL(profile)
	if err != nil {
		t.Fatalf("profile does not parse: %v\n%s", err, profile)
	}
	m := &model{params: map[string]string{}}
	for _, p := range params {
		m.params[p.Key] = p.Value
	}
	for _, f := range forms {
		if head := f.kids[0].val; head == "allow" || head == "deny" {
			m.rules = append(m.rules, f)
		}
	}
	return m
}

// allowed reports whether op on path is allowed: the last rule that names
// the operation and whose filters match decides.
func (m *model) allowed(t *testing.T, op, path string) bool {
	t.Helper()
	verdict := false
	for _, r := range m.rules {
		ops, filters := splitRule(r)
		if !opMatches(ops, op) {
			continue
		}
		match := len(filters) == 0
		for _, f := range filters {
			if m.eval(t, f, path) {
				match = true
				break
			}
		}
		if match {
			verdict = r.kids[0].val == "allow"
		}
	}
	return verdict
}

func splitRule(r *node) (ops []string, filters []*node) {
	for _, k := range r.kids[1:] {
		if k.kind == nSymbol {
			ops = append(ops, k.val)
		} else {
			filters = append(filters, k)
		}
	}
	return ops, filters
}

func opMatches(ops []string, op string) bool {
	for _, o := range ops {
		if o == "default" || o == op || strings.HasSuffix(o, "*") && strings.HasPrefix(op, strings.TrimSuffix(o, "*")) {
			return true
		}
	}
	return false
}

func (m *model) value(t *testing.T, n *node) string {
	t.Helper()
	switch {
	case n.kind == nString:
		return n.val
	case n.kind == nList && len(n.kids) == 2 && n.kids[0].val == "param" && n.kids[1].kind == nString:
		v, ok := m.params[n.kids[1].val]
		if !ok {
			t.Fatalf("profile references undefined parameter %s", n.kids[1].val)
		}
		return v
	}
	t.Fatalf("not a path value: %s", n)
	return ""
}

func (m *model) eval(t *testing.T, f *node, path string) bool {
	t.Helper()
	if f.kind != nList || len(f.kids) == 0 {
		t.Fatalf("not a filter: %s", f)
	}
	switch f.kids[0].val {
	case "literal":
		return path == m.value(t, f.kids[1])
	case "subpath":
		v := m.value(t, f.kids[1])
		return path == v || v == "/" || strings.HasPrefix(path, v+"/")
	case "regex":
		return regexp.MustCompile(f.kids[1].val).MatchString(path)
	case "require-all":
		for _, k := range f.kids[1:] {
			if !m.eval(t, k, path) {
				return false
			}
		}
		return true
	case "require-any":
		for _, k := range f.kids[1:] {
			if m.eval(t, k, path) {
				return true
			}
		}
		return false
	case "require-not":
		return !m.eval(t, f.kids[1], path)
	}
	// target, global-name, remote: not about file paths.
	return false
}
