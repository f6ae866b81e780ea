package install

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// This file edits JSON text in place: it parses a document into spans
// (where each value, key and member starts and ends) and splices new text
// in, so everything it was not asked to change stays byte for byte as the
// user (or the agent) wrote it: key order, indentation, comments.

// jnode is one parsed JSON value and where it lies in the source.
type jnode struct {
	kind       byte // '{', '[', '"', '0' (number) or 'l' (true, false, null)
	start, end int  // src[start:end] is the value's text
	members    []jmember
	elems      []*jnode
}

// jmember is one member of an object.
type jmember struct {
	key              string
	keyStart, keyEnd int // the key's text, quotes included
	val              *jnode
}

// jparser parses JSON, and with comments set JSON with // and /* */
// comments (JSONC, as Gemini CLI and Cursor read theirs). Trailing commas
// are refused: not every reader of these files takes them.
type jparser struct {
	src      []byte
	pos      int
	comments bool
}

// parseJSON parses src as one JSON value (an object, for the files this
// package edits).
func parseJSON(src []byte, comments bool) (*jnode, error) {
	p := &jparser{src: src, comments: comments}
	if err := p.ws(); err != nil {
		return nil, err
	}
	n, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if err := p.ws(); err != nil {
		return nil, err
	}
	if p.pos != len(src) {
		return nil, p.errorf("unexpected %q after the document", p.src[p.pos])
	}
	return n, nil
}

func (p *jparser) errorf(format string, args ...any) error {
	line := 1 + bytes.Count(p.src[:min(p.pos, len(p.src))], []byte("\n"))
	return fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, args...))
}

// ws skips whitespace and, when allowed, comments.
func (p *jparser) ws() error {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.pos++
		case c == '/' && p.comments && p.pos+1 < len(p.src) && p.src[p.pos+1] == '/':
			if i := bytes.IndexByte(p.src[p.pos:], '\n'); i >= 0 {
				p.pos += i + 1
			} else {
				p.pos = len(p.src)
			}
		case c == '/' && p.comments && p.pos+1 < len(p.src) && p.src[p.pos+1] == '*':
			i := bytes.Index(p.src[p.pos+2:], []byte("*/"))
			if i < 0 {
				return p.errorf("unterminated /* comment")
			}
			p.pos += 2 + i + 2
		default:
			return nil
		}
	}
	return nil
}

// maxDepth bounds nesting, so a hostile file cannot exhaust the stack.
const maxDepth = 1000

var numberRe = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`)

func (p *jparser) value(depth int) (*jnode, error) {
	if depth > maxDepth {
		return nil, p.errorf("nested too deeply")
	}
	if p.pos >= len(p.src) {
		return nil, p.errorf("unexpected end of the file")
	}
	start := p.pos
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		if _, err := p.str(); err != nil {
			return nil, err
		}
		return &jnode{kind: '"', start: start, end: p.pos}, nil
	case c == '-' || c >= '0' && c <= '9':
		m := numberRe.Find(p.src[p.pos:])
		if m == nil {
			return nil, p.errorf("bad number")
		}
		p.pos += len(m)
		return &jnode{kind: '0', start: start, end: p.pos}, nil
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(p.src[p.pos:], []byte(lit)) {
				p.pos += len(lit)
				return &jnode{kind: 'l', start: start, end: p.pos}, nil
			}
		}
		return nil, p.errorf("unexpected %q", c)
	}
}

// str scans a string and returns its decoded value.
func (p *jparser) str() (string, error) {
	start := p.pos
	p.pos++ // the opening quote
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == '"':
			p.pos++
			var s string
			if err := json.Unmarshal(p.src[start:p.pos], &s); err != nil {
				return "", p.errorf("bad string: %v", err)
			}
			return s, nil
		case c == '\\':
			p.pos += 2
		case c < 0x20:
			return "", p.errorf("control character in a string")
		default:
			p.pos++
		}
	}
	return "", p.errorf("unterminated string")
}

func (p *jparser) object(depth int) (*jnode, error) {
	n := &jnode{kind: '{', start: p.pos}
	p.pos++
	if err := p.ws(); err != nil {
		return nil, err
	}
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		n.end = p.pos
		return n, nil
	}
	for {
		if p.pos >= len(p.src) || p.src[p.pos] != '"' {
			return nil, p.errorf("expected a key in quotes")
		}
		ks := p.pos
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		m := jmember{key: key, keyStart: ks, keyEnd: p.pos}
		if err := p.ws(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return nil, p.errorf("expected ':' after key %q", key)
		}
		p.pos++
		if err := p.ws(); err != nil {
			return nil, err
		}
		if m.val, err = p.value(depth + 1); err != nil {
			return nil, err
		}
		n.members = append(n.members, m)
		done, err := p.next(n, '}', "object", "an object")
		if err != nil {
			return nil, err
		}
		if done {
			return n, nil
		}
	}
}

func (p *jparser) array(depth int) (*jnode, error) {
	n := &jnode{kind: '[', start: p.pos}
	p.pos++
	if err := p.ws(); err != nil {
		return nil, err
	}
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		p.pos++
		n.end = p.pos
		return n, nil
	}
	for {
		e, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.elems = append(n.elems, e)
		done, err := p.next(n, ']', "array", "an array")
		if err != nil {
			return nil, err
		}
		if done {
			return n, nil
		}
	}
}

// next reads what follows a member of object n or an element of array n
// (close is its closing bracket): a comma and more to come, or the close,
// which ends n (done).
func (p *jparser) next(n *jnode, close byte, kind, what string) (done bool, err error) {
	if err := p.ws(); err != nil {
		return false, err
	}
	if p.pos >= len(p.src) {
		return false, p.errorf("unterminated %s", kind)
	}
	switch p.src[p.pos] {
	case ',':
		p.pos++
		if err := p.ws(); err != nil {
			return false, err
		}
		if p.pos < len(p.src) && p.src[p.pos] == close {
			return false, p.errorf("trailing comma")
		}
		return false, nil
	case close:
		p.pos++
		n.end = p.pos
		return true, nil
	}
	return false, p.errorf("expected ',' or '%c' in %s", close, what)
}

// member is the value of key in object n (the last, when a key repeats:
// what JavaScript's JSON.parse keeps), and its index; nil when absent or
// n is not an object.
func (n *jnode) member(key string) (*jnode, int) {
	if n == nil || n.kind != '{' {
		return nil, -1
	}
	for i := len(n.members) - 1; i >= 0; i-- {
		if n.members[i].key == key {
			return n.members[i].val, i
		}
	}
	return nil, -1
}

// lookup follows path through objects.
func (n *jnode) lookup(path ...string) *jnode {
	for _, k := range path {
		n, _ = n.member(k)
	}
	return n
}

// ---------------------------------------------------------------------------
// Splicing

// jdoc is a document being edited: each edit reparses, so spans are
// always those of the current text.
type jdoc struct {
	src      []byte
	root     *jnode
	comments bool
}

func newJDoc(src []byte, comments bool) (*jdoc, error) {
	if len(bytes.TrimSpace(src)) == 0 {
		src = []byte("{}\n")
	}
	root, err := parseJSON(src, comments)
	if err != nil {
		return nil, err
	}
	if root.kind != '{' {
		return nil, fmt.Errorf("the document is not a JSON object")
	}
	return &jdoc{src: src, root: root, comments: comments}, nil
}

func (d *jdoc) splice(start, end int, text string) {
	var b bytes.Buffer
	b.Write(d.src[:start])
	b.WriteString(text)
	b.Write(d.src[end:])
	src := b.Bytes()
	root, err := parseJSON(src, d.comments)
	if err != nil {
		// A splice of valid JSON into valid JSON is valid JSON.
		panic(fmt.Sprintf("BUG(install): edit produced invalid JSON: %v", err))
	}
	d.src, d.root = src, root
}

// eol writes text's line ends as the document does: a file with CRLF
// line ends (written on Windows) keeps them.
func (d *jdoc) eol(text string) string {
	if !bytes.Contains(d.src, []byte("\r\n")) {
		return text
	}
	return strings.ReplaceAll(text, "\n", "\r\n")
}

// lineIndent is the whitespace that starts the line holding pos.
func lineIndent(src []byte, pos int) string {
	ls := bytes.LastIndexByte(src[:pos], '\n') + 1
	i := ls
	for i < len(src) && (src[i] == ' ' || src[i] == '\t') {
		i++
	}
	return string(src[ls:i])
}

// unit is the document's indentation step: that of its first indented
// line, else two spaces.
func (d *jdoc) unit() string {
	for _, line := range bytes.Split(d.src, []byte("\n"))[1:] {
		t := bytes.TrimLeft(line, " \t")
		if len(t) > 0 && len(t) < len(line) {
			return string(line[:len(line)-len(t)])
		}
	}
	return "  "
}

// encode is v as JSON, multi-line under indent (unit per level) or on one
// line when indent is "-".
func encode(v any, indent, unit string) string {
	raw, err := marshal(v)
	if err != nil {
		panic(fmt.Sprintf("BUG(install): encode %T: %v", v, err))
	}
	var out bytes.Buffer
	if indent == "--" {
		return string(raw)
	}
	if indent == "-" {
		if err := json.Compact(&out, raw); err != nil {
			panic(err)
		}
		// One line, but spaced like a person writes it.
		return oneLine(out.String())
	}
	if err := json.Indent(&out, raw, indent, unit); err != nil {
		panic(err)
	}
	return out.String()
}

// marshal is json.Marshal without HTML escapes: a path with & stays
// readable.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(b.Bytes()), nil
}

// oneLine spaces compact JSON: ", " between items and ": " after keys.
func oneLine(s string) string {
	var b strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		b.WriteByte(c)
		switch {
		case in && c == '\\':
			i++
			b.WriteByte(s[i])
		case c == '"':
			in = !in
		case !in && (c == ',' || c == ':'):
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// layout says how to write a new item into container n: after what
// separator, at what indentation, with what step.
func (d *jdoc) layout(n *jnode) (sep, indent, unit string, multi bool) {
	unit = d.unit()
	outer := lineIndent(d.src, n.start)
	first := -1
	switch {
	case len(n.members) > 0:
		first = n.members[0].keyStart
	case len(n.elems) > 0:
		first = n.elems[0].start
	}
	if first < 0 {
		return "\n" + outer + unit, outer + unit, unit, true
	}
	if !bytes.Contains(d.src[n.start+1:first], []byte("\n")) {
		if d.colon(n) == ":" {
			// Written compact: so is what goes in.
			return "", "--", unit, false
		}
		return " ", "-", unit, false
	}
	in := lineIndent(d.src, first)
	if s, ok := strings.CutPrefix(in, outer); ok && s != "" {
		unit = s
	}
	return "\n" + in, in, unit, true
}

// insert adds text (a member "key": value, or an element) as the last
// item of container n, laid out like the items already there.
func (d *jdoc) insert(n *jnode, item func(indent, unit string) string) {
	sep, indent, unit, _ := d.layout(n)
	text := item(indent, unit)
	if len(n.members) == 0 && len(n.elems) == 0 {
		// An empty container: its inside becomes the item. Removing
		// the item gives back "{}" or "[]".
		outer := lineIndent(d.src, n.start)
		d.splice(n.start+1, n.end-1, d.eol(sep+text+"\n"+outer))
		return
	}
	var last int
	if len(n.members) > 0 {
		last = n.members[len(n.members)-1].val.end
	} else {
		last = n.elems[len(n.elems)-1].end
	}
	d.splice(last, last, d.eol(","+sep+text))
}

// colon is how the document writes ": " between a key and its value.
func (d *jdoc) colon(n *jnode) string {
	if len(n.members) > 0 {
		m := n.members[0]
		s := string(d.src[m.keyEnd:m.val.start])
		if strings.TrimSpace(s) == ":" && !strings.Contains(s, "\n") {
			return s
		}
	}
	return ": "
}

// removeItem deletes item i of container n. Deleting the last item takes
// the comma and separator before it, which is exactly what insert added.
func (d *jdoc) removeItem(n *jnode, i int) {
	type span struct{ start, end int }
	var items []span
	for _, m := range n.members {
		items = append(items, span{m.keyStart, m.val.end})
	}
	for _, e := range n.elems {
		items = append(items, span{e.start, e.end})
	}
	switch {
	case len(items) == 1:
		d.splice(n.start+1, n.end-1, "")
	case i == len(items)-1:
		d.splice(items[i-1].end, items[i].end, "")
	default:
		d.splice(items[i].start, items[i+1].start, "")
	}
}

// setMember makes path[:len-1] objects (creating what is missing) and
// sets member path[len-1] to v. It reports whether the text changed.
func (d *jdoc) setMember(path []string, v any) (bool, error) {
	n := d.root
	for i, k := range path {
		child, idx := n.member(k)
		if child == nil {
			// Build what is missing as one nested value.
			var val any = v
			for j := len(path) - 1; j > i; j-- {
				val = ordered{{path[j], val}}
			}
			colon := d.colon(n)
			d.insert(n, func(indent, unit string) string {
				return encode(k, "--", "") + colon + encode(val, indent, unit)
			})
			return true, nil
		}
		if i == len(path)-1 {
			if sameJSON(d.src[child.start:child.end], v) {
				return false, nil
			}
			indent := lineIndent(d.src, n.members[idx].keyStart)
			_, in, unit, multi := d.layout(n)
			if !multi {
				indent = in
			}
			d.splice(child.start, child.end, d.eol(encode(v, indent, unit)))
			return true, nil
		}
		if child.kind != '{' {
			return false, fmt.Errorf("%s is not an object", strings.Join(path[:i+1], "."))
		}
		n = child
	}
	return false, nil
}

// appendElem makes the array at path (creating what is missing) hold v:
// an element that match says is ours is replaced by v when it differs,
// else v is appended.
func (d *jdoc) appendElem(path []string, v any, match func(raw []byte) bool) (bool, error) {
	arr := d.root.lookup(path...)
	if arr == nil {
		return d.setMember(path, []any{v})
	}
	if arr.kind != '[' {
		return false, fmt.Errorf("%s is not an array", strings.Join(path, "."))
	}
	for _, e := range arr.elems {
		raw := d.src[e.start:e.end]
		if !match(raw) {
			continue
		}
		if sameJSON(raw, v) {
			return false, nil
		}
		_, indent, unit, _ := d.layout(arr)
		d.splice(e.start, e.end, d.eol(encode(v, indent, unit)))
		return true, nil
	}
	d.insert(arr, func(indent, unit string) string { return encode(v, indent, unit) })
	return true, nil
}

// removeMember deletes member path[len-1]; then each object on the path
// left empty that keep does not claim (it was there before install) goes
// too.
func (d *jdoc) removeMember(path []string, keep func(path []string) bool) bool {
	parent := d.root.lookup(path[:len(path)-1]...)
	_, idx := parent.member(path[len(path)-1])
	if idx < 0 {
		return false
	}
	d.removeItem(parent, idx)
	d.prune(path[:len(path)-1], keep)
	return true
}

// removeElems deletes the elements of the array at path that match says
// are ours, then prunes as removeMember does.
func (d *jdoc) removeElems(path []string, match func(raw []byte) bool, keep func(path []string) bool) bool {
	changed := false
	for {
		arr := d.root.lookup(path...)
		if arr == nil || arr.kind != '[' {
			break
		}
		found := -1
		for i := len(arr.elems) - 1; i >= 0; i-- {
			if e := arr.elems[i]; match(d.src[e.start:e.end]) {
				found = i
				break
			}
		}
		if found < 0 {
			break
		}
		d.removeItem(arr, found)
		changed = true
	}
	if changed {
		d.prune(path, keep)
	}
	return changed
}

// prune removes the empty containers at the end of path that keep does
// not claim, innermost first.
func (d *jdoc) prune(path []string, keep func(path []string) bool) {
	for len(path) > 0 {
		n := d.root.lookup(path...)
		if n == nil || len(n.members) > 0 || len(n.elems) > 0 || (n.kind != '{' && n.kind != '[') || keep(path) {
			return
		}
		parent := d.root.lookup(path[:len(path)-1]...)
		_, idx := parent.member(path[len(path)-1])
		d.removeItem(parent, idx)
		path = path[:len(path)-1]
	}
}

// empty reports whether the document is an object with no members.
func (d *jdoc) empty() bool { return len(d.root.members) == 0 }

// sameJSON reports whether raw is v, compared as decoded JSON.
func sameJSON(raw []byte, v any) bool {
	var a, b any
	if json.Unmarshal(raw, &a) != nil {
		return false
	}
	enc, err := json.Marshal(v)
	if err != nil || json.Unmarshal(enc, &b) != nil {
		return false
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// ordered is a JSON object whose members keep their order.
type ordered []kv

type kv struct {
	k string
	v any
}

func (o ordered) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := marshal(e.k)
		if err != nil {
			return nil, err
		}
		v, err := marshal(e.v)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
