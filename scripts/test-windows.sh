#!/usr/bin/env bash
# test-windows.sh vets and builds agentbox for Windows and runs its Windows
# tests under Wine, on a Debian 12 (bookworm) machine, as root or via sudo.
#
#   scripts/test-windows.sh                 # vet, build, test the default set
#   scripts/test-windows.sh ./internal/windows/ipc/...   # test only these
#   GOTESTFLAGS='-run Pipe -v' scripts/test-windows.sh    # extra go test flags
#
# What it does, each step skipped when already done (so re-runs are fast):
#   1. installs wine64 and gcc-mingw-w64-x86-64 with apt-get if missing;
#   2. creates a private Wine prefix under $AGENTBOX_WINE_CACHE
#      (default ${XDG_CACHE_HOME:-$HOME/.cache}/agentbox-wine);
#   3. builds bcryptprimitives.dll exporting ProcessPrng and copies it into
#      the prefix's system32: Go >= 1.22 binaries abort at start-up without
#      it, and Wine 8.0 only gained ProcessPrng in 8.13;
#   4. puts a go_windows_amd64_exec wrapper on PATH, which `go test` uses by
#      itself to run GOOS=windows test binaries;
#   5. go vet and go build ./cmd/... for windows/amd64 and windows/arm64;
#   6. go test (windows/amd64, CGO_ENABLED=0) under Wine.
#
# Wine runs the Win32 calls but fakes most of Windows security (restricted
# tokens, ACL enforcement, users, logon, firewall): tests that need the real
# thing must skip under Wine (they can detect it with the AGENTBOX_WINE=1
# variable this script sets, or by wine_get_version in ntdll). Wine 8.0
# also does not store DACLs: SetNamedSecurityInfo succeeds and
# GetNamedSecurityInfo then reads back a default DACL, so tests that read
# ACEs back check them only on a real host. Wine runs everything as an
# elevated administrator, so `agentbox setup` starts agentbox-setup
# without a UAC prompt, and then fails at Wine's stubbed account lookups.
#
# Known Wine 8.0 gap: os.RemoveAll (and so t.TempDir's cleanup) fails with
# "Invalid function" because Go 1.26 deletes through
# FileDispositionInformationEx; os.Remove works. Tests meant for Wine make
# their temporary directories with os.MkdirTemp and remove them file by file.
set -euo pipefail

log() { printf '== %s\n' "$*" >&2; }
die() { printf 'test-windows.sh: %s\n' "$*" >&2; exit 1; }

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

command -v go >/dev/null || die "go is not on PATH"

cache=${AGENTBOX_WINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentbox-wine}
# Runs that share a cache take turns: two initialising one prefix at once
# leave it broken (wineboot spinning, or no system32), and the shim and
# binaries below are rebuilt in place. flock -o: the lock stays with flock
# itself, not with the wineserver this run leaves behind for a moment.
if [ "${AGENTBOX_WINE_LOCKED:-}" != "$cache" ]; then
	mkdir -p "$cache"
	if ! flock -n "$cache/lock" true; then
		log "another run is using $cache; waiting for it (AGENTBOX_WINE_CACHE=DIR gives this run a cache of its own)"
	fi
	rc=0
	AGENTBOX_WINE_LOCKED=$cache flock -o -w 1800 -E 75 "$cache/lock" "$repo/scripts/$(basename "${BASH_SOURCE[0]}")" "$@" || rc=$?
	[ "$rc" -ne 75 ] || die "another run held $cache/lock for 30 minutes"
	exit "$rc"
fi
export WINEPREFIX="$cache/prefix"
export WINEARCH=win64
# -all keeps fixme/err chatter out of go test's output; override to debug.
export WINEDEBUG=${WINEDEBUG:--all}
# No Mono/Gecko installer prompts and no X display: tests are console only.
export WINEDLLOVERRIDES=${WINEDLLOVERRIDES:-mscoree,mshtml=}
unset DISPLAY WAYLAND_DISPLAY

start=$(date +%s)

# --- 1. packages -----------------------------------------------------------
as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}
missing=()
command -v wine >/dev/null || [ -x /usr/lib/wine/wine64 ] || missing+=(wine64 wine)
command -v x86_64-w64-mingw32-gcc >/dev/null || missing+=(gcc-mingw-w64-x86-64)
if [ ${#missing[@]} -gt 0 ]; then
	log "installing ${missing[*]}"
	# Another apt process (unattended upgrades, a parallel job) may hold the
	# lock; wait for it instead of failing.
	for i in $(seq 1 60); do
		as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -q && break
		[ "$i" -eq 60 ] && die "apt-get update kept failing"
		sleep 5
	done
	as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${missing[@]}"
fi
if [ -x /usr/lib/wine/wine64 ]; then
	# Debian's /usr/bin/wine prefers a wine32 that we do not install.
	wine=/usr/lib/wine/wine64
	export WINELOADER=$wine
else
	wine=$(command -v wine)
fi
wineserver=$(command -v wineserver || echo /usr/lib/wine/wineserver)

# --- 2. prefix -------------------------------------------------------------
mkdir -p "$cache/bin"
if [ ! -f "$WINEPREFIX/.agentbox-ready" ]; then
	log "initialising Wine prefix $WINEPREFIX"
	rm -rf "$WINEPREFIX"
	"$wine" wineboot -i >/dev/null 2>&1 || die "wineboot -i failed (run with WINEDEBUG=err+all to see why)"
	"$wineserver" -w
	[ -d "$WINEPREFIX/drive_c/windows/system32" ] || die "wineboot left no system32 in $WINEPREFIX"
	touch "$WINEPREFIX/.agentbox-ready"
fi

# --- 3. ProcessPrng shim ---------------------------------------------------
shim_src="$cache/bcryptprimitives.c"
cat >"$shim_src.new" <<'EOF'
/* ProcessPrng for Wine < 8.13, which Go >= 1.22 needs at start-up. */
#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buf, ULONG len); /* RtlGenRandom */
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
	while (len > 0) {
		ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
		if (!SystemFunction036(data, n))
			return FALSE;
		data += n;
		len -= n;
	}
	return TRUE;
}
EOF
if ! cmp -s "$shim_src.new" "$shim_src" || [ ! -f "$cache/bcryptprimitives.dll" ]; then
	log "building bcryptprimitives.dll (ProcessPrng shim)"
	x86_64-w64-mingw32-gcc -O2 -shared -s -o "$cache/bcryptprimitives.dll" -x c "$shim_src.new" -x none -ladvapi32
	mv "$shim_src.new" "$shim_src"
else
	rm -f "$shim_src.new"
fi
sys32="$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll"
cmp -s "$cache/bcryptprimitives.dll" "$sys32" || cp "$cache/bcryptprimitives.dll" "$sys32"

# --- 4. go test exec wrapper ----------------------------------------------
cat >"$cache/bin/go_windows_amd64_exec.new" <<EOF
#!/bin/sh
# Written by scripts/test-windows.sh: go runs GOOS=windows binaries with this.
export WINEPREFIX='$WINEPREFIX' WINEARCH=win64 WINEDEBUG="\${WINEDEBUG:--all}" WINEDLLOVERRIDES='$WINEDLLOVERRIDES'
export WINELOADER='$wine' AGENTBOX_WINE=1
unset DISPLAY WAYLAND_DISPLAY
# The first Wine process of a session starts wineserver and Wine's system
# processes (services.exe, winedevice.exe, ...), which inherit its stdio and
# outlive it; go test would then wait for our output pipes to close. Start
# them here with stdio on /dev/null (a no-op when they already run).
'$wine' cmd /c exit </dev/null >/dev/null 2>&1 || true
exec '$wine' "\$@"
EOF
chmod +x "$cache/bin/go_windows_amd64_exec.new"
mv "$cache/bin/go_windows_amd64_exec.new" "$cache/bin/go_windows_amd64_exec"
export PATH="$cache/bin:$PATH"

# Keep one wineserver (and Wine's system processes) alive across the test
# binaries instead of starting them per binary; stop it when we are done so
# nothing outlives the script.
"$wineserver" -p </dev/null >/dev/null 2>&1 || true
"$wine" cmd /c exit </dev/null >/dev/null 2>&1 || true
trap '"$wineserver" -k >/dev/null 2>&1 || true' EXIT

# --- 5. vet and build ------------------------------------------------------
# A vet or build failure does not stop the tests (they say more about what
# is broken); the script still exits non-zero at the end.
failed=()
for arch in amd64 arm64; do
	log "go vet GOOS=windows GOARCH=$arch"
	GOOS=windows GOARCH=$arch go vet ./... || failed+=("vet windows/$arch")
	if [ -d cmd ]; then
		log "go build ./cmd/... GOOS=windows GOARCH=$arch"
		out=$(mktemp -d)
		GOOS=windows GOARCH=$arch CGO_ENABLED=0 go build -o "$out/" ./cmd/... || failed+=("build windows/$arch")
		rm -rf "$out"
	fi
done

# --- 6. tests under Wine ---------------------------------------------------
if [ $# -gt 0 ]; then
	pkgs=("$@")
else
	# internal/windows and sandbox, every cmd package, and any package that
	# has a _windows_test.go file.
	mapfile -t pkgs < <(GOOS=windows go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}{{end}}' ./... |
		awk '$1 ~ /\/internal\/windows(\/|$)|\/sandbox(\/|$)|\/cmd\// { print $1; next }
			{ for (i = 2; i <= NF; i++) if ($i ~ /_windows_test\.go$/) { print $1; next } }')
fi
if [ ${#pkgs[@]} -eq 0 ]; then
	die "no package with Windows tests found"
fi
log "go test GOOS=windows GOARCH=amd64 under Wine: ${pkgs[*]}"
# shellcheck disable=SC2086 # GOTESTFLAGS is a list of flags.
GOOS=windows GOARCH=amd64 CGO_ENABLED=0 go test -timeout "${GOTEST_TIMEOUT:-10m}" ${GOTESTFLAGS:-} "${pkgs[@]}" || failed+=("go test under Wine")

log "done in $(( $(date +%s) - start ))s"
if [ ${#failed[@]} -gt 0 ]; then
	die "FAILED: $(IFS=,; echo "${failed[*]}")"
fi
