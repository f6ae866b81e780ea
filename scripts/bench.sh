#!/usr/bin/env bash
# bench.sh: per-command cost of agentbox against bare `true` and against
# bubblewrap with comparable isolation, in one run: `agentbox run -- true`
# as a lone run (the resident helper off) and through the warm resident
# helper, a command through a library Session (scripts/benchsession), and
# a command through `agentbox mcp`'s run tool with the client round trip,
# each alternating with a fresh bwrap in a loop of its own (lone runs; the
# helper; the library session; MCP); then `go build ./...` of this project
# inside the sandbox (the Go caches overlaid copy-on-write) against
# outside, both with a warm host cache.
#
#   scripts/bench.sh [ROUNDS]        (default 30; rounds alternate the tools)
#   GO_BUILD_ROUNDS=N                 rounds of the go build comparison (default 5; 0 skips it)
#
# Builds agentbox (CGO_ENABLED=0) into a temp dir, installs Debian's
# bubblewrap if it is missing (needs root and apt-get), and prints the
# median, p10 and p90 wall time of each, the ratios to a fresh bwrap, and
# peak memory. Times come from bash's $EPOCHREALTIME, so no extra process
# is started per measurement.
set -euo pipefail

rounds=${1:-30}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /var/tmp/agentbox-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "building agentbox (CGO_ENABLED=0)..." >&2
(cd "$root" && CGO_ENABLED=0 go build -o "$work/agentbox" ./cmd/agentbox)
(cd "$root" && CGO_ENABLED=0 go build -o "$work/benchsession" ./scripts/benchsession)

if ! command -v bwrap >/dev/null 2>&1; then
	echo "installing bubblewrap..." >&2
	if [ "$(id -u)" -ne 0 ]; then
		echo "bench.sh: bwrap is missing and installing it needs root (apt-get install bubblewrap)" >&2
		exit 1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
fi

# A workspace outside /tmp with a .git, so agentbox sets up its protected
# carve-out as it would in a real checkout.
ws="$work/ws"
mkdir -p "$ws/.git/hooks"
printf '[core]\n\tbare = false\n' > "$ws/.git/config"
cd "$ws"

true_bin=$(type -P true) # the executable, not the shell builtin
bare() { "$true_bin"; }
# The resident helper gets a state directory of its own, stopped at exit.
# Both agentbox rows get the same stdio (/dev/null, which a lone run and
# the helper both pass as it is; a terminal would make the lone run
# allocate a pseudo-terminal and the helper step aside).
export XDG_STATE_HOME="$work/state"
# (Not `agentbox cleanup`: as root it would also remove a machine-wide
# AppArmor profile. The helper's lock file holds its pid.)
# The pid is the helper's only while it holds the lock.
stop_helper() {
	local lock="${1:-$XDG_STATE_HOME}/agentbox/resident/lock"
	if [ -e "$lock" ] && ! flock -n "$lock" true; then
		kill -TERM "$(cat "$lock")" 2>/dev/null || true
		flock -w 5 "$lock" true || true
	fi
}
trap 'stop_helper; stop_helper "$work/state-base"; rm -rf "$work"' EXIT
agentbox() { AGENTBOX_RESIDENT=0 "$work/agentbox" run -C "$ws" -- true </dev/null 2>/dev/null; }
resident() { "$work/agentbox" run -C "$ws" -- true </dev/null 2>/dev/null; }
agentbox_net() { AGENTBOX_RESIDENT=0 "$work/agentbox" run -C "$ws" --network -- true </dev/null 2>/dev/null; }
# bwrap with comparable isolation: every namespace (network included),
# new session, dies with its parent, read-only /, writable workspace and
# /tmp with .git read-only, fresh /proc and a minimal /dev.
bwrap_args=(--unshare-all --new-session --die-with-parent
	--ro-bind / / --bind "$ws" "$ws" --ro-bind "$ws/.git" "$ws/.git" --bind /tmp /tmp
	--proc /proc --dev /dev -- true)
bwrap_cmp() { bwrap "${bwrap_args[@]}"; }

# A command through the library's Session, and through `agentbox mcp`'s
# run tool with the official SDK's client: scripts/benchsession holds one
# session (or one MCP connection) and runs `true` for each line it reads.
# The loop times each round trip over its pipes; benchsession also times
# each command in-process (Run, or CallTool with the client round trip)
# and reports those at the end.
mkfifo "$work/s.in" "$work/s.out" "$work/m.in" "$work/m.out"
"$work/benchsession" "$ws" <"$work/s.in" >"$work/s.out" 2>"$work/s.err" &
exec 7>"$work/s.in" 8<"$work/s.out"
session() { echo >&7 && read -r _ <&8; }
"$work/benchsession" -mcp "$work/agentbox" "$ws" <"$work/m.in" >"$work/m.out" 2>"$work/m.err" &
exec 9>"$work/m.in" 10<"$work/m.out"
mcp_run() { echo >&9 && read -r _ <&10; }

# Each target is measured against bwrap in a loop of its own, so that its
# reference runs beside it and the tools of another loop do not sit
# between its rounds (a lone run takes three bwraps' time; the other
# probe's server and sandbox evict this one's from the caches): the CLI's
# lone runs; the run through the warm helper; the library session; MCP.
bwrap_res() { bwrap_cmp; }
bwrap_ses() { bwrap_cmp; }
bwrap_mcp() { bwrap_cmp; }
tools=(bare agentbox agentbox_net bwrap_cmp)
res_tools=(resident bwrap_res)
ses_tools=(session bwrap_ses)
mcp_tools=(mcp_run bwrap_mcp)
# AGENTBOX_BENCH_BASELINE=/path/to/older/agentbox adds a before/after
# column: the same run with another build, alternating with the others,
# and the same for its `agentbox mcp` (with this tree's client).
# AGENTBOX_BENCH_BASELINE_SESSION=/path/to/older/benchsession does so for
# the library Session (benchsession holds the library it was built with).
if [ -n "${AGENTBOX_BENCH_BASELINE:-}" ]; then
	# A lone run, as the agentbox row; and through its own helper (a
	# state directory of its own: one helper serves one build).
	baseline() { AGENTBOX_RESIDENT=0 "$AGENTBOX_BENCH_BASELINE" run -C "$ws" -- true </dev/null 2>/dev/null; }
	tools+=(baseline)
	mkdir -p "$work/state-base"
	res_base() { XDG_STATE_HOME="$work/state-base" "$AGENTBOX_BENCH_BASELINE" run -C "$ws" -- true </dev/null 2>/dev/null; }
	res_tools+=(res_base)
	mkfifo "$work/mb.in" "$work/mb.out"
	"$work/benchsession" -mcp "$AGENTBOX_BENCH_BASELINE" "$ws" <"$work/mb.in" >"$work/mb.out" 2>"$work/mb.err" &
	exec 11>"$work/mb.in" 12<"$work/mb.out"
	mcp_base() { echo >&11 && read -r _ <&12; }
	mcp_tools+=(mcp_base)
fi
if [ -n "${AGENTBOX_BENCH_BASELINE_SESSION:-}" ]; then
	mkfifo "$work/sb.in" "$work/sb.out"
	"$AGENTBOX_BENCH_BASELINE_SESSION" "$ws" <"$work/sb.in" >"$work/sb.out" 2>"$work/sb.err" &
	exec 13>"$work/sb.in" 14<"$work/sb.out"
	session_base() { echo >&13 && read -r _ <&14; }
	ses_tools+=(session_base)
fi
# The cost of the masks over hidden credentials (issue 24): a home with
# the usual ones, a lone run and a library session's command with the
# built-in list against the same with default_deny_read = false (no
# masks), in a loop of their own. Goal: within 10%.
shome="$work/home"
mkdir -p "$shome/.ssh" "$shome/.aws" "$shome/.config/gh" "$shome/.docker" "$shome/.kube"
for f in .ssh/id_ed25519 .ssh/id_ed25519.pub .ssh/known_hosts .ssh/config .aws/credentials .aws/config \
	.config/gh/hosts.yml .docker/config.json .kube/config .netrc .bash_history .npmrc .git-credentials; do
	echo x >"$shome/$f"
done
printf '[filesystem]\ndefault_deny_read = true\n' >"$work/hide.toml"
printf '[filesystem]\ndefault_deny_read = false\n' >"$work/nohide.toml"
hide() { HOME="$shome" AGENTBOX_RESIDENT=0 "$work/agentbox" run --config "$work/hide.toml" -C "$ws" -- true </dev/null 2>/dev/null; }
nohide() { HOME="$shome" AGENTBOX_RESIDENT=0 "$work/agentbox" run --config "$work/nohide.toml" -C "$ws" -- true </dev/null 2>/dev/null; }
mkfifo "$work/h.in" "$work/h.out" "$work/n.in" "$work/n.out"
HOME="$shome" BENCHSESSION_CONFIG="$work/hide.toml" "$work/benchsession" "$ws" <"$work/h.in" >"$work/h.out" 2>"$work/h.err" &
exec 15>"$work/h.in" 16<"$work/h.out"
ses_hide() { echo >&15 && read -r _ <&16; }
HOME="$shome" BENCHSESSION_CONFIG="$work/nohide.toml" "$work/benchsession" "$ws" <"$work/n.in" >"$work/n.out" 2>"$work/n.err" &
exec 17>"$work/n.in" 18<"$work/n.out"
ses_nohide() { echo >&17 && read -r _ <&18; }
sec_tools=(hide nohide ses_hide ses_nohide)
declare -A times
for t in "${tools[@]}" "${res_tools[@]}" "${ses_tools[@]}" "${mcp_tools[@]}" "${sec_tools[@]}"; do
	"$t" >/dev/null # warm up, and fail early if a tool does not work
	times[$t]=""
done
# The helper starts on the first resident run and prepares its sandbox on
# the next ones: served once the shell's parent is the helper's shim.
served_probe='read -r _ _ _ pp _ < /proc/self/stat; tr "\0" "\n" < /proc/$pp/cmdline | head -n 1'
for _ in $(seq 50); do
	[ "$("$work/agentbox" run -C "$ws" -- sh -c "$served_probe" </dev/null 2>/dev/null)" = agentbox-resident-init ] && break
	sleep 0.05
done
if [ -n "${AGENTBOX_BENCH_BASELINE:-}" ]; then
	for _ in $(seq 50); do
		[ "$(XDG_STATE_HOME="$work/state-base" "$AGENTBOX_BENCH_BASELINE" run -C "$ws" -- sh -c "$served_probe" </dev/null 2>/dev/null)" = agentbox-resident-init ] && break
		sleep 0.05
	done
fi

# measure ROUNDS TOOL...: run the tools in turn ROUNDS times, appending
# each one's wall time to times[TOOL] (microseconds, without forking).
measure() {
	local n=$1 i t s e
	shift
	for ((i = 0; i < n; i++)); do
		for t in "$@"; do
			s=$EPOCHREALTIME
			"$t" >/dev/null
			e=$EPOCHREALTIME
			times[$t]+="$(( (${e/./} - ${s/./}) )) "
		done
	done
}

echo "running $rounds rounds of: ${tools[*]}" >&2
measure "$rounds" "${tools[@]}"
echo "running $rounds rounds of: ${res_tools[*]}" >&2
measure "$rounds" "${res_tools[@]}"
echo "running $rounds rounds of: ${ses_tools[*]}" >&2
measure "$rounds" "${ses_tools[@]}"
echo "running $rounds rounds of: ${mcp_tools[*]}" >&2
measure "$rounds" "${mcp_tools[@]}"
echo "running $rounds rounds of: ${sec_tools[*]}" >&2
measure "$rounds" "${sec_tools[@]}"

# stat NAME -> "median p10 p90" in microseconds
stat() {
	tr ' ' '\n' <<<"${times[$1]}" | sed '/^$/d' | sort -n | awk '
		{ v[NR] = $1 }
		END {
			m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			p10 = v[int(NR * 0.1) + 1]; p90 = v[int(NR * 0.9)]
			printf "%d %d %d\n", m, p10, p90
		}'
}

declare -A med
printf '%-14s %10s %10s %10s\n' tool "median ms" "p10 ms" "p90 ms"
for t in "${tools[@]}" "${res_tools[@]}" "${ses_tools[@]}" "${mcp_tools[@]}" "${sec_tools[@]}"; do
	read -r m p10 p90 < <(stat "$t")
	med[$t]=$m
	awk -v t="$t" -v m="$m" -v a="$p10" -v b="$p90" 'BEGIN { printf "%-14s %10.2f %10.2f %10.2f\n", t, m / 1000, a / 1000, b / 1000 }'
done
# The probes report their in-process timings once their input ends.
exec 7>&- 9>&- 15>&- 17>&-
[ -n "${AGENTBOX_BENCH_BASELINE:-}" ] && exec 11>&-
[ -n "${AGENTBOX_BENCH_BASELINE_SESSION:-}" ] && exec 13>&-
wait
in_proc() { sed -n 's/^in-process: median \([0-9]*\) us.*/\1/p' "$1"; }
s_in=$(in_proc "$work/s.err")
m_in=$(in_proc "$work/m.err")
h_in=$(in_proc "$work/h.err")
n_in=$(in_proc "$work/n.err")
awk -v h="${med[hide]}" -v n="${med[nohide]}" -v sh="${h_in:-0}" -v sn="${n_in:-1}" 'BEGIN {
	printf "masks: lone run hidden/none = %.2fx (%.2f vs %.2f ms), session command %.2fx in-process (%.2f vs %.2f ms)   (13 credentials planted; goal <= 1.10x)\n", h / n, h / 1000, n / 1000, sh / sn, sh / 1000, sn / 1000 }'
awk -v a="${med[agentbox]}" -v b="${med[bare]}" -v w="${med[bwrap_cmp]}" -v n="${med[agentbox_net]}" \
	-v wr="${med[bwrap_res]}" -v ws="${med[bwrap_ses]}" -v wm="${med[bwrap_mcp]}" \
	-v s="${med[session]}" -v m="${med[mcp_run]}" -v si="${s_in:-0}" -v mi="${m_in:-0}" -v r="${med[resident]}" 'BEGIN {
	printf "agentbox/bare  = %.1fx\n", a / b
	printf "agentbox/bwrap = %.2fx   (lone run, the resident helper off)\n", a / w
	printf "agentbox --network/bwrap = %.2fx\n", n / w
	printf "resident/bwrap = %.2fx   (agentbox run through the warm resident helper, against its loop'"'"'s bwrap; target <= 1.0x)\n", r / wr
	printf "session/bwrap  = %.2fx in-process (%.2f ms), %.2fx with the probe pipe round trip   (library Session, against its loop'"'"'s bwrap; target <= 0.2x)\n", si / ws, si / 1000, s / ws
	printf "mcp run/bwrap  = %.2fx in-process (%.2f ms), %.2fx with the probe pipe round trip   (SDK client to agentbox mcp, against its loop'"'"'s bwrap; target <= 0.3x)\n", mi / wm, mi / 1000, m / wm
}'

# Peak memory (max RSS, KiB): of a lone run (agentbox, its init stage and
# the command: the largest of them) and of bwrap; the session probes print
# their long-lived processes' below (a session's command itself is as
# large as a bare one).
peak() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
if [ -x /usr/bin/time ]; then
	# One run first, so that the helper serves the measured one warm
	# (the session loops since may have had it close this sandbox).
	"$work/agentbox" run -C "$ws" -- true </dev/null >/dev/null 2>&1 || true
	echo "peak RSS KiB: bare $(peak "$true_bin"), agentbox run $(AGENTBOX_RESIDENT=0 peak "$work/agentbox" run -C "$ws" -- true </dev/null), through the helper: the CLI $(peak "$work/agentbox" run -C "$ws" -- true </dev/null), bwrap $(peak bwrap "${bwrap_args[@]}")"
	# The helper and its zygote live across commands: their high-water marks.
	for p in $(cat "$XDG_STATE_HOME/agentbox/resident/lock" 2>/dev/null); do
		echo "resident helper pid $p: $(awk '/^VmHWM/ {print $2, $3}' "/proc/$p/status"); its zygotes: $(for z in $(pgrep -P "$p"); do awk '/^VmHWM/ {printf "%s %s ", $2, $3}' "/proc/$z/status"; done)"
	done
fi
sed 's/^/session: /' "$work/s.err"
sed 's/^/mcp: /' "$work/m.err"
if [ -n "${med[baseline]:-}" ]; then
	awk -v a="${med[agentbox]}" -v b="${med[baseline]}" -v r="${med[resident]}" -v rb="${med[res_base]}" -v w="${med[bwrap_res]}" 'BEGIN {
		printf "agentbox/baseline = %.2fx (lone runs)\n", a / b
		printf "through the helper: baseline/bwrap = %.2fx, this build %.2fx\n", rb / w, r / w }'
	mb_in=$(in_proc "$work/mb.err")
	awk -v m="${m_in:-0}" -v b="${mb_in:-0}" -v w="${med[bwrap_mcp]}" 'BEGIN {
		printf "mcp run: baseline/bwrap = %.2fx in-process (%.2f ms), this build %.2fx\n", b / w, b / 1000, m / w }'
fi
if [ -n "${med[session_base]:-}" ]; then
	sb_in=$(in_proc "$work/sb.err")
	awk -v s="${s_in:-0}" -v b="${sb_in:-0}" -v w="${med[bwrap_ses]}" 'BEGIN {
		printf "session: baseline/bwrap = %.2fx in-process (%.2f ms), this build %.2fx\n", b / w, b / 1000, s / w }'
fi
echo "rounds=$rounds kernel=$(uname -r) cpus=$(nproc) $("$work/agentbox" version 2>/dev/null | head -1)"

# go build with a warm host cache: inside the sandbox the Go caches are
# overlays of the host's (tool_caches = "overlay"), so the build should
# cost about what it costs outside.
go_rounds=${GO_BUILD_ROUNDS:-5}
if [ "$go_rounds" -gt 0 ] && command -v go >/dev/null 2>&1; then
	gobin=$(dirname "$(command -v go)")
	cd "$root"
	go_out() { go build ./...; }
	go_in() { "$work/agentbox" run -C "$root" -- env PATH="$gobin:$PATH" go build ./...; }
	go build ./... # warm the host cache
	go_in          # and this workspace's upper layer
	times[go_out]="" times[go_in]=""
	echo "running $go_rounds rounds of: go build ./... outside and inside" >&2
	measure "$go_rounds" go_out go_in
	read -r mo _ _ < <(stat go_out)
	read -r mi _ _ < <(stat go_in)
	awk -v o="$mo" -v i="$mi" 'BEGIN {
		printf "go build ./... outside  %8.1f ms (median)\n", o / 1000
		printf "go build ./... inside   %8.1f ms (median)\n", i / 1000
		printf "go build inside/outside = %.2fx (target <= 1.2)\n", i / o
	}'
fi

# --- File observer (the run report's filesystem section): lone runs with
# it on and off (AGENTBOX_FSREPORT=0), alternating: `true` (target <=
# 1.10x) and `go build ./...` of this project with a warm cache (target
# <= 1.05x).
#   FSREPORT_ROUNDS=N   rounds of `true` (default: ROUNDS); go build uses GO_BUILD_ROUNDS
fs_rounds=${FSREPORT_ROUNDS:-$rounds}
if [ "$fs_rounds" -gt 0 ]; then
	cd "$ws"
	fs_on() { AGENTBOX_RESIDENT=0 "$work/agentbox" run -C "$ws" -- true </dev/null 2>/dev/null; }
	fs_off() { AGENTBOX_FSREPORT=0 AGENTBOX_RESIDENT=0 "$work/agentbox" run -C "$ws" -- true </dev/null 2>/dev/null; }
	times[fs_on]="" times[fs_off]=""
	echo "running $fs_rounds rounds of: true with the file observer on and off" >&2
	measure "$fs_rounds" fs_on fs_off
	read -r on _ _ < <(stat fs_on)
	read -r off _ _ < <(stat fs_off)
	awk -v a="$on" -v b="$off" 'BEGIN { printf "true, file observer on/off = %.3fx (%.2f / %.2f ms; target <= 1.10)\n", a / b, a / 1000, b / 1000 }'
	if [ "$go_rounds" -gt 0 ] && command -v go >/dev/null 2>&1; then
		cd "$root"
		gofs_on() { AGENTBOX_RESIDENT=0 "$work/agentbox" run -C "$root" -- env PATH="$gobin:$PATH" go build ./...; }
		gofs_off() { AGENTBOX_FSREPORT=0 AGENTBOX_RESIDENT=0 "$work/agentbox" run -C "$root" -- env PATH="$gobin:$PATH" go build ./...; }
		gofs_on
		times[gofs_on]="" times[gofs_off]=""
		echo "running $go_rounds rounds of: go build ./... with the file observer on and off" >&2
		measure "$go_rounds" gofs_on gofs_off
		read -r on _ _ < <(stat gofs_on)
		read -r off _ _ < <(stat gofs_off)
		awk -v a="$on" -v b="$off" 'BEGIN { printf "go build ./..., file observer on/off = %.3fx (%.1f / %.1f ms; target <= 1.05)\n", a / b, a / 1000, b / 1000 }'
	fi
fi

# --- Workspace size: the check after each command of what it left in
# the writable roots (planted repositories) must not grow with the tree.
# `agentbox run -- true` through the warm helper (one per size) and a
# library session's command, in workspaces of 1,000, 10,000 and 100,000
# directories, with and without allow_git_writes, alternating in one
# loop, and as a lone run (AGENTBOX_RESIDENT=0: every check walks the
# tree, seconds at the largest size, evicting the others' caches) in a
# loop of its own; the ratios
# are to the smallest size's (target <= 1.2x). A session watches every
# directory of its roots (inotify, one watch each): the helper and the
# library sessions of all sizes need three times their directories, more
# than the default fs.inotify.max_user_watches of a small machine, so as
# root the limit is raised for the section (a watcher that does not fit
# walks instead, which the ratios then show).
#   AGENTBOX_BENCH_TREES="1000 10000 100000"   sizes ("" skips the section)
trees=${AGENTBOX_BENCH_TREES-1000 10000 100000}
if [ -n "$trees" ]; then
	printf '[sandbox_workspace_write]\nallow_git_writes = true\n' >"$work/gw.toml"
	watches=/proc/sys/fs/inotify/max_user_watches
	old_watches=$(cat "$watches")
	if [ "$(id -u)" -eq 0 ] && [ "$old_watches" -lt 1048576 ]; then
		echo 1048576 >"$watches"
		trap 'echo "$old_watches" >"$watches"; stop_helper; stop_helper "$work/state-base"; for n in $trees; do stop_helper "$work/state-tree-$n"; done; rm -rf "$work"' EXIT
	fi
	first=${trees%% *}
	declare -A tree_med
	tree_tools=()
	tree_lone_tools=()
	fd=20
	for n in $trees; do
		tws="$work/tree-$n"
		mkdir -p "$tws" "$work/state-tree-$n"
		(cd "$tws" && git init -q . 2>/dev/null || mkdir -p .git)
		# n directories, 10 per parent, 2 files in each.
		python3 - "$tws" "$n" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
dirs = [root]
made = 0
i = 0
while made < n:
    parent = dirs[i]; i += 1
    for k in range(10):
        if made >= n:
            break
        d = os.path.join(parent, "d%d" % k)
        os.mkdir(d)
        for f in ("a.go", "b.txt"):
            open(os.path.join(d, f), "w").close()
        dirs.append(d)
        made += 1
PY
		for gw in off on; do
			cfg=()
			[ "$gw" = on ] && cfg=(--config "$work/gw.toml")
			# A helper per size: one holds at most four prepared
			# sandboxes, and six policies in turn would evict each
			# other's (and their watchers) on every round.
			eval "tree_run_${n}_$gw() { XDG_STATE_HOME=\"\$work/state-tree-$n\" \"\$work/agentbox\" run -C \"$tws\" ${cfg[*]} -- true </dev/null 2>/dev/null; }"
			eval "tree_lone_${n}_$gw() { AGENTBOX_RESIDENT=0 \"\$work/agentbox\" run -C \"$tws\" ${cfg[*]} -- true </dev/null 2>/dev/null; }"
			mkfifo "$work/t$n$gw.in" "$work/t$n$gw.out"
			genv=()
			[ "$gw" = on ] && genv=(BENCHSESSION_CONFIG="$work/gw.toml")
			env "${genv[@]}" "$work/benchsession" "$tws" <"$work/t$n$gw.in" >"$work/t$n$gw.out" 2>"$work/t$n$gw.err" &
			eval "exec $fd>\"$work/t$n$gw.in\" $((fd + 1))<\"$work/t$n$gw.out\""
			eval "tree_ses_${n}_$gw() { echo >&$fd && read -r _ <&$((fd + 1)); }"
			fd=$((fd + 2))
			tree_tools+=("tree_run_${n}_$gw" "tree_ses_${n}_$gw")
			tree_lone_tools+=("tree_lone_${n}_$gw")
		done
	done
	for t in "${tree_tools[@]}" "${tree_lone_tools[@]}"; do
		# The first runs of a tree start its sandbox and watcher.
		for _ in 1 2 3; do "$t" >/dev/null || true; done
		times[$t]=""
	done
	# Lone runs walk the whole tree (seconds at 100,000 directories,
	# evicting the other tools' caches): a loop of their own.
	echo "running $rounds rounds of: ${tree_tools[*]}" >&2
	measure "$rounds" "${tree_tools[@]}"
	echo "running $rounds rounds of: ${tree_lone_tools[*]}" >&2
	measure "$rounds" "${tree_lone_tools[@]}"
	tree_tools+=("${tree_lone_tools[@]}")
	for t in "${tree_tools[@]}"; do
		read -r m _ _ < <(stat "$t")
		tree_med[$t]=$m
	done
	for ((f = 20; f < fd; f += 2)); do eval "exec $f>&-"; done
	for n in $trees; do stop_helper "$work/state-tree-$n"; done
	wait
	[ "$(id -u)" -eq 0 ] && echo "$old_watches" >"$watches"
	printf '%-22s %10s %10s\n' "workspace" "median ms" "vs $first"
	for t in "${tree_tools[@]}"; do
		base=${t/_[0-9]*_/_${first}_}
		awk -v t="$t" -v m="${tree_med[$t]}" -v b="${tree_med[$base]}" 'BEGIN { printf "%-22s %10.2f %9.2fx\n", t, m / 1000, m / b }'
	done
fi

# --- A session's command with a network allow-list (two proxy listeners
# made in the session's namespace, handed over and served for each command)
# against one without, alternating in one loop; in-process times from
# scripts/benchsession.
mkfifo "$work/sa.in" "$work/sa.out" "$work/sn.in" "$work/sn.out"
"$work/benchsession" "$ws" <"$work/sn.in" >"$work/sn.out" 2>"$work/sn.err" &
exec 11>"$work/sn.in" 12<"$work/sn.out"
BENCHSESSION_ALLOW=bench.test "$work/benchsession" "$ws" <"$work/sa.in" >"$work/sa.out" 2>"$work/sa.err" &
exec 13>"$work/sa.in" 14<"$work/sa.out"
echo "running $rounds rounds of: a session command with and without an allow-list" >&2
for ((i = 0; i < rounds; i++)); do
	echo >&11 && read -r _ <&12
	echo >&13 && read -r _ <&14
done
exec 11>&- 13>&-
wait
sn_in=$(in_proc "$work/sn.err")
sa_in=$(in_proc "$work/sa.err")
awk -v n="${sn_in:-0}" -v a="${sa_in:-0}" -v w="${med[bwrap_ses]}" 'BEGIN {
	if (n == 0 || a == 0) { print "session with an allow-list: a probe failed"; exit }
	printf "session command with an allow-list: %.2f ms in-process, %.2fx one without (%.2f ms), %.2fx bwrap\n", a / 1000, a / n, n / 1000, a / w
}'

# --- Network: allow-listed egress through agentbox's proxy against a direct
# connection with --network, in one alternating loop. Each round runs one
# sandbox per way that downloads 100 MiB from a local server and then makes
# 20 small requests, each on a new connection ("Connection: close"); curl
# measures inside the sandbox, so sandbox start-up is not counted.
#   direct   --network, straight to 127.0.0.1
#   proxy    --allow-domain bench.test, plain http:// through the HTTP proxy
#   connect  the same, tunnelled with CONNECT (what https:// uses)
#   transparent  the same name with every proxy variable ignored
#            (--noproxy '*'): resolved by the sandbox's name server to a
#            fake address, the connection redirected and carried
if ! command -v curl >/dev/null 2>&1 || ! command -v python3 >/dev/null 2>&1; then
	echo "network benchmark skipped: it needs curl and python3" >&2
	exit 0
fi
net_rounds=${AGENTBOX_BENCH_NET_ROUNDS:-5}
if [ "$net_rounds" -le 0 ]; then
	echo "network benchmark skipped: AGENTBOX_BENCH_NET_ROUNDS=$net_rounds" >&2
	exit 0
fi
srv="$work/srv"
mkdir -p "$srv"
head -c $((100 << 20)) /dev/zero >"$srv/big"
echo x >"$srv/small"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
(cd "$srv" && exec python3 -m http.server --bind 127.0.0.1 "$port" >/dev/null 2>&1) &
srvpid=$!
trap 'kill "$srvpid" 2>/dev/null; stop_helper; rm -rf "$work"' EXIT
for _ in $(seq 50); do curl -fs -o /dev/null "http://127.0.0.1:$port/small" && break; sleep 0.1; done
# bench.test resolves to the local server for agentbox's proxy only.
echo "127.0.0.1 bench.test" >"$work/hosts"
printf '[network]\nallow_local_binding = true\n' >"$work/net.toml"
probe='
big=$1; small=$2; shift 2
curl -fsS "$@" -o /dev/null -w "speed %{speed_download}\n" "$big"
args=()
for i in $(seq 20); do args+=(-o /dev/null "$small"); done
curl -fsS "$@" -H "Connection: close" -w "conn %{time_total}\n" "${args[@]}"'
net_direct() {
	"$work/agentbox" run -C "$ws" --network -- bash -c "$probe" _ "http://127.0.0.1:$port/big" "http://127.0.0.1:$port/small" --noproxy '*'
}
net_proxy() {
	AGENTBOX_TEST_HOSTS="$work/hosts" "$work/agentbox" run -C "$ws" --config "$work/net.toml" --allow-domain bench.test \
		-- bash -c "$probe" _ "http://bench.test:$port/big" "http://bench.test:$port/small"
}
net_connect() {
	AGENTBOX_TEST_HOSTS="$work/hosts" "$work/agentbox" run -C "$ws" --config "$work/net.toml" --allow-domain bench.test \
		-- bash -c "$probe" _ "http://bench.test:$port/big" "http://bench.test:$port/small" -p
}
net_transparent() {
	AGENTBOX_TEST_HOSTS="$work/hosts" "$work/agentbox" run -C "$ws" --config "$work/net.toml" --allow-domain bench.test \
		-- bash -c "$probe" _ "http://bench.test:$port/big" "http://bench.test:$port/small" --noproxy '*'
}
ways=(net_direct net_proxy net_connect net_transparent)
declare -A speeds conns
for w in "${ways[@]}"; do
	"$w" >/dev/null # warm up, and fail early if a way does not work
done
echo "running $net_rounds network rounds of: ${ways[*]}" >&2
for ((i = 0; i < net_rounds; i++)); do
	for w in "${ways[@]}"; do
		out=$("$w")
		speeds[$w]+="$(awk '$1 == "speed" { print $2 }' <<<"$out") "
		conns[$w]+="$(awk '$1 == "conn" { printf "%s ", $2 }' <<<"$out")"
	done
done
# median of a list of numbers
median() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
declare -A mspeed mconn
printf '%-12s %12s %16s\n' way "MiB/s" "ms per conn"
for w in "${ways[@]}"; do
	mspeed[$w]=$(median "${speeds[$w]}")
	mconn[$w]=$(median "${conns[$w]}")
	awk -v w="$w" -v s="${mspeed[$w]}" -v c="${mconn[$w]}" 'BEGIN { printf "%-12s %12.1f %16.3f\n", w, s / 1048576, c * 1000 }'
done
for w in net_proxy net_connect net_transparent; do
	awk -v w="$w" -v s="${mspeed[$w]}" -v ds="${mspeed[net_direct]}" -v c="${mconn[$w]}" -v dc="${mconn[net_direct]}" 'BEGIN {
		printf "%s/direct: throughput %.2fx, latency per connection %.2fx (+%.3f ms)\n", w, s / ds, c / dc, (c - dc) * 1000
	}'
done
echo "network rounds=$net_rounds (100 MiB download + 20 connections per round and way)"
