package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentbox/agentbox/internal/toolcache"
)

// MarshalBinary returns p's canonical encoding: every field that shapes
// the sandbox, in a fixed order (JSON).
// Two policies with equal bytes sandbox a command identically; agentbox's
// resident helper keys its prepared sandboxes by these bytes and serves a
// request only from a sandbox prepared for exactly them. What Resolve
// kept for [Policy.Widen] is not part of it. A policy naming a path that
// is not valid UTF-8 has no encoding: JSON would replace the bytes, and
// the policy decoded would name another path.
func (p *Policy) MarshalBinary() ([]byte, error) {
	b, err := json.Marshal(p.f)
	if err != nil {
		return nil, fmt.Errorf("policy: encode: %w", err)
	}
	if replacedBytes(b) {
		return nil, errors.New("policy: encode: a path or value is not valid UTF-8")
	}
	return b, nil
}

// replacedBytes reports whether encoding/json replaced invalid UTF-8 in
// b: it writes the escape \ufffd only for that (a U+FFFD written as such
// stays as it is), and an escape is one not itself escaped by a
// backslash before it.
func replacedBytes(b []byte) bool {
	esc := []byte(`\ufffd`)
	for i := 0; ; {
		j := bytes.Index(b[i:], esc)
		if j < 0 {
			return false
		}
		j += i
		n := 0
		for k := j - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return true
		}
		i = j + 1
	}
}

// Unmarshal is the inverse of [Policy.MarshalBinary]. It refuses bytes
// that do not decode to a policy whose own encoding is exactly b (an
// unknown field, a tool cache this build does not know, an allow-list
// pattern its parser would not produce, anything not canonical), so the
// policy it returns is the one that was encoded. Nothing else is checked:
// the encoding's author keeps the protected paths consistent with the
// writable roots, as Resolve does.
func Unmarshal(b []byte) (*Policy, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f fields
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("policy: decode: %w", err)
	}
	if dec.More() {
		return nil, errors.New("policy: decode: trailing data")
	}
	// A tool's relocation rule is code, not data, found by name in this
	// build's table: the name must be one it knows.
	for _, c := range f.ToolCaches {
		if !toolcache.Known(c.Name) {
			return nil, fmt.Errorf("policy: decode: unknown tool cache %q", c.Name)
		}
	}
	p := &Policy{f: f}
	again, err := p.MarshalBinary()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(again, b) {
		return nil, errors.New("policy: decode: not a canonical encoding")
	}
	return p, nil
}

// AllowList is the parsed allow-list agentbox's proxy enforces when the
// command may reach only listed destinations ([Policy.AllowedDomains]);
// nil otherwise. Backends and the proxy decide with it. It is shared,
// not copied: an AllowList does not change.
func (p *Policy) AllowList() *AllowList { return p.f.Egress }
