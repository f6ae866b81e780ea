package git

import (
	"strings"
	"testing"
)

func TestShellWords(t *testing.T) {
	for in, want := range map[string]string{
		`less -R`:                   "less* -R",
		`FOO=1 ./x.sh 'a b' "c\"d"`: `FOO=1 ./x.sh* a b c"d`,
		`f() { ./a; }; f`:           "f* ./a* f*",
		`a|b&&c;d`:                  "a* b* c* d*",
		`x\ y z`:                    "x y* z",
	} {
		var got []string
		for _, w := range shellWords(in) {
			s := w.text
			if w.program {
				s += "*"
			}
			got = append(got, s)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%q: %q, want %q", in, strings.Join(got, " "), want)
		}
	}
}
