package strictjson

import (
	"errors"
	"testing"
)

func TestUnmarshal(t *testing.T) {
	var v struct {
		A int `json:"a"`
	}
	if err := Unmarshal([]byte(`{"a":1}`), &v); err != nil || v.A != 1 {
		t.Fatalf("good input: %+v, %v", v, err)
	}
	if err := Unmarshal([]byte(`{"a":1,"b":2}`), &v); err == nil {
		t.Error("unknown field accepted")
	}
	if err := Unmarshal([]byte(`{"a":1} {"a":2}`), &v); !errors.Is(err, ErrTrailing) {
		t.Errorf("trailing value: %v", err)
	}
	if err := Unmarshal([]byte(`{"a":`), &v); err == nil {
		t.Error("truncated input accepted")
	}
}
