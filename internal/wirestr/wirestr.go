// Package wirestr carries string lists through encoding/json byte for
// byte. encoding/json replaces each invalid UTF-8 byte of a string with
// U+FFFD: a command's argument or environment value that is not UTF-8 (a
// Latin-1 file name, say) would reach the command changed, and a name it
// operates on would be another. [Strings] marshals as a plain JSON array
// when every element is valid UTF-8 (the common case costs nothing) and
// otherwise as {"b64": [...]}, each element base64.
package wirestr

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"unicode/utf8"
)

// Strings is a []string that survives a JSON round trip unchanged.
type Strings []string

type encoded struct {
	B64 []string `json:"b64"`
}

// Valid reports whether every string of ss is valid UTF-8: what
// encoding/json carries unchanged.
func Valid(ss []string) bool {
	for _, v := range ss {
		if !utf8.ValidString(v) {
			return false
		}
	}
	return true
}

// MarshalJSON implements json.Marshaler.
func (s Strings) MarshalJSON() ([]byte, error) {
	if s == nil {
		return []byte("null"), nil
	}
	if Valid(s) {
		return json.Marshal([]string(s))
	}
	e := encoded{B64: make([]string, len(s))}
	for i, v := range s {
		e.B64[i] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	return json.Marshal(e)
}

// UnmarshalJSON implements json.Unmarshaler.
func (s *Strings) UnmarshalJSON(b []byte) error {
	t := bytes.TrimLeft(b, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		var plain []string
		if err := json.Unmarshal(b, &plain); err != nil {
			return err
		}
		*s = plain
		return nil
	}
	var e encoded
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return err
	}
	out := make(Strings, len(e.B64))
	for i, v := range e.B64 {
		raw, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return err
		}
		out[i] = string(raw)
	}
	*s = out
	return nil
}
