package darwin

import (
	"fmt"
	"strings"
)

// maxVariantRegex bounds the expression for one protected name. Each
// ligature position doubles part of the expression; ordinary names stay
// far below this, and a name that would not is refused, not truncated.
const maxVariantRegex = 16 << 10

// checkName accepts the protected names whose every spelling variantRegex
// can enumerate: ASCII letters, digits, ".", "-" and "_".
func checkName(n string) error {
	if n == "" || n == "." || n == ".." {
		return fmt.Errorf("protected name %q: not a file name", n)
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return fmt.Errorf("protected name %q: only ASCII letters, digits, '.', '-' and '_' can be covered in every case and Unicode spelling", n)
		}
	}
	if _, err := variantRegex(n); err != nil {
		return err
	}
	return nil
}

// ignorables are the code points HFS+ leaves out when it compares names
// (the set git also guards against on macOS).
var ignorables = []rune{
	0x200C, 0x200D, 0x200E, 0x200F,
	0x202A, 0x202B, 0x202C, 0x202D, 0x202E,
	0x206A, 0x206B, 0x206C, 0x206D, 0x206E, 0x206F,
	0xFEFF,
}

// ignorable matches any run of ignorable code points. Raw UTF-8
// alternatives, not a bracket expression, so the meaning does not depend
// on whether the regex engine is byte- or character-oriented.
var ignorable = func() string {
	alts := make([]string, len(ignorables))
	for i, r := range ignorables {
		alts[i] = string(r)
	}
	return "(" + strings.Join(alts, "|") + ")*"
}()

// singleFolds are the non-ASCII code points that case folding or canonical
// decomposition maps to one ASCII letter.
var singleFolds = map[byte][]rune{
	's': {0x017F}, // LATIN SMALL LETTER LONG S folds to s
	'k': {0x212A}, // KELVIN SIGN decomposes to K
}

// ligatures are the code points whose full case folding is a run of ASCII
// letters.
var ligatures = []struct {
	r    rune
	fold string
}{
	{0x00DF, "ss"}, {0x1E9E, "ss"},
	{0xFB00, "ff"}, {0xFB01, "fi"}, {0xFB02, "fl"},
	{0xFB03, "ffi"}, {0xFB04, "ffl"},
	{0xFB05, "st"}, {0xFB06, "st"},
}

// variantRegex returns a regular expression (without anchors) matching
// every spelling of the ASCII name n that a case- and
// normalisation-insensitive volume treats as n. See the package doc.
func variantRegex(n string) (string, error) {
	var b strings.Builder
	b.WriteString(ignorable)
	if err := writeVariants(&b, strings.ToLower(n)); err != nil {
		return "", fmt.Errorf("protected name %q: %w", n, err)
	}
	return b.String(), nil
}

// writeVariants writes the expression for s (lower case), each character
// followed by optional ignorables.
func writeVariants(b *strings.Builder, s string) error {
	if s == "" {
		return nil
	}
	if b.Len() > maxVariantRegex {
		return fmt.Errorf("too many spellings to cover")
	}
	var ligs []int
	for i, l := range ligatures {
		if strings.HasPrefix(s, l.fold) {
			ligs = append(ligs, i)
		}
	}
	if len(ligs) == 0 {
		writeChar(b, s[0])
		b.WriteString(ignorable)
		return writeVariants(b, s[1:])
	}
	// A ligature covers several letters, so the rest of the name differs
	// per alternative: spell each alternative out in full.
	b.WriteString("(")
	writeChar(b, s[0])
	b.WriteString(ignorable)
	if err := writeVariants(b, s[1:]); err != nil {
		return err
	}
	for _, i := range ligs {
		b.WriteString("|")
		b.WriteRune(ligatures[i].r)
		b.WriteString(ignorable)
		if err := writeVariants(b, s[len(ligatures[i].fold):]); err != nil {
			return err
		}
	}
	b.WriteString(")")
	return nil
}

// writeChar writes the expression for one lower-case ASCII character.
func writeChar(b *strings.Builder, c byte) {
	switch {
	case 'a' <= c && c <= 'z':
		upper := c - 'a' + 'A'
		if extra := singleFolds[c]; len(extra) > 0 {
			b.WriteString("(" + string(c) + "|" + string(upper))
			for _, r := range extra {
				b.WriteString("|" + string(r))
			}
			b.WriteString(")")
			return
		}
		b.WriteString("[" + string(c) + string(upper) + "]")
	case c == '.':
		// A bracket avoids relying on how #"..." strings treat backslashes.
		b.WriteString("[.]")
	default: // digits, '-', '_': literal outside brackets
		b.WriteByte(c)
	}
}
