#!/bin/sh
# Run every memcache client script against HOST PORT; non-zero if any fails.
# Usage: run_all.sh HOST PORT [--memcached]
# Needs the Debian packages python3-pymemcache python3-memcache php-cli
# php-memcached libmemcached-tools nodejs, and `npm ci` in ./node (see README.md).
set -u
[ $# -ge 2 ] || { echo "usage: $0 HOST PORT [--memcached]" >&2; exit 2; }
dir=$(dirname "$0")
fail=0
for s in "/usr/bin/python3 $dir/pymemcache.py" \
         "/usr/bin/python3 $dir/python_memcache.py" \
         "php $dir/php_memcached.php" \
         "node $dir/node_memcached.js" \
         "sh $dir/libmemcached_tools.sh"; do
    echo "== $s"
    $s "$@" || fail=1
done
exit $fail
