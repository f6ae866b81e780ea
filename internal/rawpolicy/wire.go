package rawpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentbox/agentbox/internal/policyhook"
	"github.com/agentbox/agentbox/policy"
)

// Encode returns p's canonical bytes: every field that shapes the sandbox,
// in a fixed order. Two policies with equal bytes sandbox a command
// identically; agentbox's resident helper keys its prepared sandboxes by
// these bytes and serves a request only from a sandbox prepared for
// exactly them.
func Encode(p *policy.Policy) ([]byte, error) {
	f := Of(p)
	if f.Egress != nil {
		// An allow-list holds parsed patterns whose JSON form is not
		// canonical; nothing that needs Encode serves one.
		return nil, errors.New("policy: a policy with an allow-list has no canonical encoding")
	}
	return json.Marshal(f)
}

// Decode is the inverse of [Encode]. It refuses bytes that do not
// decode to a policy whose own encoding is exactly b (an unknown field, a
// tool cache this build does not know, anything not canonical), so the
// policy it returns is the one that was encoded.
func Decode(b []byte) (*policy.Policy, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f Fields
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("policy: decode: %w", err)
	}
	if dec.More() {
		return nil, errors.New("policy: decode: trailing data")
	}
	if f.Egress != nil {
		return nil, errors.New("policy: decode: an allow-list has no canonical encoding")
	}
	// The tool's relocation rule is code, not data, found by name in
	// this build's table (policyhook.KnownCache): the name must be one it knows.
	for _, c := range f.ToolCaches {
		if !policyhook.KnownCache(c.Name) {
			return nil, fmt.Errorf("policy: decode: unknown tool cache %q", c.Name)
		}
	}
	p := New(f)
	again, err := Encode(p)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(again, b) {
		return nil, errors.New("policy: decode: not a canonical encoding")
	}
	return p, nil
}
