#!/usr/bin/env bash
# tests/bench/run.sh - `make bench`: tubed side by side with beanstalkd, and
# with a do-nothing responder that shows the machine's ceiling for the same
# request pattern.
#
# Every measurement gets a freshly started server (no jobs or tubes left over
# from an earlier run), on a free 127.0.0.1 port, started with the same flags
# for all three.  Within each round the servers take turns (A/B/C, A/B/C, ...)
# so that drift in the machine's speed hits all of them alike; the table shows
# the median of the rounds and the ratios tubed/beanstalkd and tubed/ceiling.
#
# Environment:
#   ROUNDS=3                    rounds per workload
#   QUICK=1                     tiny sizes: a smoke test in well under a minute
#   OUT=build/bench-results.md  where the markdown table goes
#   SERVERS="tubed beanstalkd responder"   run only some of them
#   WORKLOADS="put1 put50 drain steady watch1000"   run only some workloads
#   TUBED=build/tubed BEANSTALKD=/usr/bin/beanstalkd BENCH=build/tubed-bench
#   CC=cc                       compiler for the responder
#
# Adding a workload: write one function that prints a single number for the
# server under test (see "Workloads" below) and register it with `workload`.

set -euo pipefail

ROUNDS=${ROUNDS:-3}
QUICK=${QUICK:-0}
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/bench-results.md}
TUBED=${TUBED:-$BUILD/tubed}
BEANSTALKD=${BEANSTALKD:-/usr/bin/beanstalkd}
BENCH=${BENCH:-$BUILD/tubed-bench}
RESPONDER=$BUILD/bench-responder
SERVERS=${SERVERS:-tubed beanstalkd responder}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { echo "bench: $*" >&2; exit 1; }
log() { echo "bench: $*" >&2; }

# ---------------------------------------------------------------- servers

SERVER=""      # name of the server under test: tubed, beanstalkd, responder
SERVER_PID=""  # its pid, while it runs
PORT=""        # its port
RUN_DIR=""     # scratch directory of this whole bench run

cleanup() {
	stop_server
	[[ -n $RUN_DIR ]] && rm -rf "$RUN_DIR"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

server_binary() {
	case $1 in
	tubed) echo "$TUBED" ;;
	beanstalkd) echo "$BEANSTALKD" ;;
	responder) echo "$RESPONDER" ;;
	*) die "unknown server '$1'" ;;
	esac
}

# True when something accepts connections on 127.0.0.1:$1 (bash's /dev/tcp,
# so a fresh machine needs no extra tool).
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pick_port() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 40000))
		port_open "$p" || { echo "$p"; return 0; }
	done
	die "found no free port"
}

# start_server NAME [FLAGS...]: start NAME on a free port and wait until it
# accepts connections.  A server that dies at once (port taken after all) is
# retried on another port.  "@DIR@" in FLAGS becomes a fresh empty directory.
start_server() {
	local name=$1 bin dir
	shift
	bin=$(server_binary "$name")
	dir=$(mktemp -d "$RUN_DIR/$name.XXXXXX")
	local flags=("${@//@DIR@/$dir}")
	for _ in 1 2 3 4 5; do
		PORT=$(pick_port)
		"$bin" -l 127.0.0.1 -p "$PORT" "${flags[@]}" >"$RUN_DIR/server.log" 2>&1 &
		SERVER_PID=$!
		SERVER=$name
		for _ in $(seq 200); do
			kill -0 "$SERVER_PID" 2>/dev/null || break
			if port_open "$PORT"; then return 0; fi
			sleep 0.025
		done
		stop_server
	done
	die "cannot start $name ($bin -l 127.0.0.1 -p PORT ${flags[*]}): $(tail -3 "$RUN_DIR/server.log")"
}

# Stop the server by its pid: TERM, then KILL if it lingers.
stop_server() {
	[[ -n $SERVER_PID ]] || return 0
	kill "$SERVER_PID" 2>/dev/null || true
	for _ in $(seq 100); do
		kill -0 "$SERVER_PID" 2>/dev/null || break
		sleep 0.02
	done
	kill -KILL "$SERVER_PID" 2>/dev/null || true
	wait "$SERVER_PID" 2>/dev/null || true
	SERVER_PID=""
}

# Resident memory of a process in KiB, e.g. to work out memory per job:
#   before=$(rss_kb "$SERVER_PID"); ...put N jobs...; after=$(rss_kb "$SERVER_PID")
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# ---------------------------------------------------------------- helpers

# pick FULL QUICK: the size for this mode.
pick() { if [[ $QUICK == 1 ]]; then echo "$2"; else echo "$1"; fi; }

# csv_field NAME CSV: the value of column NAME in tubed-bench --csv output.
csv_field() {
	awk -F, -v k="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == k) c = i }
		NR == 2 && c { print $c }' <<<"$2"
}

# bench_ops ARGS...: run tubed-bench against the server under test and print
# its ops/s.  Fails (with tubed-bench's message on stderr) on any error,
# including a single unexpected reply.
bench_ops() {
	local out
	if ! out=$("$BENCH" -q --csv --label "$SERVER" -p "$PORT" "$@" 2>"$RUN_DIR/bench.err"); then
		sed 's/^/    /' "$RUN_DIR/bench.err" | head -8 >&2
		return 1
	fi
	csv_field ops_per_sec "$out"
}

# ---------------------------------------------------------------- workloads
#
# A workload function runs against the server named $SERVER (pid
# $SERVER_PID, port $PORT) and prints one number, or nothing when the
# measure means nothing for that server (e.g. memory of the responder).
# Register it with:
#   workload ID FUNCTION "Title" "unit" [SERVER FLAGS...]

WL_IDS=()
declare -A WL_FUNC WL_TITLE WL_UNIT WL_FLAGS

workload() {
	local id=$1
	WL_IDS+=("$id")
	WL_FUNC[$id]=$2
	WL_TITLE[$id]=$3
	WL_UNIT[$id]=$4
	shift 4
	WL_FLAGS[$id]="$*"
}

wl_put1() { bench_ops -w put -c 1 -P 1 -s 100 -n "$(pick 50000 2000)"; }
workload put1 wl_put1 "1. put, 1 connection, no pipelining, 100-byte bodies" "ops/s"

wl_put50() { bench_ops -w put -c 50 -P 16 -s 100 -n "$(pick 500000 20000)"; }
workload put50 wl_put50 "2. put, 50 connections, pipeline depth 16" "ops/s"

wl_drain() { bench_ops -w reserve-delete -c 50 -P 1 -s 100 --prefill "$(pick 500000 10000)"; }
workload drain wl_drain "3. drain $(pick 500,000 10,000) jobs, reserve+delete over 50 connections" "jobs/s"

wl_steady() { bench_ops -w produce-consume --producers 20 --workers 20 -s 100 -d "$(pick 5 0.5)"; }
workload steady wl_steady "4. steady state, 20 producers + 20 workers" "jobs/s"

wl_watch1000() { bench_ops --watch 1000 -c 1 -P 1 -s 100 -n "$(pick 10000 300)"; }
workload watch1000 wl_watch1000 "9. worker watching 1,000 tubes: put+reserve+delete" "round trips/s"

# Templates for the workloads still to come (not registered yet):
#
# wl_memjob() {  # memory per job: the server's RSS growth over N puts
# 	[[ $SERVER == responder ]] && return 0 # stores nothing: prints n/a
# 	local n before after
# 	n=$(pick 1000000 20000)
# 	before=$(rss_kb "$SERVER_PID")
# 	bench_ops -w put -c 10 -P 16 -s 100 -n "$n" >/dev/null || return 1
# 	after=$(rss_kb "$SERVER_PID")
# 	echo $(((after - before) * 1024 / n))
# }
# workload memjob wl_memjob "5. memory per 100-byte job" "bytes/job"
#
# Server flags follow the unit; @DIR@ becomes a fresh empty directory:
# workload binlog wl_put50 "6. put, 50 connections, binlog" "ops/s" -b @DIR@

# ---------------------------------------------------------------- running

declare -A VALUES # "$id/$server" -> space-separated values, one per round
FAILED=0

check_tools() {
	local s
	for s in $SERVERS; do
		[[ $s =~ ^(tubed|beanstalkd|responder)$ ]] ||
			die "unknown server '$s' in SERVERS (tubed, beanstalkd, responder)"
	done
	if [[ " $SERVERS " == *" beanstalkd "* && ! -x $BEANSTALKD ]]; then
		die "beanstalkd not found at $BEANSTALKD. Install it with:
    apt-get install beanstalkd
(or set BEANSTALKD=/path/to/beanstalkd, or leave it out of SERVERS)"
	fi
	if [[ " $SERVERS " == *" tubed "* && ! -x $TUBED ]]; then
		die "$TUBED not found: run 'make' first (or set TUBED=)"
	fi
	[[ -x $BENCH ]] || die "$BENCH not found: run 'make' first (or set BENCH=)"
	if [[ " $SERVERS " == *" responder "* ]] &&
		[[ ! -x $RESPONDER || $HERE/responder.c -nt $RESPONDER ]]; then
		mkdir -p "$(dirname "$RESPONDER")"
		"${CC:-cc}" -O2 -o "$RESPONDER" "$HERE/responder.c" || die "cannot build the responder"
	fi
}

# run_one ID SERVER: one measurement on a fresh server; sets RESULT to the
# value, n/a or FAIL.  Not run in a subshell, so that the EXIT trap always
# knows the pid of the server to stop.
RESULT=""
run_one() {
	local id=$1 value
	# shellcheck disable=SC2086 # the flags are words by design
	start_server "$2" ${WL_FLAGS[$id]}
	if value=$("${WL_FUNC[$id]}"); then
		RESULT=${value:-n/a}
	else
		RESULT=FAIL
	fi
	stop_server
}

run_workload() {
	local id=$1 round s v
	log "${WL_TITLE[$id]}"
	for round in $(seq "$ROUNDS"); do
		local line="  round $round:"
		for s in $SERVERS; do
			run_one "$id" "$s"
			[[ $RESULT == FAIL ]] && FAILED=1
			VALUES[$id/$s]+="$RESULT "
			line+=" $s $RESULT"
		done
		log "$line"
	done
}

# median VALUES...: FAIL if any run failed, n/a if none applies.
median() {
	local v
	for v in "$@"; do [[ $v == FAIL ]] && { echo FAIL; return; }; done
	for v in "$@"; do [[ $v == n/a ]] && { echo n/a; return; }; done
	printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 }
		END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a + 0 == a && b + 0 == b && b > 0) printf "%.2f", a / b; else print "-" }'
}

# Round figures to whole numbers for the table; keep words as they are.
fmt() { awk -v v="$1" 'BEGIN { if (v + 0 == v) printf "%.0f", v; else print v }'; }

server_version() {
	local bin
	bin=$(server_binary "$1")
	[[ $1 == responder ]] && { echo "ceiling"; return; }
	timeout 2 "$bin" -v 2>&1 | head -1 || true
}

write_results() {
	local id s m col
	local -A med
	mkdir -p "$(dirname "$OUT")"
	{
		echo "# tubed benchmark"
		echo
		echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(uname -srm);" \
			"$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) CPUs."
		for s in $SERVERS; do echo "- $s: $(server_version "$s")"; done
		echo
		echo "Median of $ROUNDS rounds$([[ $QUICK == 1 ]] && echo ' (QUICK sizes: a smoke test, not a measurement)')." \
			"Each run on a freshly started server; servers alternate within each round." \
			"The ceiling is a responder that answers without doing any work."
		echo
		local head="| workload | unit |" rule="|---|---|"
		for s in $SERVERS; do
			col=$s; [[ $s == responder ]] && col=ceiling
			head+=" $col |"; rule+="---:|"
		done
		if [[ " $SERVERS " == *" tubed "* ]]; then
			[[ " $SERVERS " == *" beanstalkd "* ]] && { head+=" tubed/beanstalkd |"; rule+="---:|"; }
			[[ " $SERVERS " == *" responder "* ]] && { head+=" tubed/ceiling |"; rule+="---:|"; }
		fi
		echo "$head"
		echo "$rule"
		for id in "${WL_IDS[@]}"; do
			[[ -n ${VALUES[$id/${SERVERS%% *}]:-} ]] || continue
			local row="| ${WL_TITLE[$id]} | ${WL_UNIT[$id]} |"
			for s in $SERVERS; do
				# shellcheck disable=SC2086
				m=$(median ${VALUES[$id/$s]})
				med[$s]=$m
				row+=" $(fmt "$m") |"
			done
			if [[ " $SERVERS " == *" tubed "* ]]; then
				[[ " $SERVERS " == *" beanstalkd "* ]] && row+=" $(ratio "${med[tubed]}" "${med[beanstalkd]}") |"
				[[ " $SERVERS " == *" responder "* ]] && row+=" $(ratio "${med[tubed]}" "${med[responder]}") |"
			fi
			echo "$row"
		done
		echo
		echo "<details><summary>Every run</summary>"
		echo
		for id in "${WL_IDS[@]}"; do
			[[ -n ${VALUES[$id/${SERVERS%% *}]:-} ]] || continue
			for s in $SERVERS; do
				echo "- ${WL_TITLE[$id]}, $s: ${VALUES[$id/$s]}"
			done
		done
		echo
		echo "</details>"
	} >"$OUT"
}

main() {
	[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive number"
	check_tools
	RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/tubed-bench.XXXXXX")
	local ids=${WORKLOADS:-${WL_IDS[*]}} id
	for id in $ids; do
		[[ -n ${WL_FUNC[$id]:-} ]] || die "unknown workload '$id' (have: ${WL_IDS[*]})"
	done
	for id in $ids; do run_workload "$id"; done
	write_results
	echo
	cat "$OUT"
	echo
	log "results written to $OUT"
	[[ $FAILED == 0 ]] || die "some runs failed (FAIL above); see the messages before them"
}

main "$@"
