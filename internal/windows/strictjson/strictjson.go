// Package strictjson decodes the JSON agentbox's Windows parts exchange
// (setup marker, credentials, payload, grants, IPC frames) strictly: an
// unknown field or trailing data is an error, so a file written by another
// version or a mismatched peer fails loudly instead of being half read.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
)

// ErrTrailing is returned when data continues after the JSON value.
var ErrTrailing = errors.New("trailing data after the JSON value")

// Unmarshal decodes data into v, refusing unknown fields and anything
// after the first value.
func Unmarshal(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return ErrTrailing
	}
	return nil
}
