"""Command-line parsing: malformed numbers and arguments, line limits, NUL
bytes, unknown commands.  Table-driven: every case runs on its own connection
and is followed by ``list-tube-used`` to check the connection stayed in step;
all mismatches of a table are reported together.

Expected replies were taken from beanstalkd 1.12; where 1.12's answer is an
accident that tubed does not copy (compat-notes, "Parsing leniencies"), the
case is in a tubed-only table.
"""

from harness import check, check_cases, eq, fail, tubed_only

NAME200 = b"a" * 200
U64MAX = b"18446744073709551615"
U64OVER = b"18446744073709551616"


def _lines(*cmds):
    return [c + b"\r\n" for c in cmds]


# ----------------------------------------------------------- numbers

def test_bad_job_ids(srv):
    cases = []
    for cmd in (b"delete", b"peek", b"stats-job", b"kick-job", b"touch",
                b"reserve-job"):
        for arg in (b"-1", b"+1", b"1x", b"x", b"1 ", b"1 2", b"0x10", b"1.0",
                    b" ", b"", U64OVER, b"99999999999999999999999"):
            cases.append((cmd + b" " + arg + b"\r\n", [b"BAD_FORMAT"]))
        cases.append((cmd + b" " + U64MAX + b"\r\n", [b"NOT_FOUND"]))
        cases.append((cmd + b" 0\r\n", [b"NOT_FOUND"]))
        cases.append((cmd + b" 00001\r\n", [b"NOT_FOUND"]))
        cases.append((cmd + b"  1\r\n", [b"NOT_FOUND"]))   # extra space is skipped
    check_cases(srv, cases)


def test_bad_release_and_bury_args(srv):
    cases = [
        (b"release 1\r\n", [b"BAD_FORMAT"]),
        (b"release 1 2\r\n", [b"BAD_FORMAT"]),
        (b"release 1 2 3 4\r\n", [b"BAD_FORMAT"]),
        (b"release 1 2 3 \r\n", [b"BAD_FORMAT"]),
        (b"release 1 4294967296 0\r\n", [b"BAD_FORMAT"]),
        (b"release 1 0 4294967296\r\n", [b"BAD_FORMAT"]),
        (b"release 1 -1 0\r\n", [b"BAD_FORMAT"]),
        (b"release 1 0 -1\r\n", [b"BAD_FORMAT"]),
        (b"release 1 +1 0\r\n", [b"BAD_FORMAT"]),
        (b"release x 0 0\r\n", [b"BAD_FORMAT"]),
        (b"release 1 4294967295 4294967295\r\n", [b"NOT_FOUND"]),
        (b"release  1  2  3\r\n", [b"NOT_FOUND"]),
        (b"bury 1\r\n", [b"BAD_FORMAT"]),
        (b"bury 1 2 3\r\n", [b"BAD_FORMAT"]),
        (b"bury 1 -2\r\n", [b"BAD_FORMAT"]),
        (b"bury 1 2x\r\n", [b"BAD_FORMAT"]),
        (b"bury 1 2 \r\n", [b"BAD_FORMAT"]),
        (b"bury 1 4294967296\r\n", [b"BAD_FORMAT"]),
        (b"bury 1 4294967295\r\n", [b"NOT_FOUND"]),
        (b"bury " + U64MAX + b" 0\r\n", [b"NOT_FOUND"]),
        (b"bury " + U64OVER + b" 0\r\n", [b"BAD_FORMAT"]),
    ]
    check_cases(srv, cases)


def test_bad_put_lines(srv):
    # After a put line that does not parse, its body is read as a command
    # line: "abc" is UNKNOWN_COMMAND.
    after = [b"BAD_FORMAT", b"UNKNOWN_COMMAND"]
    cases = []
    for line in (b"put 0 0 1 3 ", b"put 0 0 1 3x", b"put 0 0 1", b"put 0 0 1 3 4",
                 b"put -1 0 1 3", b"put +1 0 1 3", b"put 0 -1 1 3", b"put 0 0 -1 3",
                 b"put 0 0 1 -3", b"put 4294967296 0 1 3", b"put 0 4294967296 1 3",
                 b"put 0 0 4294967296 3", b"put x 0 1 3", b"put 0 0 1 3.0",
                 b"put 0 0 1 0x3", b"put 0 0 1  3 x", b"put 0,0,1,3"):
        cases.append((line + b"\r\nabc\r\n", after))
    cases += [
        (b"put \r\n", [b"BAD_FORMAT"]),
        (b"put 0 0 1 4294967296\r\n", [b"BAD_FORMAT"]),
        (b"put 0 0 1 99999999999\r\n", [b"BAD_FORMAT"]),
        (b"put\r\n", [b"UNKNOWN_COMMAND"]),
        (b"PUT 0 0 1 3\r\nabc\r\n", [b"UNKNOWN_COMMAND", b"UNKNOWN_COMMAND"]),
        (b"putx 0 0 1 3\r\nabc\r\n", [b"UNKNOWN_COMMAND", b"UNKNOWN_COMMAND"]),
        (b"put 4294967295 4294967295 4294967295 3\r\nabc\r\n", [b"INSERTED 1"]),
    ]
    check_cases(srv, cases)


def test_bad_kick_and_pause_args(srv):
    cases = [
        (b"kick \r\n", [b"BAD_FORMAT"]),
        (b"kick x\r\n", [b"BAD_FORMAT"]),
        (b"kick 99999999999999999999\r\n", [b"BAD_FORMAT"]),
        (b"kick 0\r\n", [b"KICKED 0"]),
        (b"kick 4294967295\r\n", [b"KICKED 0"]),
        (b"kick  1\r\n", [b"KICKED 0"]),
        (b"pause-tube default\r\n", [b"BAD_FORMAT"]),
        (b"pause-tube default \r\n", [b"BAD_FORMAT"]),
        (b"pause-tube default 1 \r\n", [b"BAD_FORMAT"]),
        (b"pause-tube default 1 2\r\n", [b"BAD_FORMAT"]),
        (b"pause-tube default -1\r\n", [b"BAD_FORMAT"]),
        (b"pause-tube default +1\r\n", [b"BAD_FORMAT"]),
        (b"pause-tube default 1x\r\n", [b"BAD_FORMAT"]),
        (b"pause-tube default 4294967296\r\n", [b"BAD_FORMAT"]),
        (b"pause-tube \r\n", [b"BAD_FORMAT"]),
        (b"pause-tube  default 0\r\n", [b"PAUSED"]),
        (b"pause-tube default  0\r\n", [b"PAUSED"]),
        (b"pause-tube nosuch 0\r\n", [b"NOT_FOUND"]),
        (b"reserve-with-timeout 99999999999999999999\r\n", [b"BAD_FORMAT"]),
        (b"reserve-with-timeout  0\r\n", [b"TIMED_OUT"]),
    ]
    check_cases(srv, cases)


@tubed_only("tubed's choice for 1.12's number-parsing leniencies (compat-notes): "
            "decimal digits only, no sign, no trailing junk")
def test_lenient_numbers_are_bad_format(srv):
    # 1.12 answers KICKED 0 / TIMED_OUT to all of these.
    cases = []
    for arg in (b"5x", b"-1", b"+1", b"1 ", b"1 2", b"x5"):
        cases.append((b"kick " + arg + b"\r\n", [b"BAD_FORMAT"]))
    # A plain fraction (1.5) is read as 1.12 reads it: test_reserve.py,
    # test_reserve_with_timeout_fraction. Other junk around one is not.
    for arg in (b"x", b"", b"+0", b"0x", b"0 ", b"-1", b"-0", b"1.", b".5", b"1.5x"):
        cases.append((b"reserve-with-timeout " + arg + b"\r\n", [b"BAD_FORMAT"]))
    check_cases(srv, cases)


def test_lenient_kick_does_not_kick_on_bad_format(srv):
    # Whatever the answer to "kick 5x", it must not be taken as "kick 0"
    # followed by junk silently kicking something else: check state.
    c = srv.client()
    j = c.put(b"x", delay=100)
    c.cmd("kick x")
    eq(c.stats_job(j)["state"], "delayed", "state after 'kick x'")


# ------------------------------------------------------ command words

def test_commands_without_args_must_match_exactly(srv):
    cases = []
    for cmd in (b"stats", b"reserve", b"list-tubes", b"list-tube-used",
                b"list-tubes-watched", b"peek-ready", b"peek-delayed", b"peek-buried"):
        cases.append((cmd + b" \r\n", [b"BAD_FORMAT"]))
        cases.append((cmd + b" x\r\n", [b"BAD_FORMAT"]))
        cases.append((cmd + b"\t\r\n", [b"BAD_FORMAT"]))
    check_cases(srv, cases)


def test_command_word_prefixes(srv):
    # 1.12 matches command words by prefix: a word that starts with a
    # no-argument command (or "stats", "reserve") is BAD_FORMAT; a command
    # that needs arguments, given without its space, is UNKNOWN_COMMAND.
    cases = []
    for line in (b"statsx", b"reservex", b"reserve-", b"list-tubesx",
                 b"list-tube-usedx", b"peek-readyx", b"stats-job", b"stats-jobx 1",
                 b"stats-tube", b"stats-tubex a", b"reserve-job", b"reserve-jobx 1",
                 b"reserve-with-timeout", b"reserve-withtimeout 1", b"pause-tube",
                 b"pause-tubex a 1"):
        cases.append((line + b"\r\n", [b"BAD_FORMAT"]))
    for line in (b"delete", b"peek", b"release", b"bury", b"touch", b"kick",
                 b"kick-job", b"use", b"watch", b"ignore", b"put", b"peekx",
                 b"peek-", b"peek-job 1", b"list", b"list-tube", b"deletex 1",
                 b"kick-jobx 1", b"usex a", b"watchx a", b"ignorex a", b"touchx 1",
                 b"buryx 1 1", b"release-"):
        cases.append((line + b"\r\n", [b"UNKNOWN_COMMAND"]))
    check_cases(srv, cases)


def test_unknown_commands(srv):
    cases = [(line + b"\r\n", [b"UNKNOWN_COMMAND"]) for line in (
        b"foo", b"STATS", b"Stats", b"Reserve", b"", b" ", b"  ", b"\t", b" stats",
        b"\nstats", b"\n", b"hello world", b"x" * 222, b"\xff\xfe",
        b"q", b"qui")]
    check_cases(srv, cases)


def test_empty_lines_each_answered(srv):
    c = srv.client()
    c.expect_raw(b"\r\n\r\n\r\nlist-tube-used\r\n",
                 [b"UNKNOWN_COMMAND"] * 3 + [b"USING default"])


def test_quit(srv):
    c = srv.client()
    c.put(b"x")
    # Commands after quit in the same write are not answered.
    c.send(b"quit\r\nlist-tube-used\r\nstats\r\n")
    c.expect_closed()
    d = srv.client()
    d.send(b"use t\r\nquit\r\n")
    d.expect_lines([b"USING t"])
    d.expect_closed()


@tubed_only("tubed's choice: 'quit' is matched like every other word without "
            "arguments, so 'quitxyz' is a malformed quit (1.12 closes the connection)")
def test_quit_prefix_is_bad_format(srv):
    check_cases(srv, [(b"quitxyz\r\n", [b"BAD_FORMAT"]),
                      (b"quitter\r\n", [b"BAD_FORMAT"])])
    c = srv.client()
    c.expect("quitxyz", "BAD_FORMAT")
    c.expect("list-tube-used", "USING default")


# ---------------------------------------------------------- NUL, CR, LF

def test_nul_bytes(srv):
    cases = [
        (b"stats\x00\r\n", [b"BAD_FORMAT"]),
        (b"\x00\r\n", [b"BAD_FORMAT"]),
        (b"\x00stats\r\n", [b"BAD_FORMAT"]),
        (b"use a\x00b\r\n", [b"BAD_FORMAT"]),
        (b"use a\x00\r\n", [b"BAD_FORMAT"]),
        (b"watch \x00\r\n", [b"BAD_FORMAT"]),
        (b"delete 1\x00\r\n", [b"BAD_FORMAT"]),
        (b"delete 1\x002\r\n", [b"BAD_FORMAT"]),
        (b"list-tube-used\x00\r\n", [b"BAD_FORMAT"]),
        (b"stats-tube default\x00\r\n", [b"BAD_FORMAT"]),
        (b"pause-tube default 0\x00\r\n", [b"BAD_FORMAT"]),
        (b"foo\x00\r\n", [b"BAD_FORMAT"]),
        # A put line with NUL is BAD_FORMAT; its body is then a command line.
        (b"put 0 0 1 1\x00\r\nx\r\n", [b"BAD_FORMAT", b"UNKNOWN_COMMAND"]),
    ]
    check_cases(srv, cases)
    c = srv.client()
    eq(c.list_tubes(), ["default"], "no tube created")
    eq(c.stats()["total-jobs"], "0", "no job created")


def test_bare_lf_is_part_of_the_line(srv):
    cases = [
        (b"list-tube-used\n\r\n", [b"BAD_FORMAT"]),
        (b"use a\nb\r\n", [b"BAD_FORMAT"]),
        (b"\n\r\n", [b"UNKNOWN_COMMAND"]),
        (b"\nstats\r\n", [b"UNKNOWN_COMMAND"]),
    ]
    check_cases(srv, cases)
    # "stats\nlist-tube-used\r\n" is one line.
    c = srv.client()
    c.expect_raw(b"stats\nlist-tube-used\r\nlist-tube-used\r\n",
                 [b"BAD_FORMAT", b"USING default"])


@tubed_only("1.12 bug: a bare CR before the CRLF hides the line end "
            "(1.12 waits for more input); the line ends at the first CR followed by LF")
def test_bare_cr_inside_line(srv):
    cases = [
        (b"use a\rb\r\n", [b"BAD_FORMAT"]),
        (b"delete 1\r2\r\n", [b"BAD_FORMAT"]),
        (b"put 0 0 1 1\r \r\nx\r\n", [b"BAD_FORMAT", b"UNKNOWN_COMMAND"]),
    ]
    check_cases(srv, cases)


def test_command_needs_crlf(srv):
    c = srv.client()
    c.send(b"list-tube-used\n")
    c.expect_silence(0.3)
    c.send(b"\r")
    c.expect_silence(0.3)
    c.send(b"\n")
    c.expect_lines([b"BAD_FORMAT"])
    c.send(b"list-tube-used\r")
    c.expect_silence(0.3)
    c.send(b"\n")
    c.expect_lines([b"USING default"])


# ------------------------------------------------------------ line limit

def test_longest_legal_line(srv):
    line = b"pause-tube " + NAME200 + b" 4294967295\r\n"
    eq(len(line), 224, "longest legal line length")
    c = srv.client()
    c.expect(b"use " + NAME200, b"USING " + NAME200)
    c.expect_raw(line, [b"PAUSED"])
    eq(c.stats_tube(NAME200.decode())["pause"], "4294967295", "pause")
    # 224 bytes of garbage are still one line: UNKNOWN_COMMAND.
    c.expect_raw(b"x" * 222 + b"\r\n", [b"UNKNOWN_COMMAND"])
    c.expect_raw(b"use " + NAME200 + b"\r\n", [b"USING " + NAME200])


def test_overlong_line_discarded_then_resync(srv):
    name = NAME200.decode()
    cases = [
        # 226 bytes: the CRLF comes after the 224-byte buffer.
        (b"pause-tube " + NAME200 + b" 004294967295\r\n", [b"BAD_FORMAT"]),
        (b"x" * 224 + b"\r\n", [b"BAD_FORMAT"]),
        (b"x" * 300 + b"\r\n", [b"BAD_FORMAT"]),
        (b"x" * 446 + b"\r\n", [b"BAD_FORMAT"]),
        (b"x" * 2000 + b"\r\n", [b"BAD_FORMAT"]),
        (b"use " + b"a" * 300 + b"\r\n", [b"BAD_FORMAT"]),
        # An overlong put line: its "body" is not read.
        (b"put 0 0 1 " + b"0" * 250 + b"3\r\nabc\r\n", [b"BAD_FORMAT", b"UNKNOWN_COMMAND"]),
    ]
    check_cases(srv, cases)
    c = srv.client()
    # Sent in pieces: one BAD_FORMAT for the whole long line.
    c.send(b"y" * 200)
    c.expect_silence(0.2)
    c.send(b"y" * 200)
    c.expect_silence(0.2)
    c.send(b"y" * 200 + b"\r\n")
    c.expect_lines([b"BAD_FORMAT"])
    c.expect("list-tube-used", "USING default")
    eq(c.list_tubes(), ["default"], "tubes")


def test_line_one_byte_too_long(srv):
    # tubed copies beanstalkd 1.12 byte for byte here: after the first 224
    # bytes of an overlong line, input is dropped in 224-byte windows until
    # a window whose first CR is followed by LF. For a 225-byte line the CR
    # is byte 224, so its LF alone ends nothing and the NEXT line's CRLF
    # ends the discard: that line is swallowed and answered BAD_FORMAT.
    line = b"pause-tube " + NAME200 + b" 04294967295\r\n"
    eq(len(line), 225, "line length")
    c = srv.client()
    c.expect(b"use " + NAME200, b"USING " + NAME200)
    c.expect_raw(line + b"list-tube-used\r\n", [b"BAD_FORMAT"])
    c.expect("list-tube-used", b"USING " + NAME200)
    eq(c.stats_tube(NAME200.decode())["pause"], "0", "not paused")
    ltu = b"list-tube-used\r\n"
    cases = [(b"x" * 223 + b"\r\n" + ltu + ltu, [b"BAD_FORMAT", b"USING default"]),
             (b"x" * 447 + b"\r\n" + ltu + ltu, [b"BAD_FORMAT", b"USING default"]),
             (b"x" * 224 + b"\r\n" + ltu, [b"BAD_FORMAT", b"USING default"]),
             (b"x" * 300 + b"\rz" + b"y" * 200 + b"\r\n" + ltu,
              [b"BAD_FORMAT", b"USING default"])]
    check_cases(srv, cases, sync=False)


# ------------------------------------------------------------- put ids

def test_put_id_consumption(srv):
    c = srv.client()
    eq(c.put(b"a"), 1, "id")
    c.expect("put 0 0 1 x", "BAD_FORMAT")                          # no id
    c.expect_raw(b"put 0 0 1 70000\r\n" + b"z" * 70002, [b"JOB_TOO_BIG"])  # no id
    c.expect_raw(b"put 0 0 1 1\r\nxyz", [b"EXPECTED_CRLF"])          # uses id 2
    eq(c.put(b"b"), 3, "id after BAD_FORMAT, JOB_TOO_BIG, EXPECTED_CRLF")
