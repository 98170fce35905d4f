#!/usr/bin/php
<?php
/*
 * tubed's kestrel listener through php-memcached (Debian php-memcached,
 * libmemcached underneath).
 *
 * Usage: php php_memcached.php HOST PORT [--memcached]
 *
 * Uses the client's normal API on a fresh queue: three sets read back in
 * FIFO order, a reliable read (get q/open, then get q/close), an open that
 * is aborted and comes back, a wait with t= on an empty queue, and a get on
 * an empty queue. Prints one line per check and then "N passed, N failed";
 * exits non-zero on any failure.
 *
 * --memcached: the same calls against a real memcached, where a key is a
 * key, not a queue (a smoke test of the API use, not of queue semantics).
 *
 * Client quirks handled here:
 * - The text protocol: binary off (kestrel never had it), and no noreply.
 * - No compression and no serializer: a compressed or serialized value sets
 *   flags, which tubed drops (get returns 0), so only plain strings are set.
 * - A miss is false with getResultCode() == RES_NOTFOUND; anything else is
 *   an error and is reported with getResultMessage().
 * - libmemcached's receive timeout (OPT_RECV_TIMEOUT, microseconds) and
 *   poll timeout must outlast a t= wait.
 */

if ($argc < 3) {
    fwrite(STDERR, "usage: $argv[0] HOST PORT [--memcached]\n");
    exit(2);
}
$host = $argv[1];
$port = (int)$argv[2];
$memcached_mode = in_array('--memcached', array_slice($argv, 3), true);

$passed = 0;
$failed = 0;

function expect($what, $got, $want, $ok = null)
{
    global $passed, $failed;
    if ($ok === null) {
        $ok = $got === $want;
    }
    if ($ok) {
        $passed++;
        echo "PASS $what\n";
    } else {
        $failed++;
        echo "FAIL $what: got " . var_export($got, true) . ", want " .
             var_export($want, true) . "\n";
    }
}

/* get() as a value, null for a miss, or "ERROR: ..." for a failure. */
function fetch($m, $key)
{
    $v = $m->get($key);
    if ($v !== false) {
        return $v;
    }
    if ($m->getResultCode() === Memcached::RES_NOTFOUND) {
        return null;
    }
    return 'ERROR: ' . $m->getResultMessage();
}

function store($m, $key, $value)
{
    return $m->set($key, $value) ? true : 'ERROR: ' . $m->getResultMessage();
}

$m = new Memcached();
$m->setOption(Memcached::OPT_BINARY_PROTOCOL, false);
$m->setOption(Memcached::OPT_NO_BLOCK, false);
$m->setOption(Memcached::OPT_NOREPLY, false);
$m->setOption(Memcached::OPT_COMPRESSION, false);
$m->setOption(Memcached::OPT_CONNECT_TIMEOUT, 5000);
$m->setOption(Memcached::OPT_POLL_TIMEOUT, 10000);
$m->setOption(Memcached::OPT_RECV_TIMEOUT, 10000000);
$m->setOption(Memcached::OPT_SEND_TIMEOUT, 10000000);
if (!$m->addServer($host, $port)) {
    fwrite(STDERR, "addServer failed\n");
    exit(2);
}
$q = sprintf('php_memcached_%d_%d', getmypid(), time());

if ($memcached_mode) {
    expect('set', store($m, $q, 'one'), true);
    expect('get', fetch($m, $q), 'one');
    expect('set a key with options', store($m, "$q/open", 'x'), true);
    expect('get a key with options', fetch($m, "$q/t=300/open"), null);
    expect('get it back', fetch($m, "$q/open"), 'x');
    expect('delete', $m->delete($q), true);
    expect('get a missing key gives null', fetch($m, $q), null);
} else {
    foreach (['one', 'two', 'three'] as $v) {
        expect("set $v", store($m, $q, $v), true);
    }
    $got = [fetch($m, $q), fetch($m, $q), fetch($m, $q)];
    expect('three gets in FIFO order', $got, ['one', 'two', 'three']);
    expect('empty queue gives null', fetch($m, $q), null);

    expect('set for a reliable read', store($m, $q, 'reliable'), true);
    expect('get q/open returns the item', fetch($m, "$q/open"), 'reliable');
    expect('get q/close answers nothing', fetch($m, "$q/close"), null);
    expect('the closed item is gone', fetch($m, $q), null);

    expect('set for an aborted read', store($m, $q, 'retry'), true);
    expect('get q/open again', fetch($m, "$q/open"), 'retry');
    expect('get q/abort answers nothing', fetch($m, "$q/abort"), null);
    expect('the aborted item comes back', fetch($m, $q), 'retry');

    $t0 = microtime(true);
    $got = fetch($m, "$q/t=300");
    $waited = microtime(true) - $t0;
    expect(sprintf('get q/t=300 waits %.3fs, then null', $waited), $got, null,
           $got === null && $waited >= 0.25);
    expect('get on an empty queue gives null', fetch($m, $q), null);

    /* libmemcached reads the version first and takes a major version of
     * 0 for a failed read: getVersion() and getStats() were false. */
    $v = $m->getVersion();
    $vs = is_array($v) ? (string)reset($v) : 'ERROR: ' . $m->getResultMessage();
    expect("getVersion ($vs)", (bool)preg_match('/^[1-9][0-9]*\.[0-9]+\.[0-9]+$/', $vs), true);
    $st = $m->getStats();
    $one = is_array($st) ? reset($st) : null;
    expect('getStats has curr_items', is_array($one) && array_key_exists('curr_items', $one)
           ? true : 'ERROR: ' . $m->getResultMessage(), true);
}
$m->quit();
echo "$passed passed, $failed failed\n";
exit($failed || !$passed ? 1 : 0);
