#!/usr/bin/env python3
"""Hand-rolled mutation testing for tubed.

    python3 tests/mutation/mutate.py MUTANTS.tsv [--only ID ...] [--work DIR]

Each line of MUTANTS.tsv (tab-separated; '#' starts a comment):

    ID  FILE:LINE  OLD  NEW  UNIT[,UNIT]  -k SEL[,SEL]

OLD must occur exactly once on line LINE of FILE; it is replaced by NEW.
UNIT names unit binaries (engine/test_queue) or '-'; SEL names -k filters for
tests/integration/run.py or '-'.

The source tree is never touched: the tool keeps a copy of the worktree
(src, tests, Makefile, ...) in --work (default /tmp/tubed-mut), changes one
file there, builds into that copy's build/ (incremental: one object and the
links), runs the chosen tests, and puts the file back.  A mutant that does not
build cleanly (-Werror) is 'skip'; one whose tests all pass is 'SURVIVED';
otherwise 'killed' with the first failing check named.  Results are appended
to --out (default tests/mutation/results.tsv in the worktree).
"""
import argparse, os, shutil, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sync(work):
    """Make work's copy of the tree equal to the worktree's. Only files
    whose bytes differ are written, and they get a fresh mtime: a copy
    that kept the worktree's older mtime would leave an object built from
    an earlier mutant looking up to date."""
    for dirpath, dirnames, filenames in os.walk(ROOT):
        rel = os.path.relpath(dirpath, ROOT)
        if rel == '.':
            dirnames[:] = [d for d in dirnames if d not in ('build', '.git')]
        os.makedirs(os.path.join(work, rel), exist_ok=True)
        for f in filenames:
            src, dst = os.path.join(dirpath, f), os.path.join(work, rel, f)
            data = open(src, 'rb').read()
            try:
                if open(dst, 'rb').read() == data:
                    continue
            except OSError:
                pass
            with open(dst, 'wb') as out:
                out.write(data)
            shutil.copymode(src, dst)


def parse(path):
    out = []
    for raw in open(path):
        line = raw.rstrip('\n')
        if not line.strip() or line.lstrip().startswith('#'):
            continue
        f = line.split('\t')
        if len(f) < 6:
            sys.exit('bad line: %r' % line)
        mid, where, old, new, units, sels = f[:6]
        file, ln = where.rsplit(':', 1)
        out.append(dict(id=mid, file=file, line=int(ln), old=old, new=new,
                        units=[u for u in units.split(',') if u and u != '-'],
                        sels=[s for s in sels.split(',') if s and s != '-']))
    return out


def run(cmd, cwd, timeout):
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout, text=True, errors='replace')
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        return 124, (e.stdout or '') if isinstance(e.stdout, str) else 'timeout'


def first_failure(text):
    for l in text.splitlines():
        if 'FAIL' in l or ':F:' in l or ':E:' in l or 'failed' in l and 'integration:' not in l:
            return l.strip()[:160]
    return text.strip().splitlines()[-1][:160] if text.strip() else '?'


def one(m, work, build_targets):
    path = os.path.join(work, m['file'])
    orig = open(path).read()
    lines = orig.split('\n')
    l = lines[m['line'] - 1]
    if l.count(m['old']) != 1:
        return 'bad', 'OLD occurs %d times on the line: %r' % (l.count(m['old']), l)
    lines[m['line'] - 1] = l.replace(m['old'], m['new'])
    try:
        open(path, 'w').write('\n'.join(lines))
        targets = ['build/tubed'] + ['build/unit/' + u for u in m['units']]
        rc, out = run(['make', '-j2', '--no-print-directory'] + targets, work, 600)
        if rc != 0:
            return 'skip', 'does not build: ' + first_failure(out)
        for u in m['units']:
            rc, out = run(['build/unit/' + u], work, 600)
            if rc != 0:
                return 'killed', 'unit %s: %s' % (u, first_failure(out))
        if m['sels']:
            cmd = ['python3', 'tests/integration/run.py', '--bin', 'build/tubed', '-j', '2',
                   '--timeout', '900']
            for s in m['sels']:
                cmd += ['-k', s]
            rc, out = run(cmd, work, 1000)
            tail = [x for x in out.splitlines() if x.startswith('integration:')]
            if rc != 0:
                return 'killed', 'integration %s: %s' % (tail[-1] if tail else '', first_failure(out))
            return 'SURVIVED', tail[-1] if tail else ''
        return 'SURVIVED', 'units only'
    finally:
        open(path, 'w').write(orig)
        # make's timestamps: the restored file must rebuild its object next time
        os.utime(path, None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('spec')
    ap.add_argument('--only', nargs='*')
    ap.add_argument('--work', default='/tmp/tubed-mut')
    ap.add_argument('--out', default=os.path.join(ROOT, 'tests/mutation/results.tsv'))
    ap.add_argument('--no-sync', action='store_true')
    ap.add_argument('--units-only', action='store_true',
                    help='run only the unit tests (to check a new unit test kills a mutant)')
    ap.add_argument('-k', dest='sels', action='append',
                    help='integration selections instead of the spec line\'s')
    a = ap.parse_args()
    if not a.no_sync:
        sync(a.work)
    for m in parse(a.spec):
        if a.only and m['id'] not in a.only:
            continue
        if a.units_only:
            m['sels'] = []
        if a.sels:
            m['sels'] = a.sels
        t = time.time()
        verdict, why = one(m, a.work, None)
        rec = '%s\t%s:%d\t%s -> %s\t%s\t%s\t%.0fs' % (m['id'], m['file'], m['line'], m['old'],
                                                     m['new'], verdict, why, time.time() - t)
        print(rec, flush=True)
        with open(a.out, 'a') as f:
            f.write(rec + '\n')


if __name__ == '__main__':
    main()
