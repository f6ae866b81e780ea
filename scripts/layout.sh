#!/usr/bin/env bash
# Prints the package table of docs/design.md ("Package layout") from each
# package's doc comment (its first sentence), or, with --check, fails when
# the table in docs/design.md differs from it: the layout drawn there stays
# the tree's.
set -euo pipefail
cd "$(dirname "$0")/.."
table() {
	echo "| Package | Its one job |"
	echo "|---|---|"
	go list -f '{{.ImportPath}}|{{.Doc}}' ./... | sed 's|^github.com/agentbox/agentbox/||' | grep -v '^test/' |
		while IFS='|' read -r pkg doc; do
			printf '| `%s` | %s |\n' "$pkg" "${doc:-(no package comment)}"
		done
}
if [ "${1:-}" = "--check" ]; then
	want=$(table)
	got=$(sed -n '/^<!-- layout:begin -->$/,/^<!-- layout:end -->$/p' docs/design.md | sed '1d;$d')
	if [ "$want" != "$got" ]; then
		echo "docs/design.md's package table is not the tree's; run scripts/layout.sh --write"
		diff <(echo "$got") <(echo "$want") || true
		exit 1
	fi
	exit 0
fi
if [ "${1:-}" = "--write" ]; then
	t=$(table)
	python3 - "$t" <<'PY'
import sys, re
t = sys.argv[1]
p = 'docs/design.md'
s = open(p).read()
block = '<!-- layout:begin -->\n' + t + '\n<!-- layout:end -->'
s2, n = re.subn(r'<!-- layout:begin -->\n.*?<!-- layout:end -->', lambda m: block, s, flags=re.S)
if n != 1:
    sys.exit('docs/design.md has no layout markers')
open(p, 'w').write(s2)
PY
	exit 0
fi
table
