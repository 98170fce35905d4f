#!/usr/bin/env bash
# tests/bench/memcache.sh - `make bench`, memcache side: tubed's kestrel
# listener (--memcache-port) side by side with Debian's memcached, once with
# one worker thread (-t 1, like tubed's single loop) and once with its
# default (4 threads), driven by tubed-bench --protocol memcache.
#
# Every measurement gets a freshly started server on free 127.0.0.1 ports.
# Within each round the servers take turns, and the order turns by one each
# round (A/B/C, B/C/A, ...), so that drift in the machine's speed hits all of
# them alike; the table shows the median of the rounds and the ratios
# tubed/memcached -t 1 and tubed/memcached (default threads).
#
# What the servers do differs by design: a set on tubed adds an item to a
# queue and a get takes one off (a dequeue, journaled with -b); memcached
# overwrites a key and a get reads it.  So tubed's get workloads drain a
# prefilled queue (tubed-bench checks that no get comes back empty), and
# memcached's read the keys set once (tubed-bench --memcached).  memcached
# has no get <queue>/open: the open/close rows are n/a for it.
#
# Environment (ROUNDS and QUICK as for run.sh; the rest has names of its
# own, so that `make bench` can pass run.sh's SERVERS, WORKLOADS and OUT):
#   ROUNDS=3                         rounds per workload
#   QUICK=1                          tiny sizes: a smoke test (about 25 s)
#   MC_OUT=build/bench-memcache.md   where the markdown table goes
#   MC_SERVERS="tubed memcached1 memcached4"   run only some of them; also
#                                    tubed-b (-b DIR: binlog, default fsync)
#                                    and tubed-f0 (-b DIR -f 0: fsync
#                                    before every reply)
#   MC_WORKLOADS="set100p get100p"   run only some workloads (ids below)
#   TUBED=build/tubed MEMCACHED=/usr/bin/memcached BENCH=build/tubed-bench
#
# Every server is stopped by its pid on exit, Ctrl-C included.
#
# On a machine busy with other sessions, the kernel's autogroup scheduling
# gives each session an equal share whatever its nice value; a session of
# its own with more weight keeps the others out of the figures:
#   setsid bash -c 'echo -20 > /proc/self/autogroup; exec bash tests/bench/memcache.sh'

set -euo pipefail

ROUNDS=${ROUNDS:-3}
QUICK=${QUICK:-0}
BUILD=${BUILD:-build}
OUT=${MC_OUT:-$BUILD/bench-memcache.md}
TUBED=${TUBED:-$BUILD/tubed}
MEMCACHED=${MEMCACHED:-/usr/bin/memcached}
BENCH=${BENCH:-$BUILD/tubed-bench}
FRESHMEM=$BUILD/bench-freshmem
FRESH=""
SERVERS=${MC_SERVERS:-tubed memcached1 memcached4}

BENCH_NAME=bench-memcache
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/bench/lib.sh
source "$HERE/lib.sh"

# ---------------------------------------------------------------- servers

SERVER=""     # the server under test: tubed, tubed-b, tubed-f0, memcached1, memcached4
SERVER_PID="" # its pid, while it runs
PORT=""       # its memcache port
RUN_DIR=""    # scratch directory of this whole run

cleanup() {
	stop_server
	[[ -n $RUN_DIR ]] && rm -rf "$RUN_DIR"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

is_tubed() { [[ $1 == tubed* ]]; }


# memcached refuses to run as root without -u.
MC_USER=()
if [[ $(id -u) == 0 ]]; then
	if id memcache >/dev/null 2>&1; then MC_USER=(-u memcache); else MC_USER=(-u nobody); fi
fi

# server_argv NAME DIR: the command line of NAME, listening on $PORT (and,
# for tubed, its beanstalk listener on $BS_PORT).
server_argv() {
	case $1 in
	tubed) ARGV=("$TUBED" -l 127.0.0.1 -p "$BS_PORT" --memcache-port "$PORT") ;;
	tubed-b) ARGV=("$TUBED" -l 127.0.0.1 -p "$BS_PORT" --memcache-port "$PORT" -b "$2") ;;
	tubed-f0) ARGV=("$TUBED" -l 127.0.0.1 -p "$BS_PORT" --memcache-port "$PORT" -b "$2" -f 0) ;;
	memcached1) ARGV=("$MEMCACHED" "${MC_USER[@]}" -l 127.0.0.1 -p "$PORT" -U 0 -m 1024 -t 1) ;;
	memcached4) ARGV=("$MEMCACHED" "${MC_USER[@]}" -l 127.0.0.1 -p "$PORT" -U 0 -m 1024) ;;
	*) die "unknown server '$1'" ;;
	esac
}

# start_server NAME: start NAME on free ports and wait until its memcache
# port accepts connections; a server that dies at once (a port taken after
# all) is retried on other ports.
start_server() {
	local name=$1 dir
	dir=$(mktemp -d "$RUN_DIR/$name.XXXXXX")
	for _ in $(seq 10); do
		PORT=$(pick_port)
		BS_PORT=$(pick_port)
		[[ $PORT != "$BS_PORT" ]] || continue
		server_argv "$name" "$dir"
		SERVER=$name
		launch "$RUN_DIR/server.log" "${ARGV[@]}" && return 0
	done
	die "cannot start $name (${ARGV[*]}): $(tail -3 "$RUN_DIR/server.log")"
}


# ---------------------------------------------------------------- helpers


# bench FIELD ARGS...: run tubed-bench against the server under test and
# print FIELD of its CSV line.  Fails (with tubed-bench's message) on any
# error, a single unexpected reply included.
bench() {
	local field=$1 out
	shift
	if ! out=$("$BENCH" -q --csv --label "$SERVER" --protocol memcache -p "$PORT" "$@" \
		2>"$RUN_DIR/bench.err"); then
		sed 's/^/    /' "$RUN_DIR/bench.err" | head -8 >&2
		return 1
	fi
	csv_field "$field" "$out"
}

# ---------------------------------------------------------------- workloads
#
# A workload function runs against $SERVER on $PORT and prints one number,
# or nothing when the workload means nothing for that server.
#   workload ID FUNCTION "Title" "unit"

WL_IDS=()
declare -A WL_FUNC WL_TITLE WL_UNIT

workload() {
	WL_IDS+=("$1")
	WL_FUNC[$1]=$2
	WL_TITLE[$1]=$3
	WL_UNIT[$1]=$4
}

QUEUES=8 # queues (keys) every workload spreads over but the floor's
PIPE=(-c 4 -P 100)
NOPIPE=(-c 50 -P 1)

# mc_set ARGS...: sets per second.
mc_set() { bench ops_per_sec -w mc-set -t "$QUEUES" "$@"; }

# mc_get N ARGS...: items per second over N gets; tubed drains N items set
# first, memcached reads the keys set once.
mc_get() {
	local n=$1
	shift
	if is_tubed "$SERVER"; then
		bench ops_per_sec -w mc-get -t "$QUEUES" --prefill "$n" -n "$n" "$@"
	else
		bench ops_per_sec -w mc-get -t "$QUEUES" --memcached -n "$n" "$@"
	fi
}

# mc_open_close N ARGS...: reliable reads, tubed only.
mc_open_close() {
	is_tubed "$SERVER" || return 0
	bench ops_per_sec -w mc-open-close -t "$QUEUES" --prefill "$1" -n "$1" "${@:2}"
}

NP100=$(pick 1000000 20000) NP1K=$(pick 500000 10000) N1=$(pick 200000 5000)

wl_set100p() { mc_set "${PIPE[@]}" -s 100 -n "$NP100"; }
workload set100p wl_set100p "set, 4 connections x pipeline 100, 100 B" "sets/s"
wl_set1kp() { mc_set "${PIPE[@]}" -s 1024 -n "$NP1K"; }
workload set1kp wl_set1kp "set, 4 connections x pipeline 100, 1 KiB" "sets/s"
wl_get100p() { mc_get "$NP100" "${PIPE[@]}" -s 100; }
workload get100p wl_get100p "get, 4 connections x pipeline 100, 100 B" "items/s"
wl_get1kp() { mc_get "$NP1K" "${PIPE[@]}" -s 1024; }
workload get1kp wl_get1kp "get, 4 connections x pipeline 100, 1 KiB" "items/s"
wl_set100() { mc_set "${NOPIPE[@]}" -s 100 -n "$N1"; }
workload set100 wl_set100 "set, 50 connections, no pipelining, 100 B" "sets/s"
wl_set1k() { mc_set "${NOPIPE[@]}" -s 1024 -n "$N1"; }
workload set1k wl_set1k "set, 50 connections, no pipelining, 1 KiB" "sets/s"
wl_get100() { mc_get "$N1" "${NOPIPE[@]}" -s 100; }
workload get100 wl_get100 "get, 50 connections, no pipelining, 100 B" "items/s"
wl_get1k() { mc_get "$N1" "${NOPIPE[@]}" -s 1024; }
workload get1k wl_get1k "get, 50 connections, no pipelining, 1 KiB" "items/s"
wl_oc100p() { mc_open_close "$NP100" "${PIPE[@]}" -s 100; }
workload oc100p wl_oc100p "get/open + get/close, 4 connections x pipeline 100, 100 B" "items/s"
wl_oc100() { mc_open_close "$N1" "${NOPIPE[@]}" -s 100; }
workload oc100 wl_oc100 "get/open + get/close, 50 connections, no pipelining, 100 B" "items/s"

# kestrel's published figure: 100,000 sets of 1 KiB from 100 clients, one
# queue, in 6.1 s.  The figure is the time (lower is better).
FLOOR_N=$(pick 100000 5000)
wl_floor() { bench seconds -w mc-set -c 100 -P 1 -s 1024 -t 1 -n "$FLOOR_N"; }
workload floor wl_floor "kestrel's floor: $(pick 100,000 5,000) sets of 1 KiB from 100 clients, 1 queue (lower is better; kestrel: 6.1 s for 100,000)" "s"

# ---------------------------------------------------------------- running

declare -A VALUES # "$id/$server" -> space-separated values, one per round
FAILED=0

check_tools() {
	local s
	for s in $SERVERS; do
		[[ $s =~ ^(tubed|tubed-b|tubed-f0|memcached1|memcached4)$ ]] ||
			die "unknown server '$s' in MC_SERVERS (tubed tubed-b tubed-f0 memcached1 memcached4)"
	done
	if [[ $SERVERS == *memcached* && ! -x $MEMCACHED ]]; then
		die "memcached not found at $MEMCACHED. Install it with:
    apt-get install memcached
(or set MEMCACHED=/path/to/memcached, or leave it out of MC_SERVERS)"
	fi
	if [[ $SERVERS == *tubed* && ! -x $TUBED ]]; then
		die "$TUBED not found: run 'make' first (or set TUBED=)"
	fi
	[[ -x $BENCH ]] || die "$BENCH not found: run 'make' first (or set BENCH=)"
	build_c "$HERE/freshmem.c" "$FRESHMEM"
}

# What fresh memory costs on this machine (tests/bench/freshmem.c says
# why): sets FRESH to a sentence for the table's header.
probe_fresh_memory() {
	local out first pop re
	out=$("$FRESHMEM") || die "$FRESHMEM failed"
	first=$(awk '$1 == "first-write" { print $2 }' <<<"$out")
	pop=$(awk '$1 == "populated" { print $2 }' <<<"$out")
	re=$(awk '$1 == "rewrite" { print $2 }' <<<"$out")
	FRESH="This machine writes fresh memory at $first MB/s ($pop MB/s populated 64 KiB at a time, as tubed's slab does)"
	FRESH+=" and memory written before at $re MB/s (\`tests/bench/freshmem.c\`)."
	FRESH+=" A queue keeps every item, so each 1 KiB set is about 1.1 KB of fresh memory:"
	FRESH+=" fresh memory alone caps tubed's 1 KiB sets near $(( pop * 1000 / 1100 ))k/s here;"
	FRESH+=" memcached overwrites its keys' memory."
}

RESULT=""
run_one() {
	start_server "$2"
	if "${WL_FUNC[$1]}" >"$RUN_DIR/value"; then
		local value
		value=$(<"$RUN_DIR/value")
		RESULT=${value:-n/a}
	else
		RESULT=FAIL
	fi
	stop_server
}

# run_workload ID: ROUNDS rounds, every server once per round, the order
# turned by one each round.
run_workload() {
	local id=$1 round s i
	local -a order
	read -r -a order <<<"$SERVERS"
	log "${WL_TITLE[$id]}"
	for round in $(seq "$ROUNDS"); do
		local line="  round $round:"
		for i in "${!order[@]}"; do
			s=${order[(i + round - 1) % ${#order[@]}]}
			run_one "$id" "$s"
			[[ $RESULT == FAIL ]] && FAILED=1
			VALUES[$id/$s]+="$RESULT "
			line+=" $s $RESULT"
		done
		log "$line"
	done
}


# Whole numbers for rates, two decimals for seconds; words as they are.
fmt() {
	awk -v v="$1" -v u="$2" 'BEGIN {
		if (v + 0 != v) print v; else if (u == "s") printf "%.2f", v; else printf "%.0f", v }'
}

server_title() {
	case $1 in
	tubed) echo "tubed" ;;
	tubed-b) echo "tubed -b" ;;
	tubed-f0) echo "tubed -b -f 0" ;;
	memcached1) echo "memcached -t 1" ;;
	memcached4) echo "memcached (4 threads)" ;;
	esac
}

server_version() {
	if is_tubed "$1"; then
		echo "$(timeout 2 "$TUBED" -v 2>&1 | head -1 || true) (binary built $TUBED_BUILT)"
	else
		timeout 2 "$MEMCACHED" -V 2>&1 | head -1 || true
	fi
}

has() { [[ " $SERVERS " == *" $1 "* ]]; }

table_head() {
	local s head="| workload | unit |" rule="|---|---|"
	for s in $SERVERS; do head+=" $(server_title "$s") |"; rule+="---:|"; done
	if has tubed; then
		has memcached1 && { head+=" tubed / memcached -t 1 |"; rule+="---:|"; }
		has memcached4 && { head+=" tubed / memcached (4 threads) |"; rule+="---:|"; }
	fi
	echo "$head"
	echo "$rule"
}

table_row() {
	local id=$1 s m row="| ${WL_TITLE[$1]} | ${WL_UNIT[$1]} |"
	local -A med
	for s in $SERVERS; do
		# shellcheck disable=SC2086
		m=$(median ${VALUES[$id/$s]})
		med[$s]=$m
		row+=" $(fmt "$m" "${WL_UNIT[$id]}") |"
	done
	if has tubed; then
		has memcached1 && row+=" $(ratio "${med[tubed]}" "${med[memcached1]}") |"
		has memcached4 && row+=" $(ratio "${med[tubed]}" "${med[memcached4]}") |"
	fi
	echo "$row"
}

write_results() {
	local id s
	mkdir -p "$(dirname "$OUT")"
	{
		echo "# tubed's memcache listener against memcached"
		echo
		echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(uname -srm);" \
			"$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) CPUs;" \
			"load average $LOAD_START at the start, $LOAD_END at the end."
		for s in $SERVERS; do echo "- $(server_title "$s"): $(server_version "$s")"; done
		echo
		echo "$FRESH"
		echo
		echo "Median of $ROUNDS rounds$([[ $QUICK == 1 ]] && echo ' (QUICK sizes: a smoke test, not a measurement)')." \
			"Each run on a freshly started server; servers take turns within each round." \
			"Items spread over $QUEUES queues (keys) but in the last row." \
			"tubed's gets drain a prefilled queue; memcached's read keys set once."
		echo
		table_head
		for id in "${WL_IDS[@]}"; do
			if [[ -n ${VALUES[$id/${SERVERS%% *}]:-} ]]; then table_row "$id"; fi
		done
		echo
		echo "<details><summary>Every run</summary>"
		echo
		for id in "${WL_IDS[@]}"; do
			[[ -n ${VALUES[$id/${SERVERS%% *}]:-} ]] || continue
			for s in $SERVERS; do echo "- ${WL_TITLE[$id]}, $s: ${VALUES[$id/$s]}"; done
		done
		echo
		echo "</details>"
	} >"$OUT"
}

main() {
	[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive number"
	check_tools
	probe_fresh_memory
	run_all tubed-bench-mc "${MC_WORKLOADS:-${WL_IDS[*]}}"
}

main "$@"
