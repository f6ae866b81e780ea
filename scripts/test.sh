#!/usr/bin/env bash
# Runs every check agentbox has, on a fresh Debian machine as root (CI) or a
# developer's machine: formatting, vet for all three OSes, the Linux unit and
# enforcement tests (as root and as an unprivileged user the tests create),
# cross-compiled test binaries for darwin and windows, the official MCP
# inspector against `agentbox mcp` (node and npm are installed with apt-get
# if missing; the tests install the inspector from the npm registry into a
# cache), and the Windows plumbing tests under Wine. Any failure fails the
# script.
set -euo pipefail
cd "$(dirname "$0")/.."

export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
step() { printf '\n=== %s\n' "$*"; }

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "not gofmt-formatted:"; echo "$unformatted"; exit 1
fi

step "docs/design.md's package table is the tree's"
scripts/layout.sh --check

step "go vet (linux, darwin, windows/amd64, windows/arm64)"
go vet ./...
GOOS=darwin GOARCH=arm64 go vet ./...
GOOS=windows GOARCH=amd64 go vet ./...
GOOS=windows GOARCH=arm64 go vet ./...

step "staticcheck (every OS's findings merged: code unused on one OS may serve another)"
# Pinned; built for this machine, then run once per target.
GOBIN="$PWD/.cache/bin" go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
sc_out=$(mktemp -d)
for target in linux/amd64 darwin/arm64 windows/amd64 windows/arm64; do
	GOOS=${target%/*} GOARCH=${target#*/} .cache/bin/staticcheck -f binary ./... >"$sc_out/${target/\//-}.bin"
done
.cache/bin/staticcheck -merge "$sc_out"/*.bin
rm -rf "$sc_out"

step "generated Win32 calls match their //sys lines (go generate of the four mksyscall packages)"
for pkg in $(git ls-files '*/zsyscall_windows.go' | xargs -n1 dirname); do
	(cd "$pkg" && go generate -run mkwinsyscall ./)
done
if ! git diff --quiet -- '*/zsyscall_windows.go'; then
	echo "zsyscall_windows.go differs from what go generate makes; run go generate and commit:"
	git diff --stat -- '*/zsyscall_windows.go'
	exit 1
fi

step "build every binary for every platform"
for target in linux/amd64 linux/arm64 darwin/arm64 darwin/amd64 windows/amd64 windows/arm64; do
	GOOS=${target%/*} GOARCH=${target#*/} go build -o /dev/null ./... 
done

step "compile the darwin and windows test binaries"
GOOS=darwin GOARCH=arm64 go test -count=1 -exec=true ./... >/dev/null
GOOS=windows GOARCH=amd64 go test -count=1 -exec=true ./... >/dev/null

step "tools of the package-manager and MCP inspector tests (Debian's python3-pip, python3-venv, cargo, nodejs and npm; pnpm and yarn 1 from the npm registry)"
# test/linux/pkgmgr_test.go installs packages with each from a local
# registry; a tool that is absent makes its test skip, so CI must have them.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}
missing=()
/usr/bin/python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
/usr/bin/python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
[ -x /usr/bin/cargo ] || missing+=(cargo)
command -v npm >/dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
	echo "installing ${missing[*]}"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Pinned, outside every home, readable by the tests' unprivileged user.
tools=${AGENTBOX_TEST_TOOLS:-/opt/agentbox-test-tools}
pins=(pnpm@12.23.0 yarn@1.22.22)
for pin in "${pins[@]}"; do
	if ! grep -qs "\"version\": \"${pin#*@}\"" "$tools/lib/node_modules/${pin%@*}/package.json"; then
		echo "installing ${pins[*]} into $tools"
		as_root npm install -g --prefix "$tools" --no-audit --no-fund --loglevel=error "${pins[@]}"
		break
	fi
done
export AGENTBOX_TEST_TOOLS=$tools
echo "node $(node --version), npm $(npm --version)"

step "Linux tests (unit, seccomp/landlock, enforcement as root and as an unprivileged user)"
go test -count=1 -timeout 15m ./...

if [ -x scripts/test-windows.sh ]; then
	step "Windows plumbing tests under Wine"
	scripts/test-windows.sh
fi
echo
echo "all checks passed"
