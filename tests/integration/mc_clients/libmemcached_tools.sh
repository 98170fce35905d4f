#!/bin/sh
# tubed's kestrel listener through libmemcached-tools (Debian names them
# memccp, memccat, memcstat: memcp, memcat, memstat upstream).
#
# Usage: libmemcached_tools.sh HOST PORT [--memcached]
#
# Each tool run is one connection. Checks: three memccp come back from
# memccat in FIFO order; memccat on the empty queue fails (a miss); a job
# opened with memccat q/open comes back when the tool disconnects; memcstat
# reads the stats. Prints "N passed, N failed"; non-zero on any failure.
# --memcached: a smoke test of the same calls against a real memcached.
#
# Quirks: memccp takes the key from the file's name, so the value is written
# to a file named after the queue. memcstat first sends `version` and
# refuses a server whose major version number is 0 ("strtol() failed to
# parse major version"), as php-memcached's getStats() does: tubed's
# version is 1.x for them.
set -u
[ $# -ge 2 ] || { echo "usage: $0 HOST PORT [--memcached]" >&2; exit 2; }
srv="--servers=$1:$2"
mode=${3:-}
q="libmemcached_$$_$(date +%s)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

expect() { # what got want
    if [ "$2" = "$3" ]; then
        passed=$((passed + 1)); echo "PASS $1"
    else
        failed=$((failed + 1)); echo "FAIL $1: got '$2', want '$3'"
    fi
}

store() { # value
    printf '%s' "$1" > "$tmp/$q"
    memccp "$srv" "$tmp/$q" >/dev/null 2>&1 && echo ok || echo "memccp failed"
}

fetch() { # key: the value, or "(miss)"
    memccat "$srv" "$1" 2>/dev/null || echo "(miss)"
}

if [ "$mode" = "--memcached" ]; then
    expect "memccp" "$(store one)" ok
    expect "memccat" "$(fetch "$q")" one
    expect "memccat of a key with options misses" "$(fetch "$q/open")" "(miss)"
    expect "memccat of a missing key" "$(fetch "${q}_none")" "(miss)"
else
    for v in one two three; do expect "memccp $v" "$(store $v)" ok; done
    got="$(fetch "$q") $(fetch "$q") $(fetch "$q")"
    expect "three memccat in FIFO order" "$got" "one two three"
    expect "memccat on the empty queue misses" "$(fetch "$q")" "(miss)"
    expect "memccp for an open read" "$(store reliable)" ok
    expect "memccat q/open returns the job" "$(fetch "$q/open")" reliable
    expect "the open job came back at disconnect" "$(fetch "$q")" reliable
    expect "then the queue is empty" "$(fetch "$q")" "(miss)"
fi
stat_out=$(memcstat "$srv" 2>&1)
if printf '%s\n' "$stat_out" | grep -q 'curr_items'; then
    expect "memcstat shows curr_items" yes yes
else
    echo "memcstat said: $stat_out" | head -3
    expect "memcstat shows curr_items" no yes
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
