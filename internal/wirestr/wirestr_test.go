package wirestr

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	type msg struct {
		Argv Strings `json:"argv,omitempty"`
	}
	for _, in := range []Strings{
		nil,
		{},
		{"plain", "ünïcode", ""},
		{"caf\xe9", "\xff\xfe", "ok", "A=\x80"},
	} {
		b, err := json.Marshal(msg{in})
		if err != nil {
			t.Fatal(err)
		}
		var out msg
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%q: %v (%s)", in, err, b)
		}
		if len(in) == 0 && len(out.Argv) == 0 {
			continue
		}
		if !reflect.DeepEqual(out.Argv, in) {
			t.Errorf("%q came back as %q (%s)", in, out.Argv, b)
		}
	}
	// The control: a plain []string loses the bytes.
	b, _ := json.Marshal([]string{"caf\xe9"})
	var plain []string
	json.Unmarshal(b, &plain)
	if plain[0] == "caf\xe9" {
		t.Fatal("encoding/json kept invalid UTF-8: this package is not needed")
	}
	for _, bad := range []string{`{"b64":["%%%"]}`, `{"x":[]}`, `{"b64":"s"}`, `[1]`} {
		var s Strings
		if err := json.Unmarshal([]byte(bad), &s); err == nil {
			t.Errorf("%s decoded as %q", bad, s)
		}
	}
}
