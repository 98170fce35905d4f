"""put: ids, fields, sizes, failures and what they consume, drain mode."""

import signal
import time

from harness import (check, eq, fail, server_args, unq, wait_until)


def test_put_ids_start_at_one_and_increase(srv):
    c = srv.client()
    eq([c.put(b"a"), c.put(b"b"), c.put(b"c")], [1, 2, 3], "job ids")
    d = srv.client()
    eq(d.put(b"d"), 4, "id from a second connection")


def test_put_reply_exact_bytes(srv):
    c = srv.client()
    c.send(b"put 0 0 10 5\r\nhello\r\n")
    eq(c.read_exact(len(b"INSERTED 1\r\n")), b"INSERTED 1\r\n", "raw reply")


def test_put_then_reserve_roundtrip(srv):
    c = srv.client()
    jid = c.put(b"hello world", pri=10, ttr=30)
    eq(c.reserve(), (jid, b"hello world"), "reserved job")


def test_put_fields_in_stats_job(srv):
    c = srv.client()
    jid = c.put(b"x", pri=4294967295, delay=0, ttr=4294967295)
    st = c.stats_job(jid)
    eq(st["pri"], "4294967295", "pri")
    eq(st["ttr"], "4294967295", "ttr")
    eq(st["state"], "ready", "state")
    eq(st["delay"], "0", "delay")
    eq(unq(st["tube"]), "default", "tube")


def test_put_ttr_zero_becomes_one(srv):
    c = srv.client()
    jid = c.put(b"x", ttr=0)
    eq(c.stats_job(jid)["ttr"], "1", "ttr of a put with ttr 0")


def test_put_with_delay_is_delayed(srv):
    c = srv.client()
    jid = c.put(b"x", delay=100)
    st = c.stats_job(jid)
    eq(st["state"], "delayed", "state")
    eq(st["delay"], "100", "delay")
    check(98 <= int(st["time-left"]) <= 100, "time-left %s not ~100" % st["time-left"])
    c.expect("reserve-with-timeout 0", "TIMED_OUT")


def test_put_max_delay(srv):
    c = srv.client()
    jid = c.put(b"x", delay=4294967295)
    eq(c.stats_job(jid)["state"], "delayed", "state")
    eq(c.stats_job(jid)["delay"], "4294967295", "delay")


def test_put_into_used_tube(srv):
    c = srv.client()
    c.use("jobs")
    jid = c.put(b"x")
    eq(unq(c.stats_job(jid)["tube"]), "jobs", "tube of job")
    eq(c.stats_tube("jobs")["current-jobs-ready"], "1", "ready in jobs")
    eq(c.stats_tube("default")["current-jobs-ready"], "0", "ready in default")
    # Not reserved: only default is watched.
    c.expect("reserve-with-timeout 0", "TIMED_OUT")
    c.watch("jobs")
    eq(c.reserve(0)[0], jid, "reserved after watching")


def test_put_zero_length_body(srv):
    c = srv.client()
    c.send(b"put 0 0 10 0\r\n\r\n")
    eq(c.read_line(), b"INSERTED 1", "put of empty body")
    c.send(b"reserve\r\n")
    eq(c.read_exact(len(b"RESERVED 1 0\r\n\r\n")), b"RESERVED 1 0\r\n\r\n",
       "raw reserve reply of empty job")
    eq(c.cmd_body("peek 1"), (b"FOUND 1 0", b""), "peek of empty job")


def test_put_max_job_size_exactly_accepted(srv):
    c = srv.client()
    body = bytes(range(256)) * 255 + b"z" * 255   # 65535 bytes
    eq(len(body), 65535, "body length")
    jid = c.put(body)
    eq(c.cmd_body("peek %d" % jid), (b"FOUND %d 65535" % jid, body), "peek")
    eq(c.stats()["max-job-size"], "65535", "max-job-size")


def test_put_job_too_big_after_reading_body(srv):
    c = srv.client()
    body = b"\r\n" * 32768   # 65536 bytes that look like empty command lines
    c.send(b"put 0 0 10 65536\r\n" + body + b"\r\n" + b"list-tube-used\r\n")
    c.expect_lines([b"JOB_TOO_BIG", b"USING default"])
    # JOB_TOO_BIG does not use up an id.
    eq(c.put(b"ok"), 1, "id after JOB_TOO_BIG")
    eq(c.stats()["cmd-put"], "2", "cmd-put counts the rejected put")


def test_put_job_too_big_partial_body_waits(srv):
    c = srv.client()
    c.send(b"put 0 0 10 70000\r\n" + b"a" * 1000)
    c.expect_silence(0.3)
    c.send(b"a" * 69000 + b"\r\n")
    c.expect_lines([b"JOB_TOO_BIG"])
    c.expect("list-tube-used", "USING default")


@server_args("-z", "10")
def test_put_max_job_size_flag(srv):
    c = srv.client()
    eq(c.stats()["max-job-size"], "10", "max-job-size with -z 10")
    eq(c.put(b"0123456789"), 1, "10-byte job id")
    c.expect_raw(b"put 0 0 10 11\r\n01234567890\r\n", [b"JOB_TOO_BIG"])
    # The body was consumed: CRLF inside it did not start a command.
    c.expect_raw(b"put 0 0 10 11\r\nstats\r\nstat\r\n", [b"JOB_TOO_BIG"])
    c.expect("list-tube-used", "USING default")
    eq(c.put(b"x"), 2, "id after JOB_TOO_BIG")


@server_args("-z", "10")
def test_put_job_too_big_checked_before_trailing_junk(srv):
    # beanstalkd checks the size before rejecting trailing junk on the line:
    # the body is read and thrown away and the answer is JOB_TOO_BIG.
    c = srv.client()
    c.expect_raw(b"put 0 0 10 11 junk\r\n01234567890\r\nlist-tube-used\r\n",
                 [b"JOB_TOO_BIG", b"USING default"])
    c.expect_raw(b"put 0 0 10 11 \r\n01234567890\r\nlist-tube-used\r\n",
                 [b"JOB_TOO_BIG", b"USING default"])
    # Within the size limit, trailing junk is BAD_FORMAT and the body is not
    # read: it is parsed as the next command line.
    c.expect_raw(b"put 0 0 10 3 junk\r\nabc\r\nlist-tube-used\r\n",
                 [b"BAD_FORMAT", b"UNKNOWN_COMMAND", b"USING default"])


def test_put_expected_crlf_consumes_id_and_exact_bytes(srv):
    c = srv.client()
    eq(c.put(b"a"), 1, "first id")
    # bytes=3, then 5 bytes consumed whatever they are ("abcde").
    c.expect_raw(b"put 0 0 10 3\r\nabcdelist-tube-used\r\n",
                 [b"EXPECTED_CRLF", b"USING default"])
    eq(c.put(b"b"), 3, "id after EXPECTED_CRLF (id 2 was used up)")
    c.expect_raw(b"put 0 0 10 3\r\nabc\n\rlist-tube-used\r\n",
                 [b"EXPECTED_CRLF", b"USING default"])
    c.expect_raw(b"put 0 0 10 3\r\nabc\r\rlist-tube-used\r\n",
                 [b"EXPECTED_CRLF", b"USING default"])
    c.expect_raw(b"put 0 0 10 0\r\nxylist-tube-used\r\n",
                 [b"EXPECTED_CRLF", b"USING default"])
    # The consumed bytes may themselves contain CRLF.
    c.expect_raw(b"put 0 0 10 4\r\nab\r\ncdlist-tube-used\r\n",
                 [b"EXPECTED_CRLF", b"USING default"])
    eq(c.put(b"c"), 8, "id after five EXPECTED_CRLF (ids 2, 4-7 used up)")
    st = c.stats()
    eq(st["total-jobs"], "3", "total-jobs")
    eq(st["current-jobs-ready"], "3", "current-jobs-ready")
    eq(st["cmd-put"], "8", "cmd-put")
    # Short write: nothing is answered until bytes+2 arrived.
    c.send(b"put 0 0 10 3\r\nab")
    c.expect_silence(0.3)
    c.send(b"cde")
    c.expect_lines([b"EXPECTED_CRLF"])


def test_put_bad_format_body_parsed_as_command(srv):
    # A put line that does not parse is answered at once; what follows it is
    # read as command lines.
    c = srv.client()
    c.expect_raw(b"put 0 0 10 3x\r\nabc\r\nlist-tube-used\r\n",
                 [b"BAD_FORMAT", b"UNKNOWN_COMMAND", b"USING default"])
    c.expect_raw(b"put 0 0 10 2\x00\r\nstats-tube default\r\n",
                 [b"BAD_FORMAT"])
    line, body = c.read_reply()
    check(line.startswith(b"OK "), "body line run as a command: got %r" % line)
    eq(c.put(b"z"), 1, "BAD_FORMAT puts use no id")


def test_put_accepts_extra_spaces_and_leading_zeros(srv):
    c = srv.client()
    c.expect_raw(b"put  0 0 10 3\r\nabc\r\n", [b"INSERTED 1"])
    c.expect_raw(b"put 0  0  10  3\r\nabc\r\n", [b"INSERTED 2"])
    c.expect_raw(b"put 00 00 010 003\r\nabc\r\n", [b"INSERTED 3"])
    eq(c.stats_job(3)["ttr"], "10", "ttr with leading zero")


def test_put_counters_and_producers(srv):
    c = srv.client()
    other = srv.client()
    eq(other.stats()["current-producers"], "0", "producers before put")
    c.put(b"a")
    c.put(b"b", delay=50)
    st = other.stats()
    eq(st["cmd-put"], "2", "cmd-put")
    eq(st["total-jobs"], "2", "total-jobs")
    eq(st["current-producers"], "1", "current-producers")
    eq(st["current-jobs-ready"], "1", "ready")
    eq(st["current-jobs-delayed"], "1", "delayed")
    eq(other.stats_tube("default")["total-jobs"], "2", "tube total-jobs")
    c.close()
    wait_until(lambda: other.stats()["current-producers"] == "0",
               what="current-producers to drop after close")


def test_put_line_and_body_in_separate_writes(srv):
    c = srv.client()
    c.send(b"put 0 0 10 5\r\n")
    c.expect_silence(0.2)
    c.send(b"he")
    c.expect_silence(0.2)
    c.send(b"llo\r")
    c.expect_silence(0.2)
    c.send(b"\n")
    eq(c.read_line(), b"INSERTED 1", "put reply")
    eq(c.reserve(0), (1, b"hello"), "job")


def test_drain_mode(srv):
    c = srv.client()
    jid = c.put(b"before")
    eq(c.stats()["draining"], "false", "draining before SIGUSR1")
    srv.signal(signal.SIGUSR1)
    wait_until(lambda: c.stats()["draining"] == "true", what="draining: true")
    # The body is read (it contains a CRLF and a command) before DRAINING.
    c.expect_raw(b"put 0 0 10 12\r\nab\r\nstats\r\nx\r\nlist-tube-used\r\n",
                 [b"DRAINING", b"USING default"])
    c.expect_raw(b"put 0 0 10 3\r\nabc\r\n", [b"DRAINING"])
    # A put with a malformed line is still BAD_FORMAT.
    c.expect("put 0 0 10 x", "BAD_FORMAT")
    # Everything else works.
    eq(c.reserve(0), (jid, b"before"), "reserve while draining")
    c.expect("delete %d" % jid, "DELETED")
    c.use("other")
    d = srv.client()
    d.expect_raw(b"put 0 0 10 1\r\nx\r\n", [b"DRAINING"])
    st = c.stats()
    eq(st["total-jobs"], "1", "no job created while draining")
    eq(st["current-jobs-ready"], "0", "ready")
    check(srv.alive(), "server died after SIGUSR1")
