#!/usr/bin/env node
/*
 * A beanstalk server through the npm `jackd` client (2.2.2, installed by
 * `npm ci` in ./node, next to this file), the promise client with no
 * dependencies.
 *
 * Usage: node jackd.js HOST PORT
 *
 * Runs the same checks against beanstalkd 1.12 and tubed (the suite runs
 * both): producer calls (use, put with priority/delay/ttr, peek*), worker
 * calls (watch/ignore, reserve, reserveWithTimeout 0, 1 and 0.5, delete,
 * release with a delay, bury, kick, kickJob, touch),
 * stats/statsJob/statsTube, listTubes/listTubesWatched/listTubeUsed,
 * pauseTube, bodies (all 256 byte values, CR LF inside, empty, 60 KiB, one
 * byte over 65535), and the error replies NOT_FOUND, NOT_IGNORED, TIMED_OUT,
 * DEADLINE_SOON, JOB_TOO_BIG. Prints one line per check and then "N passed,
 * N failed"; exits non-zero on any failure.
 *
 * Client quirks handled here:
 * - put() JSON-encodes every object, a Buffer included (a Buffer goes out
 *   as '{"type":"Buffer","data":[...]}'), and a string as UTF-8; put('')
 *   fails its own assert. So the all-bytes and the empty body are put by a
 *   second producer on a raw socket (common.rawPut) and read back through
 *   jackd's reserve, which does hand back the bytes as a Buffer.
 * - pauseTube() sends its command without the CR LF, so the server waits
 *   for the rest of the line and the promise never settles; the script
 *   writes the missing CR LF itself with the client's write().
 * - kick(0) fails the client's own assert; release(id) and bury(id) send
 *   priority 0 unless one is given.
 * - YAML replies (stats*, listTubes*) come back as text; common.yamlDict/
 *   yamlList read them. Ids come back as strings, counts as numbers.
 * - Error replies are thrown as Error objects whose message is the reply
 *   line ('NOT_FOUND'); statsJob/statsTube do not list NOT_FOUND as an
 *   error reply, so theirs is an InvalidResponseError ('Unexpected
 *   response: NOT_FOUND', the line in .response).
 * - A blocked reserve holds its connection: the worker that waits has a
 *   client of its own, as a real worker does.
 */
'use strict';

const path = require('path');
const Jackd = require(path.join(__dirname, 'node', 'node_modules', 'jackd'));
const t = require('./common');

const { host, port, tube } = t.args('jackd.js');

async function connect() {
  const c = new Jackd();
  await c.connect({ host, port });
  return c;
}

// The error reply a call gives, or 'no error'. A reply the client did not
// expect is an InvalidResponseError (not exported) holding the line in
// .response.
async function err(p) {
  try {
    await p;
    return 'no error';
  } catch (e) {
    return typeof e.response === 'string' ? e.response : t.errText(e);
  }
}

async function roundTrip(c, w, name, body, viaRaw) {
  let id;
  if (viaRaw) {
    const line = await t.rawPut(host, port, tube, body);
    id = line.split(' ')[1];
  } else {
    id = await c.put(body.toString('latin1'));
  }
  let job;
  try {
    job = await w.reserveWithTimeout(0);
  } catch (e) {
    job = { id: t.errText(e) };
  }
  t.same(name + ': reserved the job put', job.id, id);
  t.same(name + ': body comes back byte for byte', job.payload, body);
  await w.delete(id);
}

async function producerAndPeeks(c) {
  t.same('use', await c.use(tube), tube);
  t.same('listTubeUsed', await c.listTubeUsed(), tube);
  const a = await c.put('second by priority', { priority: 10, ttr: 30 });
  const b = await c.put('first by priority', { priority: 5, ttr: 30 });
  const d = await c.put('delayed a minute', { delay: 60, ttr: 30 });
  const pr = await c.peekReady();
  t.same('peekReady gives the most urgent job', [pr.id, String(pr.payload)], [b, 'first by priority']);
  t.same('peekDelayed', (await c.peekDelayed()).id, d);
  t.same('peekBuried on a tube with none is NOT_FOUND', await err(c.peekBuried()), 'NOT_FOUND');
  const pk = await c.peek(a);
  t.same('peek by id', [pk.id, String(pk.payload)], [a, 'second by priority']);
  t.same('peek of an unknown id is NOT_FOUND', await err(c.peek(999999999)), 'NOT_FOUND');
  const sj = t.yamlDict(await c.statsJob(d));
  t.same('statsJob of a delayed job', [sj.id, sj.tube, sj.state, sj.pri, sj.delay, sj.ttr],
         [Number(d), tube, 'delayed', 0, 60, 30]);
  const st = t.yamlDict(await c.statsTube(tube));
  t.same('statsTube counts', [st.name, st['current-jobs-ready'], st['current-jobs-delayed'],
                              st['current-jobs-urgent'], st['total-jobs']], [tube, 2, 1, 2, 3]);
  for (const id of [a, b, d]) await c.delete(id);
}

async function watching(w) {
  t.same('watch', await w.watch(tube), 2);
  t.same('ignore default', await w.ignore('default'), 1);
  t.same('listTubesWatched', t.yamlList(await w.listTubesWatched()), [tube]);
  t.same('ignoring the last watched tube is NOT_IGNORED', await err(w.ignore(tube)), 'NOT_IGNORED');
}

async function workerCycle(c, w) {
  t.same('reserveWithTimeout 0 on an empty tube is TIMED_OUT',
         await err(w.reserveWithTimeout(0)), 'TIMED_OUT');
  t.same('reserveWithTimeout 1 on an empty tube is TIMED_OUT',
         await err(w.reserveWithTimeout(1)), 'TIMED_OUT');
  // A JavaScript number goes out as printed ("0.5"); 1.12 drops the fraction.
  t.same('reserveWithTimeout 0.5 on an empty tube is TIMED_OUT',
         await err(w.reserveWithTimeout(0.5)), 'TIMED_OUT');

  const waiting = w.reserve();
  await t.sleep(100);
  const id = await c.put('work item', { priority: 7, ttr: 120 });
  const got = await waiting;
  t.same('a blocked reserve gets the job put after it', [got.id, String(got.payload)],
         [id, 'work item']);
  const sj = t.yamlDict(await w.statsJob(id));
  t.same('statsJob of the reserved job', [sj.state, sj.reserves, sj.pri, sj.ttr],
         ['reserved', 1, 7, 120]);
  t.same('touch', await err(w.touch(id)), 'no error');
  t.same('touch by another connection is NOT_FOUND', await err(c.touch(id)), 'NOT_FOUND');
  t.same('delete of a job another connection reserved is NOT_FOUND',
         await err(c.delete(id)), 'NOT_FOUND');
  t.same('release by another connection is NOT_FOUND', await err(c.release(id)), 'NOT_FOUND');

  t.same('release with a delay', await err(w.release(id, { priority: 3, delay: 1 })), 'no error');
  const sd = t.yamlDict(await w.statsJob(id));
  t.same('released job is delayed with its new priority', [sd.state, sd.pri, sd.releases],
         ['delayed', 3, 1]);
  const again = await w.reserveWithTimeout(10);
  t.same('the released job comes back after its delay', again.id, id);

  t.same('bury', await err(w.bury(id, 9)), 'no error');
  t.same('peekBuried', (await c.peekBuried()).id, id);
  t.same('kick 10 kicks the one buried job', await c.kick(10), 1);
  t.same('the kicked job is ready', (await w.reserveWithTimeout(0)).id, id);
  await w.bury(id, 9);
  t.same('kickJob of a buried job', await err(c.kickJob(id)), 'no error');
  t.same('kickJob of a ready job is NOT_FOUND', await err(c.kickJob(id)), 'NOT_FOUND');
  t.same('bury of a job not reserved is NOT_FOUND', await err(w.bury(id)), 'NOT_FOUND');
  t.same('delete', await err(w.delete(id)), 'no error');
  t.same('delete again is NOT_FOUND', await err(w.delete(id)), 'NOT_FOUND');
  t.same('kickJob of a deleted job is NOT_FOUND', await err(c.kickJob(id)), 'NOT_FOUND');

  // DEADLINE_SOON: the reserve waits until the reserved job's last second
  // (ttr 2, not 1, so a slow machine cannot let the job expire first).
  const soon = await c.put('short ttr', { ttr: 2 });
  await w.reserveWithTimeout(0);
  t.same('reserve with a job about to time out is DEADLINE_SOON',
         await err(w.reserveWithTimeout(5)), 'DEADLINE_SOON');
  await w.delete(soon);
}

async function bodies(c, w) {
  await roundTrip(c, w, 'all 256 byte values', t.bodies.allBytes, true);
  await roundTrip(c, w, 'CR LF inside a body', t.bodies.crlf, false);
  await roundTrip(c, w, 'empty body', t.bodies.empty, true);
  await roundTrip(c, w, '60 KiB body', t.bodies.big, false);
  t.same('a body over the max job size is JOB_TOO_BIG',
         await err(c.put(t.bodies.tooBig.toString('latin1'))), 'JOB_TOO_BIG');
  t.same('the connection works after JOB_TOO_BIG', await c.listTubeUsed(), tube);
  t.same('nothing was stored by the refused put', await err(w.reserveWithTimeout(0)), 'TIMED_OUT');
}

// pauseTube() leaves off the CR LF (see the top comment): send it.
async function pauseTube(c, name, delay) {
  const p = c.pauseTube(name, { delay });
  await c.write(Buffer.from('\r\n'));
  return p;
}

async function serverInfo(c, w) {
  const s = t.yamlDict(await c.stats());
  t.check('stats', typeof s.version === 'string' && s['current-connections'] >= 2 &&
          typeof s.pid === 'number' && s['cmd-put'] >= 1, JSON.stringify(s).slice(0, 300));
  const tubes = t.yamlList(await c.listTubes());
  t.check('listTubes', tubes.includes('default') && tubes.includes(tube), JSON.stringify(tubes));
  t.same('statsTube of an unknown tube is NOT_FOUND',
         await err(c.statsTube(tube + '-none')), 'NOT_FOUND');
  t.same('statsJob of an unknown id is NOT_FOUND', await err(c.statsJob(999999999)), 'NOT_FOUND');

  const id = await c.put('while paused');
  t.same('pauseTube', await err(pauseTube(c, tube, 30)), 'no error');
  const st = t.yamlDict(await c.statsTube(tube));
  t.same('statsTube of the paused tube', [st.pause, st['current-jobs-ready']], [30, 1]);
  t.same('a paused tube gives no job', await err(w.reserveWithTimeout(0)), 'TIMED_OUT');
  t.same('pauseTube 0 unpauses', await err(pauseTube(c, tube, 0)), 'no error');
  t.same('the job comes after unpausing', (await w.reserveWithTimeout(5)).id, id);
  await w.delete(id);
  t.same('pauseTube of an unknown tube is NOT_FOUND',
         await err(pauseTube(c, tube + '-none', 1)), 'NOT_FOUND');
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
  } catch (e) {
    t.check('no unexpected error', false, e && e.stack);
  }
  if (c) await c.quit();
  if (w) await w.quit();
  t.finish();
}

main();
