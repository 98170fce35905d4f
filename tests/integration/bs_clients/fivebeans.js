#!/usr/bin/env node
/*
 * A beanstalk server through the npm `fivebeans` client (1.5.0, installed by
 * `npm ci` in ./node, next to this file), the callback client most Node
 * producers and workers were written against.
 *
 * Usage: node fivebeans.js HOST PORT
 *
 * Runs the same checks against beanstalkd 1.12 and tubed (the suite runs
 * both): producer calls (use, put with pri/delay/ttr, peek*), worker calls
 * (watch/ignore, reserve, reserve-with-timeout 0, 1 and 0.5, delete, release
 * with a delay, bury, kick, kick-job, touch), stats/stats-job/stats-tube,
 * list-tubes*, pause-tube, bodies (all 256 byte values, CR LF inside, empty,
 * 60 KiB, one byte over 65535), the error replies NOT_FOUND, NOT_IGNORED,
 * TIMED_OUT, DEADLINE_SOON, JOB_TOO_BIG, and the library's FiveBeansWorker
 * job runner. Prints one line per check and then "N passed, N failed"; exits
 * non-zero on any failure.
 *
 * Client quirks handled here:
 * - Callbacks: each call is wrapped in a Promise and awaited, so a worker's
 *   steps go out one after the other. An error reaches the callback as the
 *   reply's first word ('NOT_FOUND'), never as an Error.
 * - Replies with a YAML body are parsed by js-yaml 3.6: a tube named only
 *   with digits would come back a number, so the tube names here have
 *   letters.
 * - Counts (watch, ignore, kick) come back as the reply's text ('2'),
 *   ids too; only YAML bodies give numbers.
 * - delete is destroy() (a reserved word in JavaScript).
 * - FiveBeansWorker reserves with a timeout (1 s here, so stop() takes
 *   effect within a second) and emits 'warning' for jobs it buries; its
 *   'error' must have a listener.
 * - A blocked reserve holds its connection: the worker that waits has a
 *   client of its own, as a real worker does.
 */
'use strict';

const path = require('path');
const FiveBeans = require(path.join(__dirname, 'node', 'node_modules', 'fivebeans'));
const t = require('./common');

const { host, port, tube } = t.args('fivebeans.js');

function connect() {
  return new Promise((resolve, reject) => {
    const c = new FiveBeans.client(host, port);
    c.on('connect', () => resolve(c)).on('error', reject).connect();
  });
}

// Call a client method; resolves to { err, res: [values...] }.
function call(c, method, ...a) {
  return new Promise((resolve) => {
    c[method](...a, (err, ...res) => resolve({ err, res }));
  });
}

async function ok(c, method, ...a) {
  const r = await call(c, method, ...a);
  if (r.err) throw new Error(method + ' failed: ' + r.err);
  return r.res;
}

// put and reserve one body; true if it comes back byte for byte.
async function roundTrip(c, w, name, body) {
  const [id] = await ok(c, 'put', 0, 0, 60, body);
  const r = await call(w, 'reserve_with_timeout', 0);
  t.same(name + ': reserved the job put', r.err ? r.err : r.res[0], id);
  t.same(name + ': body comes back byte for byte', r.res[1], body);
  await ok(w, 'destroy', id);
}

async function producerAndPeeks(c) {
  t.same('use', await ok(c, 'use', tube), [tube]);
  t.same('list-tube-used', await ok(c, 'list_tube_used'), [tube]);
  const [a] = await ok(c, 'put', 10, 0, 30, 'second by priority');
  const [b] = await ok(c, 'put', 5, 0, 30, 'first by priority');
  const [d] = await ok(c, 'put', 0, 60, 30, 'delayed a minute');
  const pr = await call(c, 'peek_ready');
  t.same('peek-ready gives the most urgent job', [pr.err, pr.res[0], String(pr.res[1])],
         [null, b, 'first by priority']);
  const pd = await call(c, 'peek_delayed');
  t.same('peek-delayed', [pd.err, pd.res[0]], [null, d]);
  const pb = await call(c, 'peek_buried');
  t.same('peek-buried on a tube with none is NOT_FOUND', pb.err, 'NOT_FOUND');
  const pk = await call(c, 'peek', a);
  t.same('peek by id', [pk.err, pk.res[0], String(pk.res[1])], [null, a, 'second by priority']);
  const nf = await call(c, 'peek', 999999999);
  t.same('peek of an unknown id is NOT_FOUND', nf.err, 'NOT_FOUND');
  const [sj] = await ok(c, 'stats_job', d);
  t.same('stats-job of a delayed job', [sj.id, sj.tube, sj.state, sj.pri, sj.delay, sj.ttr],
         [Number(d), tube, 'delayed', 0, 60, 30]);
  const [st] = await ok(c, 'stats_tube', tube);
  t.same('stats-tube counts', [st.name, st['current-jobs-ready'], st['current-jobs-delayed'],
                               st['current-jobs-urgent'], st['total-jobs']], [tube, 2, 1, 2, 3]);
  for (const id of [a, b, d]) await ok(c, 'destroy', id);
}

async function watching(w) {
  t.same('watch', await ok(w, 'watch', tube), ['2']);
  t.same('ignore default', await ok(w, 'ignore', 'default'), ['1']);
  const [watched] = await ok(w, 'list_tubes_watched');
  t.same('list-tubes-watched', watched, [tube]);
  const ni = await call(w, 'ignore', tube);
  t.same('ignoring the last watched tube is NOT_IGNORED', ni.err, 'NOT_IGNORED');
}

async function workerCycle(c, w) {
  const to0 = await call(w, 'reserve_with_timeout', 0);
  t.same('reserve-with-timeout 0 on an empty tube is TIMED_OUT', to0.err, 'TIMED_OUT');
  const to1 = await call(w, 'reserve_with_timeout', 1);
  t.same('reserve-with-timeout 1 on an empty tube is TIMED_OUT', to1.err, 'TIMED_OUT');
  // A JavaScript number goes out as printed ("0.5"); 1.12 drops the fraction.
  const toh = await call(w, 'reserve_with_timeout', 0.5);
  t.same('reserve-with-timeout 0.5 on an empty tube is TIMED_OUT', toh.err, 'TIMED_OUT');

  // A worker blocked in reserve gets the job a producer puts later.
  const waiting = call(w, 'reserve');
  await t.sleep(100);
  const [id] = await ok(c, 'put', 7, 0, 120, 'work item');
  const got = await waiting;
  t.same('a blocked reserve gets the job put after it', [got.err, got.res[0], String(got.res[1])],
         [null, id, 'work item']);
  const [sj] = await ok(c, 'stats_job', id);
  t.same('stats-job of the reserved job', [sj.state, sj.reserves, sj.pri, sj.ttr],
         ['reserved', 1, 7, 120]);
  t.same('touch', (await call(w, 'touch', id)).err, null);
  t.same('touch by another connection is NOT_FOUND', (await call(c, 'touch', id)).err, 'NOT_FOUND');
  t.same('delete of a job another connection reserved is NOT_FOUND',
         (await call(c, 'destroy', id)).err, 'NOT_FOUND');
  t.same('release by another connection is NOT_FOUND',
         (await call(c, 'release', id, 0, 0)).err, 'NOT_FOUND');

  // release with a delay: delayed, then ready again.
  t.same('release with a delay', (await call(w, 'release', id, 3, 1)).err, null);
  const [sd] = await ok(w, 'stats_job', id);
  t.same('released job is delayed with its new priority', [sd.state, sd.pri, sd.releases],
         ['delayed', 3, 1]);
  const again = await call(w, 'reserve_with_timeout', 10);
  t.same('the released job comes back after its delay', [again.err, again.res[0]], [null, id]);

  // bury, kick, bury, kick-job.
  t.same('bury', (await call(w, 'bury', id, 9)).err, null);
  const pb = await call(c, 'peek_buried');
  t.same('peek-buried', [pb.err, pb.res[0]], [null, id]);
  t.same('kick 10 kicks the one buried job', await ok(c, 'kick', 10), ['1']);
  const r2 = await call(w, 'reserve_with_timeout', 0);
  t.same('the kicked job is ready', [r2.err, r2.res[0]], [null, id]);
  await ok(w, 'bury', id, 9);
  t.same('kick-job of a buried job', (await call(c, 'kick_job', id)).err, null);
  t.same('kick-job of a ready job is NOT_FOUND', (await call(c, 'kick_job', id)).err, 'NOT_FOUND');
  t.same('bury of a job not reserved is NOT_FOUND', (await call(w, 'bury', id, 0)).err, 'NOT_FOUND');
  t.same('delete', (await call(w, 'destroy', id)).err, null);
  t.same('delete again is NOT_FOUND', (await call(w, 'destroy', id)).err, 'NOT_FOUND');
  t.same('kick-job of a deleted job is NOT_FOUND', (await call(c, 'kick_job', id)).err, 'NOT_FOUND');

  // DEADLINE_SOON: the reserve waits until the reserved job's last second
  // (ttr 2, not 1, so a slow machine cannot let the job expire first).
  const [soon] = await ok(c, 'put', 0, 0, 2, 'short ttr');
  await ok(w, 'reserve_with_timeout', 0);
  const ds = await call(w, 'reserve_with_timeout', 5);
  t.same('reserve with a job about to time out is DEADLINE_SOON', ds.err, 'DEADLINE_SOON');
  await ok(w, 'destroy', soon);
}

async function bodies(c, w) {
  await roundTrip(c, w, 'all 256 byte values', t.bodies.allBytes);
  await roundTrip(c, w, 'CR LF inside a body', t.bodies.crlf);
  await roundTrip(c, w, 'empty body', t.bodies.empty);
  await roundTrip(c, w, '60 KiB body', t.bodies.big);
  const tb = await call(c, 'put', 0, 0, 60, t.bodies.tooBig);
  t.same('a body over the max job size is JOB_TOO_BIG', tb.err, 'JOB_TOO_BIG');
  t.same('the connection works after JOB_TOO_BIG', await ok(c, 'list_tube_used'), [tube]);
  const to = await call(w, 'reserve_with_timeout', 0);
  t.same('nothing was stored by the refused put', to.err, 'TIMED_OUT');
}

async function serverInfo(c, w) {
  const [s] = await ok(c, 'stats');
  t.check('stats', typeof s.version === 'string' && s['current-connections'] >= 2 &&
          typeof s.pid === 'number' && s['cmd-put'] >= 1, JSON.stringify(s).slice(0, 300));
  const [tubes] = await ok(c, 'list_tubes');
  t.check('list-tubes', Array.isArray(tubes) && tubes.includes('default') && tubes.includes(tube),
          JSON.stringify(tubes));
  const nst = await call(c, 'stats_tube', tube + '-none');
  t.same('stats-tube of an unknown tube is NOT_FOUND', nst.err, 'NOT_FOUND');
  const nsj = await call(c, 'stats_job', 999999999);
  t.same('stats-job of an unknown id is NOT_FOUND', nsj.err, 'NOT_FOUND');

  const [id] = await ok(c, 'put', 0, 0, 60, 'while paused');
  t.same('pause-tube', (await call(c, 'pause_tube', tube, 30)).err, null);
  const [st] = await ok(c, 'stats_tube', tube);
  t.same('stats-tube of the paused tube', [st.pause, st['current-jobs-ready']], [30, 1]);
  const p0 = await call(w, 'reserve_with_timeout', 0);
  t.same('a paused tube gives no job', p0.err, 'TIMED_OUT');
  t.same('pause-tube 0 unpauses', (await call(c, 'pause_tube', tube, 0)).err, null);
  const p1 = await call(w, 'reserve_with_timeout', 5);
  t.same('the job comes after unpausing', [p1.err, p1.res[0]], [null, id]);
  await ok(w, 'destroy', id);
  const np = await call(c, 'pause_tube', tube + '-none', 1);
  t.same('pause-tube of an unknown tube is NOT_FOUND', np.err, 'NOT_FOUND');
}

// FiveBeansWorker, the library's job runner: JSON jobs {type, payload}
// go to the handler of their type; 'success' deletes, anything else and
// jobs it cannot run are buried. Runs until the tube is empty.
async function jobRunner(c) {
  const wtube = tube + '-worker';
  const seen = [];
  const handler = {
    type: 'sum',
    work(payload, done) {
      seen.push(payload.a + payload.b);
      done(payload.a + payload.b === 3 ? 'success' : 'bury');
    },
  };
  await ok(c, 'use', wtube);
  const jobs = [{ type: 'sum', payload: { a: 1, b: 2 } }, { type: 'sum', payload: { a: 2, b: 2 } },
                { type: 'nobody', payload: {} }, 'not json {'];
  for (const j of jobs) await ok(c, 'put', 0, 0, 60, typeof j === 'string' ? j : JSON.stringify(j));
  const worker = new FiveBeans.worker({ id: 'w1', host, port, handlers: { sum: handler },
                                        ignoreDefault: true, timeout: 1 });
  const events = { deleted: 0, buried: 0 };
  worker.on('job.deleted', () => events.deleted++);
  worker.on('job.buried', () => events.buried++);
  worker.on('warning', () => {});
  worker.on('error', () => {});
  const stopped = new Promise((resolve) => worker.on('stopped', resolve));
  worker.start([wtube]);
  for (let i = 0; i < 200 && events.deleted + events.buried < 4; i++) await t.sleep(25);
  worker.stop();
  await stopped;
  t.same('FiveBeansWorker ran the jobs (1 deleted, 3 buried)', [seen, events.deleted, events.buried],
         [[3, 4], 1, 3]);
  const [st] = await ok(c, 'stats_tube', wtube);
  t.same('stats-tube after the runner', [st['current-jobs-buried'], st['current-jobs-ready'],
                                         st['cmd-delete']], [3, 0, 1]);
  await ok(c, 'use', tube);
}

async function main() {
  const c = await connect();      // the producer
  const w = await connect();      // the worker
  try {
    await producerAndPeeks(c);
    await watching(w);
    await workerCycle(c, w);
    await bodies(c, w);
    await serverInfo(c, w);
    await jobRunner(c);
  } catch (e) {
    t.check('no unexpected error', false, e && e.stack);
  }
  c.end();
  w.end();
  t.finish();
}

main();
