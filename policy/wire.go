package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Encode returns p's canonical bytes: every field that shapes the sandbox,
// in a fixed order. Two policies with equal bytes sandbox a command
// identically; agentbox's resident helper keys its prepared sandboxes by
// these bytes and serves a request only from a sandbox prepared for
// exactly them.
func (p *Policy) Encode() ([]byte, error) {
	if p.f.Egress != nil {
		// An allow-list holds parsed patterns whose JSON form is not
		// canonical; nothing that needs Encode serves one.
		return nil, errors.New("policy: a policy with an allow-list has no canonical encoding")
	}
	return json.Marshal(p.f)
}

// Decode is the inverse of [Policy.Encode]. It refuses bytes that do not
// decode to a policy whose own encoding is exactly b (an unknown field, a
// tool cache this build does not know, anything not canonical), so the
// policy it returns is the one that was encoded.
func Decode(b []byte) (*Policy, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p Policy
	if err := dec.Decode(&p.f); err != nil {
		return nil, fmt.Errorf("policy: decode: %w", err)
	}
	if dec.More() {
		return nil, errors.New("policy: decode: trailing data")
	}
	if p.f.Egress != nil {
		return nil, errors.New("policy: decode: an allow-list has no canonical encoding")
	}
	// The tool's relocation rule is code, not data, found by name in
	// this build's table (cacheEnvValue): the name must be one it knows.
	for _, c := range p.f.ToolCaches {
		found := false
		for _, d := range knownCaches {
			if d.Name == c.Name {
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("policy: decode: unknown tool cache %q", c.Name)
		}
	}
	again, err := p.Encode()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(again, b) {
		return nil, errors.New("policy: decode: not a canonical encoding")
	}
	return &p, nil
}
