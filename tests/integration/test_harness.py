"""The test harness's own promises (server.Tubed, harness.wait_for), checked
against the real binary: a restart keeps the directory, the binlog and
(keep_port) the port; SIGTERM exits 0 and hands back the output; a reload
takes the new file; the extra listeners are up when start() returns and
gone after stop(); a server that dies behind the harness's back is
reported, never passed over."""

import os
import signal

import harness
from harness import TestFailure, check, eq, no_server, tubed_only, wait_for
from server import Tubed

EXT = "the harness drives tubed's extensions (config file, memcache, metrics)"


@no_server
def test_restart_keeps_dir_binlog_and_port(binary):
    with Tubed(binary, bdir=True, keep_port=True) as t:
        port, first = t.port, t.pid
        c = t.bs()
        jid = c.put(b"kept")
        t.kill9()
        check(t.srv is None and len(t.old) == 1, "the killed process is retired")
        t.restart()
        check(t.pid != first, "a new process")
        eq(t.port, port, "beanstalk port after a restart with keep_port")
        eq(t.bs().peek("peek %d" % jid), (jid, b"kept"), "the job after kill -9")
        check(os.path.isdir(t.bdir), "binlog directory kept")
    check(not os.path.exists(t.tmp), "temporary directory removed at the end")


@no_server
def test_sigterm_exits_zero_with_output(binary):
    t = Tubed(binary)
    with t:
        pid = t.pid
        text = t.sigterm()
        check("started, pid %d" % pid in text,
              "the server's output is handed back: %r" % text[-300:])
        eq(t.old[-1].returncode, 0, "exit status")
        eq(harness.listening(pid, t.port), False, "port closed after SIGTERM")


@no_server
@tubed_only(EXT)
def test_reload_takes_the_new_file(binary):
    with Tubed(binary, conf="[tube q]\nmax_items = 1\n") as t:
        c = t.bs()
        c.use("q")
        c.put(b"1")
        c.send(b"put 0 0 60 1\r\n2\r\n")
        eq(c.read_line(), b"OUT_OF_MEMORY", "put into the full tube")
        line = t.reload(conf="[tube q]\nmax_items = 2\n")
        check(t.conf_path in line, "the reload line names the file: %r" % line)
        c.put(b"2")
        t.write_conf("[tube q]\nmax_items = nonsense\n")
        t.reload(expect_ok=False)
        c.send(b"put 0 0 60 1\r\n3\r\n")
        eq(c.read_line(), b"OUT_OF_MEMORY", "the old limit stays after a bad file")


@no_server
@tubed_only(EXT)
def test_extra_listeners_up_at_start_gone_after_stop(binary):
    with Tubed(binary, memcache=True, metrics=True) as t:
        pid, mport, hport = t.pid, t.mport, t.hport
        check(harness.listening(pid, mport) and harness.listening(pid, hport),
              "memcache and metrics ports listening when start() returns")
        eq(t.listen_ports(), sorted([t.port, mport, hport]),
           "the ports the server listens on")
        m = t.mc()
        m.store("q", b"v")
        eq(m.get("q"), b"v", "memcache round trip")
        eq(t.metrics().value("tubed_draining"), 0.0, "a scrape of the metrics port")
        eq(t.stop(), [], "problems at stop")
        eq(harness.listening(pid, mport), False, "memcache port after stop")


@no_server
def test_death_behind_the_harness_is_reported(binary):
    t = Tubed(binary)
    t.start()
    try:
        os.kill(t.pid, signal.SIGKILL)   # not through the harness
        t.srv.proc.wait(10)
        problems = t.stop()
    finally:
        t.remove_dir()
    check(any("exited on its own" in p for p in problems),
          "a server killed behind the harness's back is a problem: %r" % problems)


def _raises(fn):
    try:
        fn()
    except TestFailure as e:
        return str(e)
    return None


@no_server
def test_wait_for(binary):
    seen = []
    eq(wait_for(lambda: seen.append(1) or (len(seen) >= 3 and "done")), "done",
       "wait_for returns the predicate's value")
    eq(len(seen), 3, "polls until true")
    msg = _raises(lambda: wait_for(lambda: None, lambda: "x at %d" % len(seen),
                                   timeout=0.1))
    check(msg is not None and "x at 3" in msg,
          "a callable what shows the last state: %r" % msg)
    msg = _raises(lambda: harness.wait_until(lambda: 0, 0.1, what="never"))
    check(msg is not None and "never" in msg, "wait_until fails too: %r" % msg)
