// Package spelling finds the name a user probably meant: the config key
// or flag within a small edit distance of what was typed.
package spelling

import "strings"

// Nearest is the candidate within a small edit distance of name, '-' and
// '_' counting alike and case ignored ("" when none is near): up to two
// edits, one for names shorter than six letters. On a tie the first
// candidate wins.
func Nearest(name string, candidates []string) string {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "-", "_")) }
	limit := 2
	if len(name) < 6 {
		limit = 1
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		if d := distance(norm(name), norm(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbours.
func distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
