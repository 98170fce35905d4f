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
#   QUICK=1                     tiny sizes: a smoke test in under a minute
#   OUT=build/bench-results.md  where the markdown table goes
#   SERVERS="tubed beanstalkd responder"   run only some of them
#   WORKLOADS="put1 put50"      run only some workloads; all by default:
#                               put1 put50 drain steady binlog strict memjob
#                               replay idlemem put50idle watch1000 watch1
#                               put64k drain64k put1m drain1m steady1m
#   TUBED=build/tubed BEANSTALKD=/usr/bin/beanstalkd BENCH=build/tubed-bench
#   CC=cc                       compiler for the responder
#
# Adding a workload: write one function that prints a single number for the
# server under test (see "Workloads" below) and register it with `workload`.
#
# The open-file limit is raised to the hard limit (for 10,000 idle
# connections; the servers inherit it).  Every server and background client
# is stopped by its pid on exit, Ctrl-C included.

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

BENCH_NAME=bench
# shellcheck source=tests/bench/lib.sh
source "$HERE/lib.sh"

# ---------------------------------------------------------------- servers

SERVER=""      # name of the server under test: tubed, beanstalkd, responder
SERVER_PID=""  # its pid, while it runs
PORT=""        # its port
SERVER_ARGS=() # its flags, with @DIR@ replaced (for a restart on the same DIR)
BG_PID=""      # a tubed-bench running in the background, if any
RUN_DIR=""     # scratch directory of this whole bench run

cleanup() {
	stop_bg
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


# start_server NAME [FLAGS...]: start NAME on a free port and wait until it
# accepts connections.  A server that dies at once (port taken after all) is
# retried on another port.  "@DIR@" in FLAGS becomes a fresh empty directory.
start_server() {
	local name=$1 bin dir
	shift
	bin=$(server_binary "$name")
	dir=$(mktemp -d "$RUN_DIR/$name.XXXXXX")
	local flags=("${@//@DIR@/$dir}")
	SERVER_ARGS=("${flags[@]}")
	for _ in 1 2 3 4 5; do
		PORT=$(pick_port)
		SERVER=$name
		launch "$RUN_DIR/server.log" "$bin" -l 127.0.0.1 -p "$PORT" "${flags[@]}" && return 0
	done
	die "cannot start $name ($bin -l 127.0.0.1 -p PORT ${flags[*]}): $(tail -3 "$RUN_DIR/server.log")"
}


# kill9_restart: kill the server under test with SIGKILL (no clean shutdown)
# and start it again at once with the same flags (so on the same binlog
# directory), on a new port, without waiting for it: the caller times how
# long it takes to become ready.
kill9_restart() {
	kill -KILL "$SERVER_PID" 2>/dev/null || true
	wait "$SERVER_PID" 2>/dev/null || true
	SERVER_PID=""
	PORT=$(pick_port)
	"$(server_binary "$SERVER")" -l 127.0.0.1 -p "$PORT" "${SERVER_ARGS[@]}" \
		>"$RUN_DIR/server.log" 2>&1 &
	SERVER_PID=$!
}

stop_bg() {
	[[ -n $BG_PID ]] || return 0
	kill "$BG_PID" 2>/dev/null || true
	wait "$BG_PID" 2>/dev/null || true
	BG_PID=""
}

# stats_value NAME [READ_TIMEOUT]: NAME's value in the "stats" reply of the
# server under test; fails when it cannot connect or no reply comes within
# READ_TIMEOUT seconds (default 5).  A server that is still starting may
# accept (or queue) the connection and answer only once it is ready, so a
# long timeout waits for readiness without polling.
stats_value() (
	local name=$1 tmo=${2:-5} line
	exec 3<>"/dev/tcp/127.0.0.1/$PORT" || exit 1
	printf 'stats\r\n' >&3
	IFS= read -r -t "$tmo" line <&3 || exit 1
	[[ $line == OK* ]] || exit 1
	while IFS= read -r -t "$tmo" line <&3; do
		line=${line%$'\r'}
		[[ $line == "$name: "* ]] && { echo "${line#*: }"; exit 0; }
	done
	exit 1
) 2>/dev/null

now_s() { date +%s.%N; }

# Resident memory of a process in KiB, e.g. to work out memory per job:
#   before=$(rss_kb "$SERVER_PID"); ...put N jobs...; after=$(rss_kb "$SERVER_PID")
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# ---------------------------------------------------------------- helpers


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

# bench_bg ARGS...: the same, in the background (pid in BG_PID); bench_wait
# waits for it and fails as bench_ops would.
bench_bg() {
	"$BENCH" -q --csv --label "$SERVER" -p "$PORT" "$@" >"$RUN_DIR/bench.out" 2>"$RUN_DIR/bench.err" &
	BG_PID=$!
}
bench_wait() {
	local rc=0
	wait "$BG_PID" || rc=$?
	BG_PID=""
	if [[ $rc != 0 ]]; then
		sed 's/^/    /' "$RUN_DIR/bench.err" | head -8 >&2
		return 1
	fi
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

# 5. The put load of workload 2 with a binlog: fsync at most every 50 ms
# (both servers' default), then an fsync before every reply (-f 0).
# beanstalkd -f 0 manages only a few hundred puts/s with this load, so the
# strict run is bounded by time, not by a count.  The ceiling does not log
# anything, so it applies to neither; it is shown for the default mode only,
# against the target "half the ceiling".
workload binlog wl_put50 "5. put, 50 connections, pipeline depth 16, binlog (-b, default fsync)" "ops/s" -b @DIR@

wl_strict() {
	[[ $SERVER == responder ]] && return 0
	bench_ops -w put -c 50 -P 16 -s 100 -d "$(pick 5 0.5)"
}
workload strict wl_strict "5. the same, strict: fsync before every reply (-b -f 0)" "ops/s" -b @DIR@ -f 0

# 6. Memory per job: the server's resident-memory growth over N pipelined
# puts of 100-byte bodies (one tube, no binlog), per job.
wl_memjob() {
	[[ $SERVER == responder ]] && return 0 # stores nothing: n/a
	local n before after
	n=$(pick 1000000 20000)
	before=$(rss_kb "$SERVER_PID")
	bench_ops -w put -c 10 -P 16 -s 100 -n "$n" >/dev/null || return 1
	after=$(rss_kb "$SERVER_PID")
	echo $(((after - before) * 1024 / n))
}
workload memjob wl_memjob "6. memory per job after $(pick 1,000,000 20,000) puts of 100 bytes (lower is better)" "bytes/job"

# 7. Binlog replay: fill the binlog with N jobs, kill -9 the server, start
# it again on the same directory and time from the start until a "stats"
# reply shows all N jobs ready.  A server may listen before it replays:
# each poll is a connection that waits for the stats reply.
wl_replay() {
	[[ $SERVER == responder ]] && return 0
	local n t0 t1 v="" deadline
	n=$(pick 1000000 20000)
	bench_ops -w put -c 10 -P 16 -s 100 -n "$n" >/dev/null || return 1
	kill9_restart
	t0=$(now_s)
	deadline=$((SECONDS + 300))
	while ((SECONDS < deadline)); do
		kill -0 "$SERVER_PID" 2>/dev/null ||
			{ echo "    $SERVER died on restart: $(tail -3 "$RUN_DIR/server.log")" >&2; return 1; }
		if v=$(stats_value current-jobs-ready 60) && [[ $v == "$n" ]]; then
			t1=$(now_s)
			awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f\n", (b - a) * 1000 }'
			return 0
		fi
		sleep 0.005
	done
	echo "    $SERVER: not ready with $n jobs after 300 s (current-jobs-ready: ${v:-no reply})" >&2
	return 1
}
workload replay wl_replay "7. binlog replay: start to ready with $(pick 1,000,000 20,000) jobs (lower is better)" "ms" -b @DIR@

# 8. N idle connections.  Memory: the server's resident-memory growth while
# tubed-bench holds N connections that send nothing (plus one connection
# doing put+reserve+delete round trips, which leaves no jobs behind), per
# idle connection, sampled once the server reports them all connected.
# Throughput: workload 2 while the N connections stay open; compare with
# workload 2 in the table below the main one.
IDLE=$(pick 10000 500)
wl_idlemem() {
	[[ $SERVER == responder ]] && return 0
	local before after conns="" hold
	hold=$(pick 6 2)
	before=$(rss_kb "$SERVER_PID")
	bench_bg --idle "$IDLE" --watch 1 -c 1 -P 1 -s 100 -d "$hold"
	while kill -0 "$BG_PID" 2>/dev/null; do
		conns=$(stats_value current-connections) || conns=""
		# the idle ones, the worker and this stats connection
		[[ -n $conns ]] && ((conns >= IDLE + 2)) && break
		sleep 0.05
	done
	sleep 0.2
	after=$(rss_kb "$SERVER_PID")
	bench_wait || return 1
	((conns >= IDLE + 2)) || { echo "    $SERVER: only ${conns:-?} connections" >&2; return 1; }
	echo $(((after - before) * 1024 / IDLE))
}
workload idlemem wl_idlemem "8. memory per idle connection, $(pick 10,000 500) open (lower is better)" "bytes/conn"

wl_put50idle() { bench_ops -w put -c 50 -P 16 -s 100 -n "$(pick 500000 20000)" --idle "$IDLE"; }
workload put50idle wl_put50idle "8. workload 2 with $(pick 10,000 500) idle connections open" "ops/s"

wl_watch1000() { bench_ops --watch 1000 -c 1 -P 1 -s 100 -n "$(pick 10000 300)"; }
workload watch1000 wl_watch1000 "9. worker watching 1,000 tubes: put+reserve+delete" "round trips/s"

# The same round trip with a single watched tube, for the 1,000-tube target.
wl_watch1() { bench_ops --watch 1 -c 1 -P 1 -s 100 -n "$(pick 10000 300)"; }
workload watch1 wl_watch1 "9. the same round trip watching 1 tube" "round trips/s"

# 10. Large jobs. 65,535 bytes is beanstalkd's largest job by default; 1 MB
# needs -z on both. 10 connections, pipeline depth 16, as users of large
# payloads batch less than producers of small ones.
wl_put64k() { bench_ops -w put -c 10 -P 16 -s 65535 -n "$(pick 20000 500)"; }
workload put64k wl_put64k "10. put of 65,535-byte bodies, 10 connections, pipeline depth 16" "ops/s"

# (The ceiling's canned RESERVED reply has a 100-byte body: n/a.)
wl_drain64k() {
	[[ $SERVER == responder ]] && return 0
	bench_ops -w reserve-delete -c 10 -P 16 -s 65535 --prefill "$(pick 20000 500)"
}
workload drain64k wl_drain64k "10. drain of $(pick 20,000 500) jobs of 65,535 bytes, reserve+delete, 10 connections, depth 16" "jobs/s"

wl_put1m() { bench_ops -w put -c 10 -P 16 -s 1000000 -n "$(pick 2000 100)"; }
workload put1m wl_put1m "10. put of 1 MB bodies, 10 connections, pipeline depth 16 (-z 1048576)" "ops/s" -z 1048576

wl_drain1m() {
	[[ $SERVER == responder ]] && return 0
	bench_ops -w reserve-delete -c 10 -P 16 -s 1000000 --prefill "$(pick 2000 100)"
}
workload drain1m wl_drain1m "10. drain of $(pick 2,000 100) jobs of 1 MB, 10 connections, depth 16 (-z 1048576)" "jobs/s" -z 1048576

wl_steady1m() {
	[[ $SERVER == responder ]] && return 0
	bench_ops -w produce-consume --producers 4 --workers 4 -s 1000000 -d "$(pick 5 0.5)"
}
workload steady1m wl_steady1m "10. steady state of 1 MB jobs, 4 producers + 4 workers (-z 1048576)" "jobs/s" -z 1048576

# Paired workloads: the ratio of two workloads on the same server, printed
# below the table.  A pair runs interleaved, so that both halves of a ratio
# see the same machine: in each round, for each server, one run of each
# (on its own fresh server), alternating which goes first.  The ratio is the
# median of the per-round ratios.  WORKLOADS naming either runs both.
#   pair BASE ID "Title"   ->  ID / BASE per server
PAIR_IDS=()
declare -A PAIR_OF PAIR_BASE PAIR_TITLE
pair() {
	PAIR_IDS+=("$2")
	PAIR_BASE[$2]=$1
	PAIR_TITLE[$2]=$3
	PAIR_OF[$1]=$2
	PAIR_OF[$2]=$1
}
pair put50 put50idle "8. put, 50 connections: with / without $(pick 10,000 500) idle connections open"
pair watch1 watch1000 "9. round trips: watching 1,000 tubes / watching 1 tube"

# ---------------------------------------------------------------- running

declare -A VALUES # "$id/$server" -> space-separated values, one per round
FAILED=0
LOAD_START="" LOAD_END="" TUBED_BUILT=""

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
	if [[ " $SERVERS " == *" responder "* ]]; then build_c "$HERE/responder.c" "$RESPONDER"; fi
}

# run_one ID SERVER: one measurement on a fresh server; sets RESULT to the
# value, n/a or FAIL.  Neither this nor the workload function runs in a
# subshell, so that the EXIT trap always knows the pid of the server to stop
# (a workload may restart the server, or start a client in the background).
RESULT=""
run_one() {
	local id=$1 value
	# shellcheck disable=SC2086 # the flags are words by design
	start_server "$2" ${WL_FLAGS[$id]}
	if "${WL_FUNC[$id]}" >"$RUN_DIR/value"; then
		value=$(<"$RUN_DIR/value")
		RESULT=${value:-n/a}
	else
		RESULT=FAIL
	fi
	stop_bg
	stop_server
}

# run_workload ID: ROUNDS rounds of ID (and of its pair, if any,
# interleaved), each round running every server in turn.
declare -A RAN
run_workload() {
	local id=$1 round s x
	local group=("$id")
	[[ -n ${RAN[$id]:-} ]] && return 0
	if [[ -n ${PAIR_BASE[$id]:-} ]]; then
		group=("${PAIR_BASE[$id]}" "$id")
	elif [[ -n ${PAIR_OF[$id]:-} ]]; then
		group=("$id" "${PAIR_OF[$id]}")
	fi
	for x in "${group[@]}"; do log "${WL_TITLE[$x]}"; RAN[$x]=1; done
	for round in $(seq "$ROUNDS"); do
		local line="  round $round:" order=("${group[@]}")
		# a pair alternates which half goes first
		((${#group[@]} == 2 && round % 2 == 0)) && order=("${group[1]}" "${group[0]}")
		for s in $SERVERS; do
			for x in "${order[@]}"; do
				run_one "$x" "$s"
				[[ $RESULT == FAIL ]] && FAILED=1
				VALUES[$x/$s]+="$RESULT "
				line+=" $s${PAIR_OF[$x]:+ ($x)} $RESULT"
			done
		done
		log "$line"
	done
}

# pair_ratio ID SERVER: median over the rounds of ID / its base.
pair_ratio() {
	local -a a b r=()
	local i
	# shellcheck disable=SC2206
	a=(${VALUES[$1/$2]}) b=(${VALUES[${PAIR_BASE[$1]}/$2]})
	for i in "${!a[@]}"; do r+=("$(ratio "${a[i]}" "${b[i]:-}")"); done
	for i in "${r[@]}"; do [[ $i == - ]] && { echo -; return; }; done
	awk -v v="$(median "${r[@]}")" 'BEGIN { printf "%.2f", v }'
}


# Round figures to whole numbers for the table; keep words as they are.
fmt() { awk -v v="$1" 'BEGIN { if (v + 0 == v) printf "%.0f", v; else print v }'; }

server_version() {
	local bin
	bin=$(server_binary "$1")
	[[ $1 == responder ]] && { echo "ceiling"; return; }
	echo "$(timeout 2 "$bin" -v 2>&1 | head -1 || true)$([[ $1 == tubed ]] && echo " (binary built $TUBED_BUILT)")"
}

write_results() {
	local id s m col
	local -A med
	mkdir -p "$(dirname "$OUT")"
	{
		echo "# tubed benchmark"
		echo
		echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(uname -srm);" \
			"$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) CPUs;" \
			"load average $LOAD_START at the start, $LOAD_END at the end."
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
		local p had=0
		for p in "${PAIR_IDS[@]}"; do
			[[ -n ${VALUES[$p/${SERVERS%% *}]:-} && -n ${VALUES[${PAIR_BASE[$p]}/${SERVERS%% *}]:-} ]] || continue
			if [[ $had == 0 ]]; then
				echo
				echo "Paired workloads (run interleaved; median of the per-round ratios):"
				echo
				head="| comparison |" rule="|---|"
				for s in $SERVERS; do
					col=$s; [[ $s == responder ]] && col=ceiling
					head+=" $col |"; rule+="---:|"
				done
				echo "$head"
				echo "$rule"
				had=1
			fi
			row="| ${PAIR_TITLE[$p]} |"
			for s in $SERVERS; do row+=" $(pair_ratio "$p" "$s") |"; done
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
	# 10,000 idle connections need more descriptors than the usual 1024, in
	# tubed-bench and in the servers (which inherit this limit).
	local hard
	hard=$(ulimit -Hn)
	[[ $hard == unlimited ]] && hard=1048576
	ulimit -n "$hard" 2>/dev/null || true
	if (($(ulimit -n) < IDLE + 200)); then
		log "warning: open-file limit $(ulimit -n) is too low for $IDLE idle connections (raise the hard limit)"
	fi
	run_all tubed-bench "${WORKLOADS:-${WL_IDS[*]}}"
}

main "$@"
