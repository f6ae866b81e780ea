#!/usr/bin/env bash
# Runs the Linux end-to-end suite while another agentbox process runs
# `agentbox run -- true` in a loop on a workspace under /tmp that lacks
# .codex (and .agents, .git): the suite must not depend on being the only
# agentbox on the machine. Extra arguments go to `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
ws=$(mktemp -d /tmp/abloop-XXXXXX)
trap 'kill "$loop" 2>/dev/null || true; wait "$loop" 2>/dev/null || true; rm -rf "$tmp" "$ws"' EXIT
CGO_ENABLED=0 go build -o "$tmp/agentbox" ./cmd/agentbox

(
	export XDG_STATE_HOME="$tmp/state" TMPDIR=/tmp
	n=0 bad=0
	while [ ! -e "$tmp/stop" ]; do
		# stdout a pipe, so the loop's runs go through its resident
		# helper as an agent's would (a file there makes them lone runs).
		if ! "$tmp/agentbox" run -C "$ws" -- true 2>>"$tmp/loop.err" | cat; then bad=$((bad + 1)); fi
		n=$((n + 1))
	done
	"$tmp/agentbox" cleanup >/dev/null
	echo "loop: $n runs, $bad failed" >"$tmp/loop.out"
) &
loop=$!

status=0
go test -count=1 -timeout 15m "$@" ./test/linux/ || status=$?
touch "$tmp/stop"
wait "$loop" || true
cat "$tmp/loop.out"
if [ -s "$tmp/loop.err" ]; then
	echo "loop errors (first 5):"; head -5 "$tmp/loop.err"
fi
exit "$status"
