#!/usr/bin/env node
/*
 * A beanstalk server through the npm `node-beanstalk` client (1.6.7,
 * installed by `npm ci` in ./node, next to this file), the TypeScript
 * promise client with typed stats (js-yaml 4) and a connection pool.
 *
 * Usage: node node_beanstalk.js HOST PORT
 *
 * Runs the same checks against beanstalkd 1.12 and tubed (the suite runs
 * both): producer calls (use, put with ttr/priority/delay, peek*), worker
 * calls (watch/ignore, reserve, reserveWithTimeout 0, 1 and 0.5, delete,
 * release with a delay, bury, kick, kickJob, touch),
 * stats/statsJob/statsTube, listTubes/listTubesWatched/listTubeUsed,
 * pauseTube, a client from a Pool, bodies (all 256 byte values, CR LF
 * inside, empty, 60 KiB, one byte over 65535), and the error replies
 * NOT_FOUND, NOT_IGNORED, TIMED_OUT, DEADLINE_SOON, JOB_TOO_BIG. Prints one
 * line per check and then "N passed, N failed"; exits non-zero on any
 * failure.
 *
 * Client quirks handled here:
 * - put() serializes with JSON by default; the client is given the
 *   pass-through serializer its README describes (Buffer in, Buffer out),
 *   so bodies go out and come back byte for byte.
 * - put(payload, ttr, priority, delay): ttr comes before priority, and the
 *   defaults are priority 1024 and ttr 30; release(id) also defaults to
 *   priority 1024.
 * - Replies the API expects become values, not errors: NOT_FOUND is null
 *   (peek*, statsJob, statsTube, release) or false (delete, touch, bury,
 *   kickJob, pauseTube), TIMED_OUT is null, NOT_IGNORED is false.
 *   DEADLINE_SOON and JOB_TOO_BIG are thrown as BeanstalkError with the
 *   reply in .code.
 * - The client waits at most dataReadTimeoutMs (1 s by default) for a
 *   body once its header line came; left at the default.
 * - A blocked reserve holds its connection: the worker that waits has a
 *   client of its own, as a real worker does.
 */
'use strict';

const path = require('path');
const nb = require(path.join(__dirname, 'node', 'node_modules', 'node-beanstalk'));
const t = require('./common');

const { host, port, tube } = t.args('node_beanstalk.js');

const raw = { serialize: (b) => b, deserialize: (b) => b };
const options = { host, port, serializer: raw };

async function connect() {
  const c = new nb.Client(options);
  await c.connect();
  return c;
}

// The reply code a call throws, or 'no error'.
async function thrown(p) {
  try {
    await p;
    return 'no error';
  } catch (e) {
    return e.code || String(e);
  }
}

async function roundTrip(c, w, name, body) {
  const put = await c.put(body, 60, 0, 0);
  const job = await w.reserveWithTimeout(0);
  t.same(name + ': reserved the job put', job && job.id, put.id);
  t.same(name + ': body comes back byte for byte', job && job.payload, body);
  await w.delete(put.id);
}

async function producerAndPeeks(c) {
  t.same('use', await c.use(tube), tube);
  t.same('listTubeUsed', await c.listTubeUsed(), tube);
  const a = (await c.put(Buffer.from('second by priority'), 30, 10, 0)).id;
  const b = (await c.put(Buffer.from('first by priority'), 30, 5, 0)).id;
  const d = await c.put(Buffer.from('delayed a minute'), 30, 0, 60);
  t.same('put with a delay says delayed', d.state, nb.BeanstalkJobState.delayed);
  const pr = await c.peekReady();
  t.same('peekReady gives the most urgent job', [pr.id, String(pr.payload)], [b, 'first by priority']);
  t.same('peekDelayed', (await c.peekDelayed()).id, d.id);
  t.same('peekBuried on a tube with none is null (NOT_FOUND)', await c.peekBuried(), null);
  const pk = await c.peek(a);
  t.same('peek by id', [pk.id, String(pk.payload)], [a, 'second by priority']);
  t.same('peek of an unknown id is null (NOT_FOUND)', await c.peek(999999999), null);
  const sj = await c.statsJob(d.id);
  t.same('statsJob of a delayed job', [sj.id, sj.tube, sj.state, sj.pri, sj.delay, sj.ttr],
         [d.id, tube, 'delayed', 0, 60, 30]);
  const st = await c.statsTube(tube);
  t.same('statsTube counts', [st.name, st['current-jobs-ready'], st['current-jobs-delayed'],
                              st['current-jobs-urgent'], st['total-jobs']], [tube, 2, 1, 2, 3]);
  for (const id of [a, b, d.id]) await c.delete(id);
}

async function watching(w) {
  t.same('watch', await w.watch(tube), 2);
  t.same('ignore default', await w.ignore('default'), true);
  t.same('listTubesWatched', await w.listTubesWatched(), [tube]);
  t.same('ignoring the last watched tube is false (NOT_IGNORED)', await w.ignore(tube), false);
}

async function workerCycle(c, w) {
  t.same('reserveWithTimeout 0 on an empty tube is null (TIMED_OUT)',
         await w.reserveWithTimeout(0), null);
  t.same('reserveWithTimeout 1 on an empty tube is null (TIMED_OUT)',
         await w.reserveWithTimeout(1), null);
  // A JavaScript number goes out as printed ("0.5"); 1.12 drops the fraction.
  t.same('reserveWithTimeout 0.5 on an empty tube is null (TIMED_OUT)',
         await w.reserveWithTimeout(0.5), null);

  const waiting = w.reserve();
  await t.sleep(100);
  const id = (await c.put(Buffer.from('work item'), 120, 7, 0)).id;
  const got = await waiting;
  t.same('a blocked reserve gets the job put after it', [got.id, String(got.payload)],
         [id, 'work item']);
  const sj = await w.statsJob(id);
  t.same('statsJob of the reserved job', [sj.state, sj.reserves, sj.pri, sj.ttr],
         ['reserved', 1, 7, 120]);
  t.same('touch', await w.touch(id), true);
  t.same('touch by another connection is false (NOT_FOUND)', await c.touch(id), false);
  t.same('delete of a job another connection reserved is false (NOT_FOUND)',
         await c.delete(id), false);
  t.same('release by another connection is null (NOT_FOUND)', await c.release(id, 0, 0), null);

  t.same('release with a delay', await w.release(id, 3, 1), nb.BeanstalkJobState.delayed);
  const sd = await w.statsJob(id);
  t.same('released job is delayed with its new priority', [sd.state, sd.pri, sd.releases],
         ['delayed', 3, 1]);
  const again = await w.reserveWithTimeout(10);
  t.same('the released job comes back after its delay', again && again.id, id);

  t.same('bury', await w.bury(id, 9), true);
  t.same('peekBuried', (await c.peekBuried()).id, id);
  t.same('kick 10 kicks the one buried job', await c.kick(10), 1);
  const r2 = await w.reserveWithTimeout(0);
  t.same('the kicked job is ready', r2 && r2.id, id);
  await w.bury(id, 9);
  t.same('kickJob of a buried job', await c.kickJob(id), true);
  t.same('kickJob of a ready job is false (NOT_FOUND)', await c.kickJob(id), false);
  t.same('bury of a job not reserved is false (NOT_FOUND)', await w.bury(id, 0), false);
  t.same('delete', await w.delete(id), true);
  t.same('delete again is false (NOT_FOUND)', await w.delete(id), false);
  t.same('kickJob of a deleted job is false (NOT_FOUND)', await c.kickJob(id), false);

  // DEADLINE_SOON: the reserve waits until the reserved job's last second
  // (ttr 2, not 1, so a slow machine cannot let the job expire first).
  const soon = (await c.put(Buffer.from('short ttr'), 2, 0, 0)).id;
  await w.reserveWithTimeout(0);
  t.same('reserve with a job about to time out is DEADLINE_SOON',
         await thrown(w.reserveWithTimeout(5)), 'DEADLINE_SOON');
  await w.delete(soon);
}

async function bodies(c, w) {
  await roundTrip(c, w, 'all 256 byte values', t.bodies.allBytes);
  await roundTrip(c, w, 'CR LF inside a body', t.bodies.crlf);
  await roundTrip(c, w, 'empty body', t.bodies.empty);
  await roundTrip(c, w, '60 KiB body', t.bodies.big);
  t.same('a body over the max job size is JOB_TOO_BIG',
         await thrown(c.put(t.bodies.tooBig, 60, 0, 0)), 'JOB_TOO_BIG');
  t.same('the connection works after JOB_TOO_BIG', await c.listTubeUsed(), tube);
  t.same('nothing was stored by the refused put', await w.reserveWithTimeout(0), null);
}

async function serverInfo(c, w) {
  const s = await c.stats();
  t.check('stats', typeof s.version === 'string' && s['current-connections'] >= 2 &&
          typeof s.pid === 'number' && s['cmd-put'] >= 1, JSON.stringify(s).slice(0, 300));
  const tubes = await c.listTubes();
  t.check('listTubes', tubes.includes('default') && tubes.includes(tube), JSON.stringify(tubes));
  t.same('statsTube of an unknown tube is null (NOT_FOUND)', await c.statsTube(tube + '-none'), null);
  t.same('statsJob of an unknown id is null (NOT_FOUND)', await c.statsJob(999999999), null);

  const id = (await c.put(Buffer.from('while paused'), 60, 0, 0)).id;
  t.same('pauseTube', await c.pauseTube(tube, 30), true);
  const st = await c.statsTube(tube);
  t.same('statsTube of the paused tube', [st.pause, st['current-jobs-ready']], [30, 1]);
  t.same('a paused tube gives no job', await w.reserveWithTimeout(0), null);
  t.same('pauseTube 0 unpauses', await c.pauseTube(tube, 0), true);
  const p1 = await w.reserveWithTimeout(5);
  t.same('the job comes after unpausing', p1 && p1.id, id);
  await w.delete(id);
  t.same('pauseTube of an unknown tube is false (NOT_FOUND)', await c.pauseTube(tube + '-none', 1),
         false);
}

// A producer from a Pool, as a web server would use one.
async function pooled(w) {
  const pool = new nb.Pool({ capacity: 2, clientOptions: options });
  const pc = await pool.connect();
  try {
    await pc.use(tube);
    const id = (await pc.put(Buffer.from('from the pool'), 60, 0, 0)).id;
    const job = await w.reserveWithTimeout(5);
    t.same('a pooled client puts, a worker reserves', [job && job.id, String(job && job.payload)],
           [id, 'from the pool']);
    await w.delete(id);
  } finally {
    pc.releaseClient();
    await pool.disconnect();
  }
}

async function main() {
  let c;
  let w;
  try {
    c = await connect();      // the producer
    w = await connect();      // the worker
    await producerAndPeeks(c);
    await watching(w);
    await workerCycle(c, w);
    await bodies(c, w);
    await serverInfo(c, w);
    await pooled(w);
  } catch (e) {
    t.check('no unexpected error', false, e && e.stack);
  }
  if (c) await c.disconnect();
  if (w) await w.disconnect();
  t.finish();
}

main();
