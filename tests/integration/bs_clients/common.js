/*
 * Shared by the beanstalk client scripts in this folder (not a client):
 * command-line parsing, PASS/FAIL bookkeeping, the bodies every script
 * sends, a tiny reader for the flat YAML that stats and list-tubes return
 * (for clients that hand back the raw text), and a raw socket for the few
 * steps a client's API cannot express (each use is named in the script's
 * top comment).
 *
 * Exports: args(), check(name, cond, detail), same(name, got, want),
 * finish(), bodies, yamlDict(text), yamlList(text), sleep(ms),
 * errText(err), rawPut(host, port, tube, body, opts).
 */
'use strict';

const net = require('net');

let passed = 0;
let failed = 0;

function args(name) {
  const argv = process.argv.slice(2);
  if (argv.length < 2) {
    console.error('usage: ' + name + ' HOST PORT');
    process.exit(2);
  }
  // Every script's work is in its own tube: a rerun against a long-lived
  // server, or two scripts at once, never see each other's jobs.
  const tube = name.replace(/\W/g, '') + '-' + process.pid + '-' + Date.now();
  return { host: argv[0], port: parseInt(argv[1], 10), tube };
}

function check(name, cond, detail) {
  if (cond) {
    passed++;
    console.log('PASS ' + name);
  } else {
    failed++;
    console.log('FAIL ' + name + (detail === undefined ? '' : ': ' + detail));
  }
}

function show(v) {
  if (Buffer.isBuffer(v)) {
    return v.length > 40 ? '<Buffer ' + v.length + ' bytes>' : '<Buffer ' + v.toString('hex') + '>';
  }
  return JSON.stringify(v);
}

function same(name, got, want) {
  const ok = Buffer.isBuffer(want) ? Buffer.isBuffer(got) && got.equals(want)
    : JSON.stringify(got) === JSON.stringify(want);
  check(name, ok, 'got ' + show(got) + ', want ' + show(want));
}

function finish() {
  console.log(passed + ' passed, ' + failed + ' failed');
  process.exitCode = failed === 0 && passed > 0 ? 0 : 1;
}

const allBytes = Buffer.alloc(256);
for (let i = 0; i < 256; i++) allBytes[i] = i;

const bodies = {
  allBytes,                                               // 0x00..0xff
  crlf: Buffer.from('line one\r\nline two\r\n\r\nRESERVED 1 2\r\n'),
  empty: Buffer.alloc(0),
  big: Buffer.alloc(60 * 1024, 'tubed-60KiB/'),           // under 1.12's -z 65535
  tooBig: Buffer.alloc(65536, 'x'),                       // one byte over it
};

// The flat YAML beanstalk sends: "key: value" lines or "- item" lines
// after a "---" line. Numbers become numbers, a double-quoted scalar (1.13
// and tubed quote the tube name in stats-tube and stats-job; 1.12 does
// not) loses its quotes as any YAML parser reads it, the rest stays text.
function yamlValue(s) {
  if (/^-?\d+(\.\d+)?$/.test(s)) return Number(s);
  const q = /^"((?:[^"\\]|\\.)*)"$/.exec(s);
  return q ? q[1].replace(/\\(.)/g, '$1') : s;
}

function yamlDict(text) {
  const out = {};
  for (const line of text.split('\n')) {
    const m = /^([\w-]+): ?(.*)$/.exec(line);
    if (m) out[m[1]] = yamlValue(m[2]);
  }
  return out;
}

function yamlList(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('- ')) out.push(line.slice(2));
  }
  return out;
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// The reply word of a client's error: a string (fivebeans) or an Error
// whose message is the reply line (jackd).
function errText(err) {
  if (err === null || err === undefined) return 'no error';
  if (typeof err === 'string') return err;
  return String(err.message || err).trim();
}

// put one job on a connection of its own, as a producer with another
// client would: resolves to the reply line ("INSERTED 7").
function rawPut(host, port, tube, body, opts) {
  const o = Object.assign({ pri: 0, delay: 0, ttr: 60 }, opts || {});
  return new Promise((resolve, reject) => {
    const sock = net.createConnection(port, host);
    let got = Buffer.alloc(0);
    const want = 2;                       // USING line, then the put's reply
    sock.on('error', reject);
    sock.on('data', (d) => {
      got = Buffer.concat([got, d]);
      const lines = got.toString('latin1').split('\r\n');
      if (lines.length > want) {
        sock.end();
        resolve(lines[want - 1]);
      }
    });
    sock.write(Buffer.concat([
      Buffer.from('use ' + tube + '\r\nput ' + o.pri + ' ' + o.delay + ' ' + o.ttr + ' ' +
                  body.length + '\r\n'),
      body, Buffer.from('\r\n')]));
  });
}

module.exports = { args, check, same, finish, bodies, yamlDict, yamlList, sleep, errText, rawPut };
