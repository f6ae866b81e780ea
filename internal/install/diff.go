package install

import (
	"fmt"
	"strings"
)

// Diff is c as a unified diff (what --dry-run prints).
func Diff(c Change) string {
	from, to := "a"+c.Path, "b"+c.Path
	if c.Old == nil {
		from = "/dev/null"
	}
	if c.New == nil {
		to = "/dev/null"
	}
	return unified(from, to, string(c.Old), string(c.New))
}

// maxLCS bounds the table of the line diff; past it the changed middle is
// shown as all removed and all added, which is still a correct diff.
const maxLCS = 4 << 20

// unified is a unified diff of a and b with three lines of context.
func unified(fromName, toName, a, b string) string {
	al, bl := splitLines(a), splitLines(b)
	// Edits here are local: trim what is common at both ends first.
	pre := 0
	for pre < len(al) && pre < len(bl) && al[pre] == bl[pre] {
		pre++
	}
	suf := 0
	for suf < len(al)-pre && suf < len(bl)-pre && al[len(al)-1-suf] == bl[len(bl)-1-suf] {
		suf++
	}
	ma, mb := al[pre:len(al)-suf], bl[pre:len(bl)-suf]
	type op struct {
		kind byte // ' ', '-', '+'
		line string
	}
	var ops []op
	for _, l := range al[:pre] {
		ops = append(ops, op{' ', l})
	}
	if len(ma)*len(mb) <= maxLCS {
		// lcs[i][j]: the longest common subsequence of ma[i:], mb[j:].
		lcs := make([][]int, len(ma)+1)
		for i := range lcs {
			lcs[i] = make([]int, len(mb)+1)
		}
		for i := len(ma) - 1; i >= 0; i-- {
			for j := len(mb) - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < len(ma) || j < len(mb) {
			switch {
			case i < len(ma) && j < len(mb) && ma[i] == mb[j]:
				ops = append(ops, op{' ', ma[i]})
				i++
				j++
			case i < len(ma) && (j == len(mb) || lcs[i+1][j] >= lcs[i][j+1]):
				ops = append(ops, op{'-', ma[i]})
				i++
			default:
				ops = append(ops, op{'+', mb[j]})
				j++
			}
		}
	} else {
		for _, l := range ma {
			ops = append(ops, op{'-', l})
		}
		for _, l := range mb {
			ops = append(ops, op{'+', l})
		}
	}
	for _, l := range al[len(al)-suf:] {
		ops = append(ops, op{' ', l})
	}

	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", fromName, toName)
	const ctx = 3
	for k := 0; k < len(ops); {
		if ops[k].kind == ' ' {
			k++
			continue
		}
		// A hunk: from ctx lines before this change to ctx lines after
		// the last change closer than 2*ctx to the one before it.
		start := max(0, k-ctx)
		end := k
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*ctx {
				end = min(end+ctx, len(ops))
				break
			}
			end = run
		}
		// Line numbers of the hunk's start in a and b.
		an, bn := 1, 1
		for _, o := range ops[:start] {
			if o.kind != '+' {
				an++
			}
			if o.kind != '-' {
				bn++
			}
		}
		ac, bc := 0, 0
		for _, o := range ops[start:end] {
			if o.kind != '+' {
				ac++
			}
			if o.kind != '-' {
				bc++
			}
		}
		if ac == 0 {
			an--
		}
		if bc == 0 {
			bn--
		}
		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n", an, ac, bn, bc)
		for _, o := range ops[start:end] {
			out.WriteByte(o.kind)
			out.WriteString(strings.TrimSuffix(o.line, "\n"))
			out.WriteByte('\n')
			if !strings.HasSuffix(o.line, "\n") {
				out.WriteString("\\ No newline at end of file\n")
			}
		}
		k = end
	}
	return out.String()
}

// splitLines splits s after each newline; the last line may lack one.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}
