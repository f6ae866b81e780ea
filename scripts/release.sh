#!/usr/bin/env bash
# Builds agentbox's release binaries into dist/: static (CGO_ENABLED=0),
# -trimpath, for linux, darwin and windows on amd64 and arm64 (on Windows
# also agentbox-setup.exe and agentbox-runner.exe, which elevated mode
# needs beside agentbox.exe), each stamped with the commit it is built
# from, and dist/SHA256SUMS over them all.
#
#   scripts/release.sh            # every target
#   scripts/release.sh linux/amd64 windows/arm64
set -euo pipefail
cd "$(dirname "$0")/.."

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
	targets=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64)
fi

version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' internal/cli/cli.go)
[ -n "$version" ] || { echo "release.sh: no Version constant in internal/cli/cli.go" >&2; exit 1; }
commit=unknown
if rev=$(git rev-parse --short=12 HEAD 2>/dev/null); then
	commit=$rev
	# Untracked files count as changes only when git would commit them.
	if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
		commit=$commit-dirty
	fi
fi

export CGO_ENABLED=0
ldflags="-s -w -X github.com/agentbox/agentbox/internal/cli.commit=$commit"
rm -rf dist
mkdir -p dist
for target in "${targets[@]}"; do
	goos=${target%/*} goarch=${target#*/}
	dir=dist/agentbox-$version-$goos-$goarch
	mkdir -p "$dir"
	cmds=(agentbox)
	ext=
	if [ "$goos" = windows ]; then
		cmds+=(agentbox-setup agentbox-runner)
		ext=.exe
	fi
	for c in "${cmds[@]}"; do
		GOOS=$goos GOARCH=$goarch go build -trimpath -ldflags "$ldflags" -o "$dir/$c$ext" "./cmd/$c"
	done
done
(cd dist && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum > SHA256SUMS)
echo "agentbox $version ($commit), built with $(go env GOVERSION):"
(cd dist && find . -type f | sed 's|^\./||' | LC_ALL=C sort | xargs ls -l | awk '{printf "  %10d  %s\n", $5, $9}')
