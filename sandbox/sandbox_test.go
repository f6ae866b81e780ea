package sandbox

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrUnsupportedWrapsStandard(t *testing.T) {
	err := fmt.Errorf("signal on this platform: %w", ErrUnsupported)
	if !errors.Is(err, ErrUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("%v: want errors.Is for both sandbox.ErrUnsupported and errors.ErrUnsupported", err)
	}
}
