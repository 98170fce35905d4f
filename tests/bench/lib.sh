# tests/bench/lib.sh - what the bench scripts share (sourced by run.sh and
# memcache.sh): messages, free ports, starting and stopping the server under
# test by its pid, and the arithmetic of the result tables.
#
# The sourcing script sets BENCH_NAME (the prefix of its messages), QUICK,
# SERVERS, TUBED, BENCH, OUT, FAILED, WL_IDS and WL_FUNC, and defines
# run_workload and write_results; these functions set and read RUN_DIR,
# SERVER_PID and PORT.

die() { echo "$BENCH_NAME: $*" >&2; exit 1; }
log() { echo "$BENCH_NAME: $*" >&2; }

# True when something accepts connections on 127.0.0.1:$1 (bash's /dev/tcp,
# so a fresh machine needs no extra tool).
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Ports are picked below the ephemeral range: a client's socket in
# TIME_WAIT there (thousands after a few runs with 100 connections, more
# when other tests run) makes a listener's bind fail even with SO_REUSEADDR.
EPHEMERAL_LOW=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
((EPHEMERAL_LOW > 12000)) || EPHEMERAL_LOW=32768
pick_port() {
	local p
	for _ in $(seq 50); do
		p=$((10000 + RANDOM % (EPHEMERAL_LOW - 10000)))
		port_open "$p" || { echo "$p"; return 0; }
	done
	die "found no free port"
}

# launch LOG COMMAND...: start COMMAND in the background (output to LOG) as
# the server under test and wait until $PORT accepts connections; 1 (the
# server stopped again) if it died first or never listened.
launch() {
	local logf=$1
	shift
	"$@" >"$logf" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 200); do
		kill -0 "$SERVER_PID" 2>/dev/null || break
		if port_open "$PORT"; then return 0; fi
		sleep 0.025
	done
	stop_server
	return 1
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

# pick FULL QUICK: the size for this mode.
pick() { if [[ $QUICK == 1 ]]; then echo "$2"; else echo "$1"; fi; }

# build_c SRC BIN: a one-file helper program (the responder, the fresh-memory
# probe) built with $CC when BIN is missing or older than SRC.
build_c() {
	[[ -x $2 && ! $1 -nt $2 ]] && return 0
	mkdir -p "$(dirname "$2")"
	"${CC:-cc}" -O2 -o "$2" "$1" || die "cannot build $2 from $1"
}

# csv_field NAME CSV: the value of column NAME in tubed-bench --csv output.
csv_field() {
	awk -F, -v k="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == k) c = i }
		NR == 2 && c { print $c }' <<<"$2"
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

# run_all DIRNAME IDS: the body of a bench run. A scratch directory, private
# copies of the binaries (a rebuild during the run cannot mix two
# versions), every workload of IDS (the script's WL_FUNC, run_workload and
# write_results), the load average before and after, the table.
run_all() {
	local dirname=$1 ids=$2 id
	LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
	log "load average at start: $LOAD_START"
	RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/$dirname.XXXXXX")
	if [[ $SERVERS == *tubed* ]]; then
		TUBED_BUILT=$(date -u -r "$TUBED" '+%Y-%m-%d %H:%M UTC')
		cp "$TUBED" "$RUN_DIR/tubed" && TUBED=$RUN_DIR/tubed
	fi
	cp "$BENCH" "$RUN_DIR/tubed-bench" && BENCH=$RUN_DIR/tubed-bench
	for id in $ids; do
		[[ -n ${WL_FUNC[$id]:-} ]] || die "unknown workload '$id' (have: ${WL_IDS[*]})"
	done
	for id in $ids; do run_workload "$id"; done
	LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
	log "load average at end: $LOAD_END"
	write_results
	echo
	cat "$OUT"
	echo
	log "results written to $OUT"
	[[ $FAILED == 0 ]] || die "some runs failed (FAIL above); see the messages before them"
}
