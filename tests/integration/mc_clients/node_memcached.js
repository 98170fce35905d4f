#!/usr/bin/env node
/*
 * tubed's kestrel listener through the npm `memcached` client (2.2.2,
 * installed by `npm ci` in ./node, next to this file).
 *
 * Usage: node node_memcached.js HOST PORT [--memcached]
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
 * - Callbacks: each call is wrapped in a Promise and awaited, so the
 *   commands go out one after the other, as a queue consumer needs.
 * - A pool of one connection: with the default pool (10) a get q/close
 *   could leave on another connection than its get q/open, and close
 *   nothing (an open read belongs to its connection).
 * - idle is raised above any t= wait (an idle connection is dropped from
 *   the pool, which would give an open read back); keyCompression off, so
 *   a long key is never replaced by its md5.
 * - Strings are stored with flags 0 (objects, numbers and Buffers set
 *   flags, which tubed drops), and a miss is `undefined`.
 * - end() closes the pool, or node would wait for the idle timer.
 */
'use strict';

const path = require('path');
const Memcached = require(path.join(__dirname, 'node', 'node_modules', 'memcached'));

const argv = process.argv.slice(2);
if (argv.length < 2) {
  console.error('usage: node_memcached.js HOST PORT [--memcached]');
  process.exit(2);
}
const location = argv[0] + ':' + argv[1];
const memcachedMode = argv.slice(2).includes('--memcached');

let passed = 0;
let failed = 0;

function expect(what, got, want, ok) {
  if (ok === undefined) ok = JSON.stringify(got) === JSON.stringify(want);
  if (ok) {
    passed++;
    console.log('PASS ' + what);
  } else {
    failed++;
    console.log('FAIL ' + what + ': got ' + JSON.stringify(got) +
                ', want ' + JSON.stringify(want));
  }
}

// The client's callbacks as promises; an error becomes an 'ERROR: ...'
// value so the check that sees it says why.
function call(fn) {
  return new Promise((resolve) => {
    fn((err, data) => resolve(err ? 'ERROR: ' + (err.message || err) : data));
  });
}

async function queueChecks(mc, q) {
  const get = (key) => call((cb) => mc.get(key, cb)).then((v) => (v === undefined ? null : v));
  const set = (key, value) => call((cb) => mc.set(key, value, 0, cb));

  for (const v of ['one', 'two', 'three']) expect('set ' + v, await set(q, v), true);
  const got = [await get(q), await get(q), await get(q)];
  expect('three gets in FIFO order', got, ['one', 'two', 'three']);
  expect('empty queue gives null', await get(q), null);

  expect('set for a reliable read', await set(q, 'reliable'), true);
  expect('get q/open returns the item', await get(q + '/open'), 'reliable');
  expect('get q/close answers nothing', await get(q + '/close'), null);
  expect('the closed item is gone', await get(q), null);

  expect('set for an aborted read', await set(q, 'retry'), true);
  expect('get q/open again', await get(q + '/open'), 'retry');
  expect('get q/abort answers nothing', await get(q + '/abort'), null);
  expect('the aborted item comes back', await get(q), 'retry');

  const t0 = Date.now();
  const waited = await get(q + '/t=300');
  const secs = (Date.now() - t0) / 1000;
  expect('get q/t=300 waits ' + secs.toFixed(3) + 's, then null', waited, null,
         waited === null && secs >= 0.25);
  expect('get on an empty queue gives null', await get(q), null);
}

async function memcachedChecks(mc, q) {
  const get = (key) => call((cb) => mc.get(key, cb)).then((v) => (v === undefined ? null : v));
  const set = (key, value) => call((cb) => mc.set(key, value, 0, cb));

  expect('set', await set(q, 'one'), true);
  expect('get', await get(q), 'one');
  expect('set a key with options', await set(q + '/open', 'x'), true);
  expect('get a key with options', await get(q + '/t=300/open'), null);
  expect('get it back', await get(q + '/open'), 'x');
  expect('delete', await call((cb) => mc.del(q, cb)), true);
  expect('get a missing key gives null', await get(q), null);
}

async function main() {
  const mc = new Memcached(location, {
    poolSize: 1,
    retries: 0,
    timeout: 5000,
    idle: 60000,
    keyCompression: false,
  });
  const q = 'node_memcached_' + process.pid + '_' + Math.floor(Date.now() / 1000);

  if (memcachedMode) await memcachedChecks(mc, q);
  else await queueChecks(mc, q);
  mc.end();
  console.log(passed + ' passed, ' + failed + ' failed');
  process.exit(failed || !passed ? 1 : 0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
