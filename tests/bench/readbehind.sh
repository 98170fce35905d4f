#!/usr/bin/env bash
# tests/bench/readbehind.sh - `make bench`, read-behind side: a queue far
# larger than its memory budget (extensions.md §5), against the same queue
# held fully in memory.
#
# The workload: RB_BYTES of RB_SIZE-byte bodies (4 GiB of 4 KiB bodies,
# 1,048,576 jobs, by default) put into one tube over 50 connections with
# pipelining, then drained by 50 connections (reserve + delete, every body
# checked byte for byte by tubed-bench).  Three runs, each on a freshly
# started tubed with its own empty binlog directory (-b DIR, default fsync):
#
#   mem      no max_memory_size: every body stays in memory
#   rb       max_memory_size = RB_BUDGET for the tube; the drain follows the
#            put at once (the binlog is still in the page cache: warm)
#   rbcold   the same, but `sync; echo 3 > /proc/sys/vm/drop_caches` between
#            the put and the drain (cold page cache).  Needs root and a
#            writable /proc/sys; skipped (and said so) otherwise
#
# Sampled: the put and drain rates (tubed-bench), the server's VmRSS every
# 0.1 s during each phase (peak) and VmRSS/VmHWM at the end of each phase
# (/proc/PID/status), its CPU time per phase (/proc/PID/stat), the tube's
# job count every second (the slowest second of each phase shows a stall),
# and at the end of each phase `stats-binlog` (spilled-jobs, spilled-bytes,
# bytes-on-disk) and the spill counters (spill-reads, spill-waits,
# spill-errors: from stats-binlog when it has them, else from /metrics,
# tubed_binlog_spill_*_total; the server runs with --metrics-port).  The table gives the ratios read-behind / in
# memory against the targets (put >= 0.8, warm drain >= 0.5) and the RSS
# against budget + 100 bytes per job.
#
# Environment:
#   QUICK=1                   64 MiB of bodies under a 4 MiB budget: a smoke
#                             test (about 15 s)
#   RB_BYTES=4G               body bytes put (K, M, G or KiB, MiB, GiB)
#   RB_BUDGET=64M             max_memory_size of the tube (same suffixes)
#   RB_SIZE=4096              body size; jobs = RB_BYTES / RB_SIZE
#   RB_PUT="-c 50 -P 16"      tubed-bench flags of the put phase
#   RB_DRAIN="-c 50 -P 1"     tubed-bench flags of the drain phase
#   RB_RUNS="mem rb rbcold"   run only some of the three
#   RB_DIR=$TMPDIR or /tmp    where the binlog directories go; needs about
#                             RB_BYTES x 1.1 free (checked before each run)
#   RB_OUT=build/bench-readbehind.md   where the markdown table goes (the
#                             RSS and job-count samples go next to it, in
#                             bench-readbehind-samples.csv)
#   TUBED=build/tubed BENCH=build/tubed-bench
#
# The servers, the samplers and the binlog directories are removed on exit,
# Ctrl-C included.  The samples are kept on /dev/shm while the run goes on
# (an append to a file on the disk the binlog saturates can wait for
# seconds).  On a machine busy with other sessions, see the note at
# the head of memcache.sh (a session of its own with more weight).

set -euo pipefail
export LC_ALL=C

QUICK=${QUICK:-0}
BUILD=${BUILD:-build}
OUT=${RB_OUT:-$BUILD/bench-readbehind.md}
SAMPLES_KEEP=${OUT%.md}-samples.csv
TUBED=${TUBED:-$BUILD/tubed}
BENCH=${BENCH:-$BUILD/tubed-bench}
SERVERS=tubed # run_all copies this binary

BENCH_NAME=bench-readbehind
# shellcheck source=tests/bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RB_SIZE=${RB_SIZE:-4096}
RB_PUT=${RB_PUT:--c 50 -P 16}
RB_DRAIN=${RB_DRAIN:--c 50 -P 1}
RB_RUNS=${RB_RUNS:-mem rb rbcold}
TUBE=rb

# to_bytes VALUE: VALUE in bytes (digits with K, M, G, KiB, MiB or GiB).
to_bytes() {
	local v=$1 n unit
	[[ $v =~ ^([0-9]+)([KMG]?)(i?B)?$ ]] || die "'$v' is not a size (digits, then K, M, G, KiB, MiB or GiB)"
	n=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]}
	case $unit in
	K) echo $((n * 1024)) ;;
	M) echo $((n * 1024 * 1024)) ;;
	G) echo $((n * 1024 * 1024 * 1024)) ;;
	*) echo $((10#$n)) ;;
	esac
}

BYTES=$(to_bytes "${RB_BYTES:-$(pick 4G 64M)}")
BUDGET=$(to_bytes "${RB_BUDGET:-$(pick 64M 4M)}")
[[ $RB_SIZE =~ ^[1-9][0-9]*$ ]] || die "RB_SIZE must be a positive number of bytes"
JOBS=$((BYTES / RB_SIZE))
((JOBS > 0)) || die "RB_BYTES ($BYTES) is less than one body of RB_SIZE ($RB_SIZE) bytes"
((BUDGET > 0)) || die "RB_BUDGET must be more than 0 (0 means no limit)"
read -r -a PUT_FLAGS <<<"$RB_PUT"
read -r -a DRAIN_FLAGS <<<"$RB_DRAIN"
# Generous: a slow drain is a figure to report, not a failure; a server
# that sends nothing for a minute is.
BENCH_LIMITS=(--timeout 3600 --stall 60)

# mib BYTES: in MiB, one decimal.
mib() { awk -v b="$1" 'BEGIN { if (b + 0 == b) printf "%.1f", b / 1048576; else print b }'; }
# kib_mib KIB: the same from KiB.
kib_mib() { awk -v k="$1" 'BEGIN { if (k + 0 == k) printf "%.1f", k / 1024; else print k }'; }

# ---------------------------------------------------------------- server

SERVER_PID="" # the tubed under test, while it runs
PORT=""       # its port
MPORT=""      # its --metrics-port
SAMPLES=""    # the samples while the run goes on (see keep_samples)
RUN_DIR=""    # scratch directory of this whole run
BINLOG_DIR="" # the binlog directory of the current run
SAMPLER_PID=""

cleanup() {
	stop_sampler
	keep_samples
	stop_server
	[[ -z $BINLOG_DIR ]] || rm -rf "$BINLOG_DIR"
	if [[ -n $RUN_DIR ]]; then
		cat "$RUN_DIR/sampler.err" >&2 2>/dev/null || true
		rm -rf "$RUN_DIR"
	fi
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The server's command line for a run (PORT and DIR as words, for the table).
server_cmd() {
	local cmd="tubed -l 127.0.0.1 -p PORT -b DIR --metrics-port PORT2"
	[[ $1 == mem ]] || cmd+=" --config rb.conf"
	echo "$cmd"
}

# start_tubed ID: a fresh tubed on an empty binlog directory; with a budget
# unless ID is mem.
start_tubed() {
	local id=$1 base=${RB_DIR:-$RUN_DIR}
	local -a extra=()
	BINLOG_DIR=$(mktemp -d "$base/binlog-$id.XXXXXX")
	if [[ $id != mem ]]; then
		printf '[tube %s]\nmax_memory_size = %s\n' "$TUBE" "$BUDGET" >"$RUN_DIR/rb.conf"
		extra=(--config "$RUN_DIR/rb.conf")
	fi
	for _ in 1 2 3 4 5; do
		PORT=$(pick_port)
		MPORT=$(pick_port)
		[[ $MPORT != "$PORT" ]] || continue
		launch "$RUN_DIR/server.log" "$TUBED" -l 127.0.0.1 -p "$PORT" -b "$BINLOG_DIR" \
			--metrics-port "$MPORT" "${extra[@]}" && return 0
	done
	die "cannot start tubed (-b $BINLOG_DIR ${extra[*]}): $(tail -3 "$RUN_DIR/server.log")"
}

server_alive() {
	kill -0 "$SERVER_PID" 2>/dev/null && return 0
	log "tubed died: $(tail -5 "$RUN_DIR/server.log")"
	return 1
}

# command_reply COMMAND: the data of an "OK <bytes>" reply to COMMAND (a
# stats-like command) of the server under test, on stdout; fails when it
# cannot connect or no reply comes within 10 s; status 2 for NOT_FOUND.
command_reply() (
	local line n data
	exec 3<>"/dev/tcp/127.0.0.1/$PORT" || exit 1
	printf '%s\r\n' "$1" >&3
	IFS= read -r -t 10 line <&3 || exit 1
	line=${line%$'\r'}
	[[ $line == NOT_FOUND ]] && exit 2
	[[ $line =~ ^OK\ ([0-9]+)$ ]] || exit 1
	n=${BASH_REMATCH[1]}
	IFS= read -r -d '' -N "$n" -t 10 data <&3 || exit 1
	printf '%s\n' "$data"
) 2>/dev/null

# metrics: the server's /metrics text on stdout.
metrics() (
	local line
	exec 3<>"/dev/tcp/127.0.0.1/$MPORT" || exit 1
	printf 'GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' >&3
	while IFS= read -r -t 10 line <&3; do printf '%s\n' "${line%$'\r'}"; done
) 2>/dev/null

# metric_value NAME TEXT: the value of the unlabelled series NAME; "-" if absent.
metric_value() {
	awk -v k="$1" '$1 == k { print $2; f = 1; exit } END { if (!f) print "-" }' <<<"$2"
}

# cpu_ticks: the server's utime + stime in clock ticks (/proc/PID/stat).
cpu_ticks() {
	local stat
	stat=$(<"/proc/$SERVER_PID/stat")
	stat=${stat##*) } # past the command name, which may hold spaces
	local -a f
	read -r -a f <<<"$stat"
	echo $((f[11] + f[12])) # fields 14 and 15 of the whole line
}
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)

# yaml_value KEY YAML: KEY's value in a flat YAML dictionary; "-" if absent.
yaml_value() {
	awk -v k="$1" 'index($0, k ": ") == 1 { print substr($0, length(k) + 3); f = 1; exit }
		END { if (!f) print "-" }' <<<"$2"
}

# tube_jobs: the jobs of the tube, ready or reserved (0 when the tube is
# gone: an empty tube nobody uses or watches is deleted).
tube_jobs() {
	local y rc=0
	y=$(command_reply "stats-tube $TUBE") || rc=$?
	((rc != 2)) || { echo 0; return 0; }
	((rc == 0)) || return 1
	echo "$(($(yaml_value current-jobs-ready "$y") + $(yaml_value current-jobs-reserved "$y")))"
}

# rss_hwm: "VmRSS VmHWM" of the server in KiB.  Read by awk, in one read():
# bash's read builtin takes a seekable file 128 bytes at a time, and
# /proc/PID/status is made anew for each read, so a line that changed
# length in between (State: "R (running)" / "S (sleeping)") shifts the
# rest and a key can go missing.
rss_hwm() {
	awk '$1 == "VmRSS:" { r = $2 } $1 == "VmHWM:" { h = $2 } END { print r + 0, h + 0 }' \
		"/proc/$SERVER_PID/status"
}

# start_sampler ID PHASE: in the background, the server's VmRSS every 0.1 s
# and the tube's jobs (ready + reserved) every second, appended to SAMPLES
# as "run,phase,seconds,rss_kb,jobs" (jobs empty between the stats polls).
start_sampler() {
	local id=$1 phase=$2 pid=$SERVER_PID
	(
		trap 'exit 0' TERM
		exec 4<> <(:) # read -t on it is a sleep without a fork
		t0=${EPOCHREALTIME/./}
		next_stats=0
		while kill -0 "$pid" 2>/dev/null; do
			now=${EPOCHREALTIME/./}
			rss=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$pid/status") || break
			jobs=""
			if ((now >= next_stats)); then
				jobs=$(tube_jobs) || jobs=""
				next_stats=$((now + 1000000))
			fi
			t=$(((now - t0) / 1000))
			printf '%s,%s,%d.%03d,%s,%s\n' "$id" "$phase" $((t / 1000)) $((t % 1000)) "$rss" "$jobs"
			read -r -t 0.1 -u 4 _ || true
		done
	) >>"$SAMPLES" 2>>"$RUN_DIR/sampler.err" &
	SAMPLER_PID=$!
}

stop_sampler() {
	[[ -n $SAMPLER_PID ]] || return 0
	kill "$SAMPLER_PID" 2>/dev/null || true
	wait "$SAMPLER_PID" 2>/dev/null || true
	SAMPLER_PID=""
}

# peak_rss ID PHASE KIB: the highest VmRSS sample (KiB) of that phase, or
# KIB (the sample at its end) if higher.
peak_rss() {
	awk -F, -v r="$1" -v p="$2" -v m="$3" '$1 == r && $2 == p && $4 > m { m = $4 } END { print m + 0 }' "$SAMPLES"
}

# longest_gap ID PHASE: the longest time (s) between two samples: the sampler
# (or the whole machine) was held up that long.
longest_gap() {
	awk -F, -v r="$1" -v p="$2" '$1 == r && $2 == p { if (n++ && $3 - t > m) m = $3 - t; t = $3 }
		END { printf "%.2f", m }' "$SAMPLES"
}

# slowest_second ID PHASE: the fewest jobs the tube gained (put) or lost
# (drain) between two stats polls about a second apart, scaled to jobs/s,
# over the polls strictly inside the phase; "-" with too few polls.
slowest_second() {
	awk -F, -v r="$1" -v p="$2" '$1 == r && $2 == p && $5 != "" { t[n] = $3; j[n] = $5; n++ }
		END {
			for (i = 1; i < n - 1; i++) {
				d = j[i] - j[i - 1]; if (d < 0) d = -d
				s = d / (t[i] - t[i - 1])
				if (!f || s < m) { m = s; f = 1 }
			}
			if (f) printf "%.0f", m; else print "-"
		}' "$SAMPLES"
}

# ---------------------------------------------------------------- phases

declare -A R # "$id/$key" -> value
FAILED=0

# bench_phase ID PHASE ARGS...: run tubed-bench (the CSV in R[ID/PHASE_*]).
bench_phase() {
	local id=$1 phase=$2 out
	shift 2
	if ! out=$("$BENCH" -q --csv --label "$id" -p "$PORT" "${BENCH_LIMITS[@]}" "$@" \
		2>"$RUN_DIR/bench.err"); then
		sed 's/^/    /' "$RUN_DIR/bench.err" | head -8 >&2
		return 1
	fi
	local f
	for f in ops_per_sec seconds p50_us p99_us p999_us max_us ops; do
		R[$id/${phase}_$f]=$(csv_field "$f" "$out")
	done
}

# binlog_stats ID WHEN: stats-binlog's read-behind keys into R[ID/WHEN_*];
# the spill counters it lacks from /metrics.
binlog_stats() {
	local id=$1 when=$2 y m="" k v
	y=$(command_reply stats-binlog) || { log "no stats-binlog reply"; y=""; }
	for k in spilled-jobs spilled-bytes spill-reads spill-waits spill-errors bytes-on-disk files; do
		v=$(yaml_value "$k" "$y")
		if [[ $v == - && $k == spill-* ]]; then
			[[ -n $m ]] || m=$(metrics) || m=" "
			v=$(metric_value "tubed_binlog_${k//-/_}_total" "$m")
		fi
		R[$id/${when}_$k]=$v
	done
}

# phase_cpu ID PHASE TICKS0: the server's CPU seconds since TICKS0.
phase_cpu() {
	R[$1/${2}_cpu]=$(awk -v a="$3" -v b="$(cpu_ticks)" -v hz="$CLK_TCK" 'BEGIN { printf "%.1f", (b - a) / hz }')
}

cached_mib() { awk '/^Cached:/ { printf "%.0f", $2 / 1024 }' /proc/meminfo; }

disk_check() {
	local base=${RB_DIR:-$RUN_DIR} avail need
	avail=$(($(df -Pk "$base" | awk 'NR == 2 { print $4 }') * 1024))
	need=$((BYTES + BYTES / 10 + 256 * 1024 * 1024))
	((avail >= need)) || die "$base has $(mib "$avail") MiB free; the binlog needs about $(mib "$need") MiB (set RB_DIR, or a smaller RB_BYTES)"
}

COLD_OK=""
cold_permitted() {
	if [[ -z $COLD_OK ]]; then
		COLD_OK=no
		if [[ $(id -u) != 0 ]]; then
			COLD_WHY="not root"
		elif ! sync || ! (echo 1 >/proc/sys/vm/drop_caches) 2>/dev/null; then
			COLD_WHY="/proc/sys/vm/drop_caches is not writable here"
		else
			COLD_OK=yes
		fi
	fi
	[[ $COLD_OK == yes ]]
}

# run_workload ID: one run (mem, rb or rbcold): start, put, drain, stop.
run_workload() {
	local id=$1 rss hwm jobs
	case $id in
	mem | rb | rbcold) ;;
	*) die "unknown run '$id' in RB_RUNS (mem rb rbcold)" ;;
	esac
	if [[ $id == rbcold ]] && ! cold_permitted; then
		log "rbcold: skipped: cannot drop the page cache ($COLD_WHY)"
		R[$id/skipped]="skipped: cannot drop the page cache ($COLD_WHY)"
		return 0
	fi
	disk_check
	log "$id: $(server_cmd "$id"); put $JOBS jobs of $RB_SIZE bytes ($(mib "$BYTES") MiB)$([[ $id != mem ]] && echo ", budget $(mib "$BUDGET") MiB")"
	start_tubed "$id"
	sleep 0.2
	read -r rss hwm < <(rss_hwm)
	R[$id/idle_rss]=$rss

	local ticks
	ticks=$(cpu_ticks)
	start_sampler "$id" put
	if ! bench_phase "$id" put -w put --tube "$TUBE" "${PUT_FLAGS[@]}" -s "$RB_SIZE" -n "$JOBS"; then
		stop_sampler
		server_alive || true
		FAILED=1 R[$id/failed]="put failed"
		stop_server
		rm -rf "$BINLOG_DIR"; BINLOG_DIR=""
		return 0
	fi
	read -r rss hwm < <(rss_hwm)
	phase_cpu "$id" put "$ticks"
	stop_sampler
	R[$id/put_end_rss]=$rss R[$id/put_end_hwm]=$hwm R[$id/put_peak_rss]=$(peak_rss "$id" put "$rss")
	binlog_stats "$id" put_end
	jobs=$(tube_jobs) || jobs="?"
	[[ $jobs == "$JOBS" ]] || log "$id: after the put the tube holds $jobs jobs, not $JOBS"
	log "$id: put ${R[$id/put_ops_per_sec]} jobs/s; RSS $(kib_mib "$rss") MiB (peak $(kib_mib "${R[$id/put_peak_rss]}")); spilled-jobs ${R[$id/put_end_spilled-jobs]}"

	if [[ $id == rbcold ]]; then
		local t0=$EPOCHREALTIME c0
		c0=$(cached_mib)
		sync
		echo 3 >/proc/sys/vm/drop_caches
		R[$id/drop_s]=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
		R[$id/cached]="$c0 MiB -> $(cached_mib) MiB"
		log "$id: page cache dropped (sync + drop_caches: ${R[$id/drop_s]} s; Cached ${R[$id/cached]})"
	fi

	ticks=$(cpu_ticks)
	start_sampler "$id" drain
	if ! bench_phase "$id" drain -w reserve-delete --tube "$TUBE" --prefill 0 "${DRAIN_FLAGS[@]}" \
		-s "$RB_SIZE" -n "$JOBS"; then
		stop_sampler
		server_alive || true
		FAILED=1 R[$id/failed]="drain failed"
	else
		read -r rss hwm < <(rss_hwm)
		phase_cpu "$id" drain "$ticks"
		stop_sampler
		R[$id/drain_end_rss]=$rss R[$id/drain_end_hwm]=$hwm
		R[$id/drain_peak_rss]=$(peak_rss "$id" drain "$rss")
		binlog_stats "$id" drain_end
		jobs=$(tube_jobs) || jobs="?"
		[[ $jobs == 0 ]] || log "$id: after the drain the tube holds $jobs jobs"
		log "$id: drain ${R[$id/drain_ops_per_sec]} jobs/s; RSS peak $(kib_mib "${R[$id/drain_peak_rss]}") MiB; spill-reads ${R[$id/drain_end_spill-reads]}, spill-waits ${R[$id/drain_end_spill-waits]}"
	fi
	R[$id/put_slowest]=$(slowest_second "$id" put)
	R[$id/drain_slowest]=$(slowest_second "$id" drain)
	R[$id/put_gap]=$(longest_gap "$id" put)
	R[$id/drain_gap]=$(longest_gap "$id" drain)
	R[$id/gaps]="${R[$id/put_gap]} / ${R[$id/drain_gap]}"
	server_alive || FAILED=1
	stop_server
	rm -rf "$BINLOG_DIR"
	BINLOG_DIR=""
}

# ---------------------------------------------------------------- results

has_run() { [[ " $RB_RUNS " == *" $1 "* && -z ${R[$1/skipped]:-} ]]; }
val() { echo "${R[$1]:--}"; }
num() { awk -v v="$1" 'BEGIN { if (v + 0 == v && v != "") printf "%.0f", v; else print "-" }'; }

# row TITLE KEY FORMAT [TARGET...]: a table row for KEY in each run; FORMAT
# is num, kib (KiB shown as MiB), bytes (shown as MiB), us (shown as ms) or
# raw; then the ratios read-behind / in memory for rate rows.
row() {
	local title=$1 key=$2 fmt=$3 ratios=${4:-} target=${5:-} id v line
	line="| $title |"
	for id in mem rb rbcold; do
		v=$(val "$id/$key")
		case $fmt in
		num) v=$(num "$v") ;;
		kib) v=$(kib_mib "$v") ;;
		bytes) v=$(mib "$v") ;;
		us) v=$(awk -v u="$v" 'BEGIN { if (u + 0 == u) printf "%.1f", u / 1000; else print u }') ;;
		esac
		line+=" $v |"
	done
	if [[ -n $ratios ]]; then
		line+=" $(ratio "$(val "rb/$key")" "$(val "mem/$key")") | $(ratio "$(val "rbcold/$key")" "$(val "mem/$key")") | $target |"
	else
		line+=" | | $target |"
	fi
	echo "$line"
}

write_results() {
	local id per
	mkdir -p "$(dirname "$OUT")"
	{
		echo "# tubed read-behind: a queue larger than its memory budget"
		echo
		echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(uname -srm);" \
			"$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) CPUs," \
			"$(awk '/^MemTotal/ { printf "%.0f GiB RAM", $2 / 1048576 }' /proc/meminfo);" \
			"load average $LOAD_START at the start, $LOAD_END at the end."
		echo "- tubed: $(timeout 2 "$TUBED" -v 2>&1 | head -1 || true) (binary built $TUBED_BUILT)"
		echo "- binlog on: $(df -P "${RB_DIR:-${TMPDIR:-/tmp}}" | awk 'NR == 2 { print $1 " mounted on " $6 }')"
		echo
		echo "$JOBS jobs of $RB_SIZE bytes ($(mib "$BYTES") MiB of bodies) in one tube;" \
			"read-behind budget $(mib "$BUDGET") MiB$([[ $QUICK == 1 ]] && echo ' (QUICK sizes: a smoke test, not a measurement)')." \
			"Each run on a freshly started server with an empty binlog directory (default fsync)."
		echo
		echo "- server, in memory: \`$(server_cmd mem)\`"
		echo "- server, read-behind: \`$(server_cmd rb)\`, rb.conf: \`[tube $TUBE]\` \`max_memory_size = $BUDGET\`"
		echo "- put: \`tubed-bench -w put --tube $TUBE $RB_PUT -s $RB_SIZE -n $JOBS\`"
		echo "- drain: \`tubed-bench -w reserve-delete --tube $TUBE --prefill 0 $RB_DRAIN -s $RB_SIZE -n $JOBS\`"
		echo "- cold: \`sync; echo 3 > /proc/sys/vm/drop_caches\` between the put and the drain$(
			[[ -n ${R[rbcold/skipped]:-} ]] && echo " (${R[rbcold/skipped]})")"
		echo
		echo "| | in memory | read-behind, warm | read-behind, cold drain | warm / in memory | cold / in memory | target |"
		echo "|---|---:|---:|---:|---:|---:|---|"
		row "put, jobs/s" put_ops_per_sec num r "read-behind >= 0.8x"
		row "put, seconds" put_seconds raw
		row "put, slowest second, jobs/s" put_slowest raw
		row "put latency p99, ms" put_p99_us us
		row "put, server CPU s" put_cpu raw
		row "drain, jobs/s" drain_ops_per_sec num r "warm >= 0.5x"
		row "drain, seconds" drain_seconds raw
		row "drain, slowest second, jobs/s" drain_slowest raw
		row "drain latency p99, ms" drain_p99_us us
		row "drain latency max, ms" drain_max_us us
		row "drain, server CPU s" drain_cpu raw
		row "RSS idle, MiB" idle_rss kib
		row "RSS peak during put, MiB" put_peak_rss kib
		row "RSS at end of put, MiB" put_end_rss kib "" "budget + jobs x 100 B + a few MiB = $(mib $((BUDGET + JOBS * 100))) MiB + idle"
		row "VmHWM at end of put, MiB" put_end_hwm kib
		row "RSS peak during drain, MiB" drain_peak_rss kib
		row "RSS at end of drain, MiB" drain_end_rss kib
		row "VmHWM at end of drain, MiB" drain_end_hwm kib
		for w in put_end drain_end; do
			local wt=${w%_end}
			row "spilled-jobs, end of $wt" "${w}_spilled-jobs" raw
			row "spilled-bytes, end of $wt, MiB" "${w}_spilled-bytes" bytes
			row "spill-reads, end of $wt" "${w}_spill-reads" raw
			row "spill-waits, end of $wt" "${w}_spill-waits" raw
			row "spill-errors, end of $wt" "${w}_spill-errors" raw
		done
		row "binlog bytes-on-disk, end of put, MiB" put_end_bytes-on-disk bytes
		row "longest gap between samples, put / drain, s" gaps raw
		echo
		echo "Memory per job at the end of the put (RSS growth over idle; read-behind: less the budget):"
		echo
		for id in mem rb rbcold; do
			if ! has_run "$id" || [[ -z ${R[$id/put_end_rss]:-} ]]; then continue; fi
			per=$(((${R[$id/put_end_rss]} - ${R[$id/idle_rss]}) * 1024))
			[[ $id == mem ]] || per=$((per - BUDGET))
			echo "- $id: $((per / JOBS)) bytes/job$([[ $id == mem ]] && echo " ($((per / JOBS - RB_SIZE)) beyond the $RB_SIZE-byte body)")"
		done
		for id in mem rb rbcold; do
			[[ -n ${R[$id/failed]:-} ]] && echo "- $id: FAILED (${R[$id/failed]})"
			[[ -n ${R[$id/drop_s]:-} ]] && echo "- $id: sync + drop_caches took ${R[$id/drop_s]} s (not timed); page cache (Cached) ${R[$id/cached]}"
		done
		echo
		echo "RSS and job-count samples: $SAMPLES_KEEP (run,phase,seconds,rss_kb,jobs)."
	} >"$OUT"
}

main() {
	[[ -x $TUBED ]] || die "$TUBED not found: run 'make' first (or set TUBED=)"
	[[ -x $BENCH ]] || die "$BENCH not found: run 'make' first (or set BENCH=)"
	[[ $("$BENCH" --help) == *--tube* ]] || die "$BENCH has no --tube: rebuild it with 'make'"
	[[ -z ${RB_DIR:-} || -d $RB_DIR ]] || die "RB_DIR=$RB_DIR is not a directory"
	mkdir -p "$(dirname "$SAMPLES_KEEP")"
	local shm=/dev/shm
	[[ -d $shm && -w $shm ]] || shm=${TMPDIR:-/tmp}
	SAMPLES=$(mktemp "$shm/tubed-bench-rb-samples.XXXXXX")
	echo "run,phase,seconds,rss_kb,jobs" >"$SAMPLES"
	log "$JOBS jobs of $RB_SIZE bytes, budget $(mib "$BUDGET") MiB, runs: $RB_RUNS"
	WL_IDS=(mem rb rbcold)
	declare -gA WL_FUNC=([mem]=1 [rb]=1 [rbcold]=1)
	run_all tubed-bench-rb "$RB_RUNS"
}

# run_all's write_results runs before this: keep the samples.
keep_samples() {
	[[ -n ${SAMPLES:-} && -f $SAMPLES ]] || return 0
	cp "$SAMPLES" "$SAMPLES_KEEP" 2>/dev/null || true
	rm -f "$SAMPLES"
}

main "$@"
