"""The docs say what the program does (README.md, doc/*.md, man/*).

Mechanical checks, each cheap, most without a server:
- options: tubed, tubed-cli and tubed-bench --help against their man pages
  (spelling, argument names, defaults), README's flag table, tubed-cli's
  commands and tubed-bench's workloads;
- config: src/config/conf.c's keys against doc/configuration.md's tables
  (both ways), each row's Example and integer range, the defaults, "changes
  at reload" (opts.c's runtime_key()), every option's key, every message
  of the error table produced by a bad config, every example config of
  doc/, README and pkg/tubed.conf through --check-config;
- a live primary (-b, memcache, metrics, a [listen] section) and its
  replica: every stats document's keys as doc/protocol.md lists them, in
  order; every /metrics family in doc/monitoring.md's tables with type and
  HELP, in order, the command labels, /tubes.json; memcache stats and
  dump_stats against doc/kestrel.md;
- links and anchors, repository paths, file names, functions and tests the
  docs name; architecture.md names every module; the man pages lint clean;
  the OCF agent's parameters and the keepalived settings; README's
  commands against the Makefile and .ci/run; a beanstalkd binlog refused.
"""

import collections
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile

import harness
from harness import check, eq, fail, no_server, tubed_only

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

SERVER = "none"
DOCS = "tubed's own docs against tubed"


def _read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def _run(argv, timeout=10, **kw):
    try:
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        fail("%s did not exit within %ds" % (" ".join(argv), timeout))


def _tool(binary, name):
    return os.path.join(os.path.dirname(os.path.abspath(binary)), name)


# -- options: --help against the man page's OPTIONS section ----------------

# One option spec: -x, --long, with an optional argument word after a space
# (help: "-b DIR", man: "-b dir") or "=".
_OPT = re.compile(r"(-{1,2}[A-Za-z][\w-]*)(?:[ =]((?:[A-Za-z]+)(?::[A-Za-z]+)?)(?![\w-]))?")


def _specs(text, upper_args):
    """Parse "-h, --host HOST" / "--pri N, --delay S" at the start of text:
    [(option, argument or None)] and the rest of the text."""
    out = []
    pos = 0
    while True:
        m = _OPT.match(text, pos)
        if not m:
            break
        opt, arg = m.group(1), m.group(2)
        if arg is not None and upper_args and not arg.replace(":", "").isupper():
            arg = None          # a description word, not an argument
        if arg is not None and not upper_args and arg.replace(":", "").isupper():
            arg = None
        out.append((opt, arg.lower() if arg else None))
        pos = m.end(1) if arg is None else m.end()
        sep = re.match(r",\s*", text[pos:])
        if not sep:
            break
        pos += sep.end()
    return out, text[pos:]


def _help_options(binary):
    """{option: (argument, description)} from `binary --help`."""
    p = _run([binary, "--help"])
    eq(p.returncode, 0, "%s --help exit status" % binary)
    lines = (p.stdout + p.stderr).decode().splitlines()
    opts = {}
    cur = []
    for line in lines:
        m = re.match(r"^ {1,8}(-.*)$", line)
        if m:
            specs, rest = _specs(m.group(1), True)
            if specs:
                cur = []
                for o, a in specs:
                    opts[o] = [a, rest]
                    cur.append(o)
                for also in re.findall(r"\(also (--[\w-]+)\)", rest):
                    opts[also] = [None, rest]
                continue
        if cur and re.match(r"^ {6,}\S", line) and not re.match(r"^ {1,8}-", line):
            for o in cur:
                opts[o][1] += " " + line.strip()
            continue
        cur = []
    return opts


def _roff_text(s):
    """A roff line's words, fonts and quotes removed (".BI \\-b " dir"" ->
    "-b dir")."""
    s = s.rstrip("\n")
    macro = re.match(r"^\.(B|I|BI|BR|IB|IR|RB|RI)\s+(.*)$", s)
    if macro:
        args = re.findall(r'"((?:[^"\\]|\\.)*)"|(\S+)', macro.group(2))
        words = [a or b for a, b in args]
        sep = " " if macro.group(1) in ("B", "I") else ""
        s = sep.join(words)
    elif s.startswith("."):
        return ""
    s = re.sub(r"\\f[BIRP]|\\f\(..|\\&|\\c", "", s)
    s = s.replace("\\-", "-").replace("\\(em", "--").replace("\\e", "\\")
    return s


def _man_section(path, name):
    """The lines of section `name` of a man page."""
    lines = _read(path).splitlines()
    out, on = [], False
    for line in lines:
        if line.startswith(".SH"):
            on = line[3:].strip().strip('"') == name
            continue
        if on:
            out.append(line)
    return out


def _man_options(path):
    """{option: (argument, text of its paragraph)} from the man page's
    OPTIONS section (.TP tags)."""
    lines = _man_section(path, "OPTIONS")
    opts = {}
    i = 0
    while i < len(lines):
        if lines[i].startswith(".TP") and i + 1 < len(lines):
            tag = _roff_text(lines[i + 1])
            specs, _ = _specs(tag, False)
            body = []
            j = i + 2
            while j < len(lines) and not lines[j].startswith((".TP", ".SS")):
                body.append(_roff_text(lines[j]))
                j += 1
            for o, a in specs:
                opts[o] = [a, " ".join(body)]
            i = j
            continue
        i += 1
    return opts


def _defaults(text):
    """The default values a description states ("default 50", "default:
    no limit", "(default 11300; ...)")."""
    found = re.findall(r"\b[Dd]efault:?\s+((?:no limit)|[\w.:/-]+)", text)
    found += re.findall(r"\b(\w+) by default", text)
    found += re.findall(r"(\w+) \(the default\)", text)
    return [d.rstrip(".:").lower() for d in found]


def _compare_options(binary, man):
    h = _help_options(binary)
    m = _man_options(os.path.join(ROOT, man))
    check(len(h) > 3 and len(m) > 3, "parsed too few options: help %r man %r" % (h, m))
    problems = []
    for o in sorted(set(h) - set(m)):
        problems.append("%s: %s is in --help, not in %s's OPTIONS" % (os.path.basename(binary), o, man))
    for o in sorted(set(m) - set(h)):
        problems.append("%s: %s is in OPTIONS, not in --help" % (man, o))
    for o in sorted(set(h) & set(m)):
        ha, hd = h[o]
        ma, md = m[o]
        if ha != ma:
            problems.append("%s: argument of %s: --help %r, man %r" % (man, o, ha, ma))
        for d in _defaults(hd):
            if d not in _defaults(md):
                problems.append("%s: %s: --help says default %r, man says %r"
                                % (man, o, d, _defaults(md)))
        for d in _defaults(md):
            if d not in _defaults(hd):
                problems.append("%s: %s: man says default %r, --help says %r"
                                % (man, o, d, _defaults(hd)))
    return problems


@no_server
@tubed_only(DOCS)
def test_docs_tubed_options_match_man(binary):
    p = _compare_options(binary, "man/tubed.1")
    check(not p, "\n".join(p))


@no_server
@tubed_only(DOCS)
def test_docs_cli_options_match_man(binary):
    p = _compare_options(_tool(binary, "tubed-cli"), "man/tubed-cli.1")
    check(not p, "\n".join(p))


@no_server
@tubed_only(DOCS)
def test_docs_bench_options_match_man(binary):
    p = _compare_options(_tool(binary, "tubed-bench"), "man/tubed-bench.1")
    check(not p, "\n".join(p))


# -- config keys: src/config/conf.c against doc/configuration.md ------------

def _conf_c_keys():
    """{key: "server" | "tube"} from conf.c's key table."""
    src = _read("src/config/conf.c")
    keys = {}
    for kind, name in re.findall(r'^\s*(TKEY|SKEY)\("(\w+)"', src, re.M):
        keys[name] = "server" if kind == "SKEY" else "tube"
    check(len(keys) > 20, "parsed too few keys from conf.c: %r" % keys)
    return keys


def _runtime_keys():
    """The server keys a reload changes: opts.c's runtime_key()."""
    src = _read("src/config/opts.c")
    m = re.search(r"static int runtime_key\(int k\)\s*\{(.*?)\n\}", src, re.S)
    check(m, "no runtime_key() in src/config/opts.c")
    return {s.lower() for s in re.findall(r"SK_(\w+)", m.group(1))}


def _md_tables(rel, heading=None):
    """The rows of the Markdown tables of a doc ({column: cell}), those
    under `heading` (a "## " title) only if given."""
    rows, header, section = [], None, None
    for line in _read(rel).splitlines():
        h = re.match(r"^(#+)\s+(.*)$", line)
        if h:
            section = h.group(2).strip()
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if header is None:
            header = [c.lower() for c in cells]
            continue
        if all(re.match(r"^:?-+:?$", c) for c in cells):
            continue
        if heading is None or section == heading:
            row = dict(zip(header, cells))
            row["_section"] = section
            rows.append(row)
    return rows


def _doc_keys():
    """{key: row} of configuration.md's server, tube and listener tables."""
    out = {}
    for row in _md_tables("doc/configuration.md"):
        k = re.match(r"^`(\w+)`$", row.get("key", ""))
        if k:
            out[k.group(1)] = row
    return out


_LISTEN_KEYS = {"address", "protocol", "role", "tubes", "users", "groups", "socket_mode"}


def _check_config(binary, text, extra=()):
    """Run tubed --check-config on a config text: (ok, output)."""
    d = tempfile.mkdtemp(prefix="tubed-docs-")
    try:
        path = os.path.join(d, "tubed.conf")
        with open(path, "w") as f:
            f.write(text.replace("@DIR@", d))
        args = [a.replace("@DIR@", d) for a in extra]
        p = _run([binary, "--config", path, "--check-config"] + args)
        return p.returncode == 0, (p.stdout + p.stderr).decode("utf-8", "replace")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _key_config(key, kind, line):
    """A config file where `line` (key = value) is in its right place."""
    if kind == "tube":
        return "[tube docs-test]\n%s\n" % line
    if kind == "listen":
        addr = "" if key == "address" else "address = %s\n" % (
            "unix:@DIR@/l.sock" if key in ("users", "groups", "socket_mode")
            else "127.0.0.1:1")
        return "[listen docs]\n%s%s\n" % (addr, line)
    return line + "\n"


@no_server
@tubed_only(DOCS)
def test_docs_config_keys_match_conf_c(binary):
    keys = _conf_c_keys()
    doc = _doc_keys()
    problems = []
    for k in sorted(set(keys) - set(doc)):
        problems.append("conf.c accepts %s, doc/configuration.md has no row for it" % k)
    for k in sorted(set(doc) - set(keys) - _LISTEN_KEYS):
        problems.append("doc/configuration.md documents %s, conf.c has no such key" % k)
    for k in sorted(_LISTEN_KEYS - set(doc)):
        problems.append("doc/configuration.md has no row for [listen] key %s" % k)
    # The server table's rows are the server keys, the tube table's the tube keys.
    for k, row in doc.items():
        want = keys.get(k, "listen")
        got = "server" if "flag" in row else ("listen" if "type" in row else "tube")
        if want != got:
            problems.append("%s is a %s key, documented in the %s table" % (k, want, got))
    check(not problems, "\n".join(problems))


@no_server
@tubed_only(DOCS)
def test_docs_config_examples_and_ranges_pass_check_config(binary):
    """Each row's Example is accepted, in its place; an integer range
    "a–b" accepts a and b and refuses b+1."""
    keys = _conf_c_keys()
    problems = []
    for k, row in sorted(_doc_keys().items()):
        kind = keys.get(k, "listen")
        meaning = row.get("meaning", "")
        ex = re.findall(r"Example: `([^`]*)`", meaning)
        if not ex:
            problems.append("%s: no Example in its row" % k)
        for line in ex:
            if not line.startswith(k + " ="):
                problems.append("%s: its example sets another key: %r" % (k, line))
                continue
            conf = _key_config(k, kind, line)
            if k == "address" and line.startswith("address"):
                conf = "[listen docs]\naddress = 127.0.0.1:1\n"   # a free-form host
            if k == "users":
                conf = conf.replace(line, "users = root, 0")       # names that exist here
            if k == "groups":
                conf = conf.replace(line, "groups = root")
            if k == "user":
                conf = conf.replace(line, "user = root")           # a user that exists here
            if k == "main_listener":                              # somewhere to listen
                conf += "[listen docs]\naddress = 127.0.0.1:1\n"
            ok, out = _check_config(binary, conf, ["-b", "@DIR@/b"])
            if not ok:
                problems.append("%s: the documented example %r is refused: %s"
                                % (k, line, out.strip()))
        rng = re.search(r"integer (\d+)–(\d+)", row.get("value", row.get("type", "")))
        if rng:
            lo, hi = int(rng.group(1)), int(rng.group(2))
            for v, good in ((lo, True), (hi, True), (hi + 1, False)):
                ok, out = _check_config(binary, _key_config(k, kind, "%s = %d" % (k, v)),
                                        ["-b", "@DIR@/b"])
                if ok != good:
                    problems.append("%s = %d: the doc says range %d–%d, --check-config %s: %s"
                                    % (k, v, lo, hi, "accepts" if ok else "refuses", out.strip()))
    check(not problems, "\n".join(problems))


def _flag_defaults(binary):
    """{option: [defaults]} from tubed --help."""
    return {o: _defaults(d) for o, (a, d) in _help_options(binary).items()}


def _norm_default(v):
    """'10M' -> 10485760, '30s' -> 30, '0 = no limit' -> 'no limit'."""
    v = re.sub(r"\s*\(.*\)$", "", v).strip("` ").lower()
    v = re.sub(r"^0 = ", "", v)
    m = re.match(r"^(\d+)([kmg])$", v)
    if m:
        return str(int(m.group(1)) << {"k": 10, "m": 20, "g": 30}[m.group(2)])
    m = re.match(r"^(\d+)s$", v)
    if m:
        return m.group(1)
    return v


@no_server
@tubed_only(DOCS)
def test_docs_config_defaults_and_reload_match_the_program(binary):
    """A server key's default is its flag's (--help, itself checked against
    the man page); "changes at reload" is said of exactly the keys a
    reload changes (opts.c's runtime_key()), in their rows and in the
    Reload section's two lists."""
    flags = _flag_defaults(binary)
    runtime = _runtime_keys()
    keys = _conf_c_keys()
    problems = []
    for k, row in sorted(_doc_keys().items()):
        if keys.get(k) != "server":
            continue
        flag = row["flag"].strip("` ")
        if flag in flags and flags[flag]:
            doc = _norm_default(row["default"])
            if doc not in [_norm_default(d) for d in flags[flag]]:
                problems.append("%s: default %r, but %s --help says %r"
                                % (k, row["default"], flag, flags[flag]))
        says = "changes at reload" in row["meaning"]
        if says != (k in runtime):
            problems.append("%s: the row %s 'changes at reload', a reload %s it"
                            % (k, "says" if says else "does not say",
                               "changes" if k in runtime else "does not change"))
    text = _read("doc/configuration.md")
    m = re.search(r"\*\*Server keys that a running server can change\*\*(.*?)\n- \*\*The other"
                  r" server keys\*\*(.*?)\n- ", text, re.S)
    check(m, "configuration.md's Reload section lost its two lists of server keys")
    said_live = set(re.findall(r"`(\w+)`", m.group(1))) & set(keys)
    said_start = set(re.findall(r"`(\w+)`", m.group(2))) & set(keys)
    server = {k for k, v in keys.items() if v == "server"}
    if said_live != runtime:
        problems.append("Reload: the keys a reload changes are %s; the doc lists %s"
                        % (sorted(runtime), sorted(said_live)))
    if said_start != server - runtime:
        problems.append("Reload: the keys read at start are %s; the doc lists %s"
                        % (sorted(server - runtime), sorted(said_start)))
    check(not problems, "\n".join(problems))


# -- stats documents and /metrics of a live primary and replica -------------

def _ordered_match(patterns, keys):
    """Do the printed keys follow the documented ones in order?  A pattern
    "prefix-*" stands for one or more consecutive keys.  Returns the
    problems."""
    i = 0
    for p in patterns:
        if p.endswith("*"):
            j = i
            while j < len(keys) and keys[j].startswith(p[:-1]):
                j += 1
            if j == i:
                return ["documented %s, printed %r at that place" % (p, keys[i:i + 1])]
            i = j
            continue
        if i >= len(keys) or keys[i] != p:
            return ["documented %s next, printed %r (documented %s; printed %s)"
                    % (p, keys[i:i + 1], patterns, keys)]
        i += 1
    if i < len(keys):
        return ["printed %s, which the doc does not list (after %s)" % (keys[i:], patterns[-1])]
    return []


def _ticked(text):
    return re.findall(r"`([a-z][a-z*-]*)`", text)


def _between(text, start, end):
    i = text.find(start)
    check(i >= 0, "doc text moved: %r not found" % start)
    j = text.find(end, i + len(start))
    check(j >= 0, "doc text moved: %r not found after %r" % (end, start))
    return text[i + len(start):j]


def _table_keys(rel, heading):
    out = []
    for row in _md_tables(rel, heading):
        out += _ticked(row.get("key", ""))
    check(out, "%s: no key table under %r" % (rel, heading))
    return out


def _documented_stats():
    """{command: [documented keys in order]} from doc/protocol.md."""
    t = _read("doc/protocol.md")
    docs = {
        "stats-job": _ticked(_between(t, "`stats-job <id>` → `OK` + document with keys, in order:",
                                      "\n\n")),
        "stats-tube": _ticked(_between(t, "`stats-tube <tube>` → `NOT_FOUND` or `OK` + document:",
                                       "\n\n")),
        "stats": _ticked(_between(t, "`stats` → `OK` + document:", "are quoted."))[:-4],
        "stats-binlog": _table_keys("doc/protocol.md", "stats-binlog"),
        "stats-listeners": _table_keys("doc/protocol.md", "stats-listeners"),
        "stats-tubes": None,
        "stats-replication": _ticked(_between(t, "- `stats-replication` → `OK <bytes>` and a YAML"
                                              " dictionary:", ", in this order"))
    }
    tubes = _between(t, "### stats-tubes", "### list-jobs")
    docs["stats-tubes"] = docs["stats-tube"] + re.findall(r"^- `([a-z-]+)`:", tubes, re.M)
    n = re.search(r"`stats` → `OK` \+ document: the (\d+) keys of beanstalkd", t)
    check(n, "protocol.md no longer counts stats' beanstalkd keys")
    return docs, int(n.group(1))


def _yaml_keys(body):
    keys = []
    for line in body.split("\n"):
        m = re.match(r"^(?:- |  )?([a-z][a-z-]*):", line)
        if m and m.group(1) not in keys:
            keys.append(m.group(1))
    return keys


LISTEN_CONF = """\
[listen ro]
address = 127.0.0.1:%d
role = read
tubes = app-*
"""


@no_server
@tubed_only(DOCS)
def test_docs_stats_keys_and_metrics_families_match_a_live_server(binary):
    """A primary (-b, memcache, metrics, a [listen] section) with a replica
    connected: every stats document's keys as protocol.md lists them, in
    order; every /metrics family of both servers in monitoring.md's tables
    with its type and HELP, in the tables' order, and every documented
    family printed by one of them."""
    from server import Tubed
    from http_util import Metrics, get
    docs, n_bs = _documented_stats()
    # [listen ro]'s port is in the file: held, and moved with the file
    # rewritten if the first start collides on it (server.Tubed ports=).
    lport = harness.PortReservation()
    problems = []
    with Tubed(binary, conf=lambda: LISTEN_CONF % lport.port, ports=[lport], bdir=True,
               memcache=True, metrics=True, prefix="tubed-docs-") as p:
        c = p.client()
        c.use("default")
        jid = c.put(b"x")
        printed = {}
        for cmd in ("stats", "stats-tube default", "stats-tubes", "stats-job %d" % jid, "stats-binlog",
                    "stats-listeners", "stats-replication"):
            body = c._yaml(cmd, cmd).decode()
            printed[cmd.split()[0]] = _yaml_keys(body)
            if cmd == "stats-listeners":
                # protocol.md: beanstalk, memcache or http (not "metrics").
                protos = re.findall(r"^  protocol: (\S+)$", body, re.M)
                eq(protos, ["beanstalk", "memcache", "http", "beanstalk"],
                   "stats-listeners' protocols (main, memcache, metrics, [listen ro])")
        rdir = tempfile.mkdtemp(prefix="tubed-docs-r-")
        try:
            with Tubed(binary, "--replica-of", "127.0.0.1:%d" % p.port, bdir=True,
                       metrics=True, tmp=rdir, label="replica") as r:
                rc = r.client()
                harness.wait_for(lambda: harness.parse_yaml_dict(
                    rc._yaml("stats-replication", "x")).get("connected") == "true",
                    "the replica to connect")
                harness.wait_for(lambda: harness.parse_yaml_dict(
                    c._yaml("stats-replication", "x")).get("connected-replicas") == "1",
                    "the primary to count its replica")
                scrapes = [Metrics(get(p, "/metrics").text()), Metrics(get(r, "/metrics").text())]
                tubes_json = json.loads(get(p, "/tubes.json").text(),
                                        object_pairs_hook=collections.OrderedDict)
        finally:
            shutil.rmtree(rdir, ignore_errors=True)
    for cmd, keys in printed.items():
        for pr in _ordered_match(docs[cmd], keys):
            problems.append("%s: %s" % (cmd, pr))
    stats = printed["stats"]
    if "platform" not in stats or stats.index("platform") + 1 != n_bs:
        problems.append("protocol.md says stats has %d keys of beanstalkd; up to platform "
                        "it prints %d" % (n_bs, stats.index("platform") + 1 if "platform" in stats else -1))
    # tubed's own stats keys as man tubed(1) and operations.md count them.
    own = stats[stats.index("platform") + 1:] if "platform" in stats else []
    words = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven"}
    man = " ".join(_roff_text(l) for l in _read("man/tubed.1").split("\n"))
    m = re.search(r"has (\w+) keys of its own after all of beanstalkd's: ([^.]*)\.", man)
    if not m or m.group(1) != words.get(len(own)) or \
            re.findall(r"[a-z][a-z-]+", m.group(2).replace(" and ", " ")) != own:
        problems.append("man tubed(1) COMPATIBILITY: %r; stats' own keys are %s"
                        % (m and m.group(0), own))
    if "tubed adds %s at the end" % words.get(len(own)) not in _read("doc/operations.md"):
        problems.append("operations.md does not say tubed adds %s keys at the end of stats"
                        % words.get(len(own)))
    problems += _compare_metrics(scrapes)
    # The command label: 22 cmd-* keys of stats, then tubed's own, in order.
    mon = _read("doc/monitoring.md")
    said = (_ticked(_between(mon, "keys of `stats` without `cmd-` (", "),"))
            + _ticked(_between(mon, "which `stats` does not show:", "`quit` is not counted.")))
    got = [lab.get("command") for name, lab, _ in scrapes[0].samples
           if name == "tubed_commands_total"]
    if got != said:
        problems.append("tubed_commands_total's command labels %s; monitoring.md lists %s"
                        % (got, said))
    if got[:22] != [k[4:] for k in printed["stats"] if k.startswith("cmd-")]:
        problems.append("the first 22 command labels are not stats' cmd-* keys: %s" % got[:22])
    problems += _compare_tubes_json(tubes_json, printed)
    check(not problems, "\n".join(problems))


def _documented_families():
    """[(name, type, HELP)] of monitoring.md's tables, in order."""
    out = []
    for row in _md_tables("doc/monitoring.md"):
        name = re.match(r"^`(tubed_\w+)`$", row.get("name", ""))
        if name and "type" in row and "help" in row:
            out.append((name.group(1), row["type"], row["help"]))
    check(len(out) > 20, "monitoring.md: parsed too few families: %r" % out)
    return out


def _compare_metrics(scrapes):
    doc = _documented_families()
    names = [n for n, _, _ in doc]
    problems = []
    seen = set()
    for s in scrapes:
        for f in s.families:
            seen.add(f)
            if f not in names:
                problems.append("/metrics has %s (%s: %s), monitoring.md's tables do not"
                                % (f, s.type.get(f), s.help.get(f)))
                continue
            _, typ, hlp = doc[names.index(f)]
            if s.type.get(f) != typ:
                problems.append("%s: type %s, monitoring.md says %s" % (f, s.type.get(f), typ))
            if s.help.get(f) != hlp:
                problems.append("%s: HELP %r, monitoring.md says %r" % (f, s.help.get(f), hlp))
        order = [f for f in s.families if f in names]
        if order != sorted(order, key=names.index):
            problems.append("/metrics families not in the tables' order: %s" % order)
    for n in names:
        if n not in seen:
            problems.append("monitoring.md documents %s; no scrape printed it" % n)
    return problems


# -- example configs, links, man pages ---------------------------------------

def _code_blocks(text):
    """[(line, text)] of the fenced and indented code blocks of Markdown."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        m = re.match(r"^(\s*)```", lines[i])
        if m:
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            ind = len(m.group(1))
            out.append((i + 1, "\n".join(l[ind:] for l in lines[i + 1:j])))
            i = j + 1
            continue
        if lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                j += 1
            out.append((i + 1, "\n".join(l[4:] for l in lines[i:j]).rstrip()))
            i = j
            continue
        i += 1
    return out


def _all_keys():
    return set(_conf_c_keys()) | _LISTEN_KEYS


def _is_conf_line(line, keys):
    m = re.match(r"^\s*(\w+)\s*=", line)
    return bool(re.match(r"^\s*\[(tube|listen)\b", line) or (m and m.group(1) in keys))


def _example_configs():
    """[(where, text)]: every code block of README.md and doc/*.md whose
    every line (comments and blank lines aside) is a config line, and
    pkg/tubed.conf with its commented-out settings and sections turned on."""
    keys = _all_keys()
    out = []
    for rel in ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in
                                      glob.glob(os.path.join(ROOT, "doc", "*.md"))):
        for line, block in _code_blocks(_read(rel)):
            body = [l for l in block.split("\n") if l.strip() and not l.strip().startswith("#")]
            if body and all(_is_conf_line(l, keys) for l in body):
                out.append(("%s:%d" % (rel, line), block + "\n"))
    pkg = _read("pkg/tubed.conf")
    out.append(("pkg/tubed.conf", pkg))
    on = []
    started = False
    for l in pkg.split("\n"):
        started = started or "----" in l
        m = re.match(r"^#\s{1,3}(\S.*)$", l)
        if started and m and _is_conf_line(m.group(1), keys):
            on.append(m.group(1))
    check(len(on) > 30, "pkg/tubed.conf: too few commented-out settings found: %r" % on)
    out.append(("pkg/tubed.conf, its examples uncommented", "\n".join(on) + "\n"))
    return out


@no_server
@tubed_only(DOCS)
def test_docs_example_configs_pass_check_config(binary):
    """Users the examples name that this machine lacks become root (the
    check looks names up)."""
    examples = _example_configs()
    check(len(examples) >= 6, "found too few example configs: %r" % [w for w, _ in examples])
    problems = []
    for where, text in examples:
        text = re.sub(r"(?m)^(\s*users\s*=\s*)jobrunner\b", r"\1root", text)
        text = re.sub(r"(?m)^(\s*user\s*=\s*)tubed\b", r"\1root", text)
        ok, out = _check_config(binary, text)
        if not ok:
            problems.append("%s: %s" % (where, out.strip()))
    check(not problems, "\n".join(problems))


def _anchor(title):
    """GitHub's anchor for a heading."""
    t = re.sub(r"[`*_]", "", title.strip().lower())
    t = re.sub(r"[^\w\- ]", "", t)
    return t.replace(" ", "-")


@no_server
@tubed_only(DOCS)
def test_docs_relative_links_resolve(binary):
    files = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in
                                   glob.glob(os.path.join(ROOT, "doc", "*.md")))
    problems = []
    n = 0
    for rel in files:
        text = re.sub(r"(?s)```.*?```", "", _read(rel))
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue
            n += 1
            path, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(rel), path)) if path else rel
            if not os.path.exists(os.path.join(ROOT, dest)):
                problems.append("%s: link to %s: no such file" % (rel, target))
                continue
            if frag and dest.endswith(".md"):
                anchors = {_anchor(h) for h in re.findall(r"(?m)^#+\s+(.*)$", _read(dest))}
                if frag not in anchors:
                    problems.append("%s: link to %s: %s has no heading #%s" % (rel, target, dest, frag))
    check(n > 10, "found only %d relative links" % n)
    check(not problems, "\n".join(problems))


@no_server
@tubed_only(DOCS)
def test_docs_man_pages_lint_clean(binary):
    pages = sorted(glob.glob(os.path.join(ROOT, "man", "*.[17]")))
    check(len(pages) >= 4, "man pages: %r" % pages)
    problems = []
    for page in pages:
        if shutil.which("mandoc"):
            p = _run(["mandoc", "-Tlint", page])
            out = (p.stdout + p.stderr).decode()
            if p.returncode != 0 or out.strip():
                problems.append("mandoc -Tlint %s: %s" % (page, out.strip()))
        if not shutil.which("man"):
            continue
        env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8")
        p = _run(["man", "--warnings", "-l", page], env=env)
        if p.returncode != 0 or p.stderr.strip():
            problems.append("man --warnings -l %s: %s" % (page, p.stderr.decode().strip()))
        if not p.stdout.strip():
            problems.append("man -l %s printed nothing" % page)
    check(not problems, "\n".join(problems))


# -- doc/architecture.md: a room for every module, every name real ----------

def _repo_files():
    p = _run(["git", "-C", ROOT, "ls-files"])
    files = p.stdout.decode().split() if p.returncode == 0 else []
    if not files:                   # not a git checkout: walk the tree
        for d, _, fs in os.walk(ROOT):
            if "/.git" in d or "/build" in d:
                continue
            files += [os.path.relpath(os.path.join(d, f), ROOT) for f in fs]
    return files


@no_server
@tubed_only(DOCS)
def test_docs_architecture_names_every_module_and_only_real_files(binary):
    """Every src/ module of the server (.c/.h, by its stem) is named in
    architecture.md; every file it names exists (a bare name anywhere in
    the tree, a path at that path); every function it names with () is in
    src/."""
    text = _read("doc/architecture.md")
    files = _repo_files()
    base = {os.path.basename(f) for f in files}
    problems = []
    for f in files:
        if (f.startswith("src/") and f.endswith((".c", ".h"))
                and not f.startswith(("src/bench/", "src/cli/"))):
            stem = os.path.splitext(os.path.basename(f))[0]
            if not re.search(r"\b%s\b" % re.escape(stem), text):
                problems.append("architecture.md does not name %s" % f)
    for d in ("src/bench/", "src/cli/", "tests/unit/", "tests/integration/", "tests/fuzz/"):
        if d not in text:
            problems.append("architecture.md does not name %s" % d)
    for tok in sorted(set(re.findall(r"[\w./-]*\w\.(?:c|h|py|rb|sh|html|md)\b", text))):
        ok = os.path.exists(os.path.join(ROOT, tok)) if "/" in tok else tok in base
        if not ok:
            problems.append("architecture.md names %s: no such file" % tok)
    for d in sorted(set(re.findall(r"`?\b((?:src|tests)/[\w/]+/)", text)) - {"src/proto/NAME/"}):
        if not os.path.isdir(os.path.join(ROOT, d)):
            problems.append("architecture.md names %s: no such directory" % d)
    words = set()
    for f in files:
        if f.startswith("src/") and f.endswith((".c", ".h")):
            words |= set(re.findall(r"\w+", _read(f)))
    for fn in sorted(set(re.findall(r"(\w+)\(\)", text))):
        if fn not in words:
            problems.append("architecture.md names %s(): not in src/" % fn)
    check(not problems, "\n".join(problems))


@no_server
@tubed_only(DOCS)
def test_docs_metrics_example_matches_the_tables(binary):
    """monitoring.md's Example scrape shows every family of the tables but
    the replication ones (a server that never replicated), in order, with
    the tables' TYPE and HELP; promtool (when installed) finds it clean."""
    from http_util import Metrics
    text = _read("doc/monitoring.md")
    m = re.search(r"### Example\n.*?```\n(.*?)```", text, re.S)
    check(m, "monitoring.md has no Example scrape")
    ex = Metrics(m.group(1))
    doc = [(n, t, h) for n, t, h in _documented_families()
           if not n.startswith("tubed_replication_")]
    got = [(n, ex.type.get(n), ex.help.get(n)) for n in ex.families]
    if got != doc:
        fail("the Example differs from the tables:\n" + "\n".join(
            "example %r\ntables  %r" % (a, b) for a, b in zip(got + [None] * len(doc),
                                                             doc + [None] * len(got))
            if a != b))
    if shutil.which("promtool"):
        p = subprocess.run(["promtool", "check", "metrics"], input=m.group(1).encode(),
                           capture_output=True, timeout=20)
        check(p.returncode == 0, "promtool check metrics on the Example: %s"
              % (p.stdout + p.stderr).decode())


@no_server
@tubed_only(DOCS)
def test_docs_readme_flag_table_matches_help(binary):
    """README's "Using it" table: every tubed option (but the obsolete -c
    and -n, and --help/--version beside -h/-v) with --help's argument
    name and default."""
    h = _help_options(binary)
    rows = [r for r in _md_tables("README.md", "Using it") if "flag" in r]
    check(rows, "README.md: no flag table under 'Using it'")
    seen = {}
    for r in rows:
        for spec in re.findall(r"`([^`]+)`", r["flag"]):
            for o, a in _specs(spec, True)[0]:
                seen[o] = (a, r.get("default", ""))
    problems = []
    for o in sorted(set(h) - set(seen) - {"-c", "-n", "--help", "--version"}):
        problems.append("README's table lacks %s" % o)
    for o, (a, d) in sorted(seen.items()):
        if o not in h:
            problems.append("README's table has %s, tubed --help does not" % o)
            continue
        if a != h[o][0]:
            problems.append("README: argument of %s is %r, --help says %r" % (o, a, h[o][0]))
        hd = [_norm_default(x) for x in _defaults(h[o][1])]
        rd = _norm_default(d.strip("`")) if d.strip() else None
        if hd and rd not in hd and not (rd and rd.startswith(("none", "no limit", "off", "a primary"))
                                        and hd[0] in ("no limit", "off")):
            problems.append("README: default of %s is %r, --help says %r" % (o, d, hd))
    check(not problems, "\n".join(problems))


# Configs that each provoke one message of configuration.md's table.
_BAD_CONFIGS = [
 ("foo = 1\n",[]),
 ("main_listener = false\n",[]),
 ("port = x\n",[]),
 ("port =\n",[]),
 ("= 1\n",[]),
 ("hello\n",[]),
 ("port = 1\nport = 2\n",[]),
 ("[tube a]\nport = 1\n",[]),
 ("[tube a]\n[tube a]\n",[]),
 ("[tube -a]\n",[]),
 ("[tube a*b*]\n",[]),
 ("[tube a]\nmove_expired_to = -x\n",[]),
 ("[tube *]\n",[]),
 ("[tube]\n",[]),
 ("[foo]\n",[]),
 ("[listen]\n",[]),
 ("[listen a.b]\n",[]),
 ("[listen a]\naddress = 127.0.0.1:1\nport = 1\n",[]),
 ("[listen a]\nrole = read\n",[]),
 ("[listen a]\naddress = nope\n",[]),
 ("[listen a]\naddress = 127.0.0.1:1\nprotocol = x\n",[]),
 ("[listen a]\naddress = 127.0.0.1:1\nrole = x\n",[]),
 ("[listen a]\naddress = 127.0.0.1:1\ntubes = a*b\n",[]),
 ("[listen a]\naddress = 127.0.0.1:1\nusers = root\n",[]),
 ("[listen a]\naddress = unix:@DIR@/x.sock\nusers = a b\n",[]),
 ("[listen a]\naddress = unix:@DIR@/x.sock\nusers = nosuchuserxx\n",[]),
 ("[listen a]\naddress = unix:@DIR@/x.sock\ngroups = nosuchgroupxx\n",[]),
 ("[listen a]\naddress = unix:@DIR@/x.sock\nsocket_mode = 9\n",[]),
 ("[listen a]\naddress = 127.0.0.1:5\n[listen b]\naddress = 127.0.0.1:5\n",[]),
 ("port = 5\n[listen a]\naddress = 127.0.0.1:5\n",["-l","127.0.0.1"]),
 ("[listen a]\naddress = 127.0.0.1:5\n[listen a]\naddress = 127.0.0.1:6\n",[]),
 ("".join("[listen a%d]\naddress = 127.0.0.1:%d\n"%(i,100+i) for i in range(25)),[]),
 ("[listen a]\naddress = 127.0.0.1:5\ntubes = "+",".join("t%d"%i for i in range(65))+"\n",[]),
 ("[listen a]\naddress = unix:@DIR@/x.sock\nusers = "+",".join(str(i) for i in range(33))+"\n",[]),
 ("[tube a\n",[]),
 ("port = 1\x01\n",[]),
 ("listen = "+"a"*5000+"\n",[]),
 ("listen = unix:@DIR@/a.sock\nmetrics_port = 9100\n",[]),
 ("port = 9100\nmetrics_port = 9100\n",[]),
 ("listen = unix:@DIR@/a.sock\nmemcache_port = 22133\n",[]),
 ("memcache_port = 5\n[listen a]\naddress = 127.0.0.1:5\n",["-l","127.0.0.1"]),
 ("metrics_port = 5\n[listen a]\naddress = 127.0.0.1:5\n",["-l","127.0.0.1"]),
 ("[tube a]\nmax_memory_size = 1M\n",[]),
 ("[tube a]\nmax_memory_size = 1M\n[tube a*]\njournal = false\n",["-b","@DIR@/b"]),
]


def _doc_messages():
    """The messages of configuration.md's error table, as regexes (its
    placeholders K, V, N, FILE, ... stand for any text)."""
    text = _read("doc/configuration.md")
    table = _between(text, "| message | cause |", "\n\n")
    out = []
    for line in table.split("\n")[2:]:
        cell = line.split("|")[1]
        for msg in re.findall(r"`([^`]+)`", cell):
            rx = re.escape(msg)
            rx = re.sub(r"\\\.\\\.\\\.", ".+", rx)
            rx = re.sub(r"0xNN", "0x[0-9a-f]{2}", rx)
            rx = re.sub(r"\b(?:[A-Z]{1,2}|ADDR|FILE|REASON|NAME|PATH)\b", ".+?", rx)
            out.append((msg, rx))
    check(len(out) > 30, "configuration.md: parsed too few messages: %r" % out)
    return out


@no_server
@tubed_only(DOCS)
def test_docs_config_error_messages_are_the_programs(binary):
    """Every message of configuration.md's error table is what
    --check-config prints for some bad config (exit status 2)."""
    outs = []
    for text, extra in _BAD_CONFIGS:
        ok, out = _check_config(binary, text, extra)
        check(not ok, "--check-config accepted %r" % text)
        outs.append(out)
    for args in (["--config", "/nonexistent/tubed.conf"], ["-p", "9100", "--metrics-port", "9100"]):
        p = _run([binary] + args + ["--check-config"])
        eq(p.returncode, 2, "exit status of --check-config %s" % " ".join(args))
        outs.append((p.stdout + p.stderr).decode())
    problems = [msg for msg, rx in _doc_messages()
                if not any(re.search(rx, o) for o in outs)]
    check(not problems, "configuration.md documents messages no bad config produced:\n"
          + "\n".join(problems))


def _kestrel_stats_doc():
    """(server keys, per-tube keys) of kestrel.md's "stats and dump_stats",
    in order (parenthesised asides dropped)."""
    t = _read("doc/kestrel.md")
    sec = _between(t, "`stats` answers, in this order:", "A tube exists only while")
    prev = None
    while prev != sec:
        prev, sec = sec, re.sub(r"\([^()]*\)", "", sec)
    srv, _, tube = sec.partition("Then, for every tube in name order,")
    tube_keys = re.findall(r"`([a-z_0-9]+)`", tube)
    check(srv and tube_keys, "kestrel.md: no stats key lists")
    return re.findall(r"`([a-z_0-9]+)`", srv), tube_keys


@no_server
@tubed_only(DOCS)
def test_docs_memcache_stats_keys_match_kestrel_md(binary):
    """memcache `stats` and `dump_stats` of a server with a fanout parent
    print kestrel.md's keys in its order."""
    import socket
    from server import Tubed
    srv_keys, tube_keys = _kestrel_stats_doc()
    with Tubed(binary, conf="[tube p]\nfanout = true\n", memcache=True,
               prefix="tubed-docs-") as s:
        sock = socket.create_connection((harness.HOST, s.mport), timeout=5)
        try:
            sock.sendall(b"set p+c 0 0 1\r\nx\r\nset p 0 0 1\r\ny\r\nstats\r\ndump_stats\r\n")
            data = b""
            while data.count(b"END\r\n") < 2:
                chunk = sock.recv(65536)
                check(chunk, "the memcache listener closed: %r" % data)
                data += chunk
        finally:
            sock.close()
        # configuration.md's defaults of priority and ttr: a set's job has them.
        c = s.client()
        c.use("p+c")
        line, _ = c.cmd_body("peek-ready")
        check(line.startswith(b"FOUND "), "peek-ready on p+c: %r" % line)
        job = c.stats_job(int(line.split()[1]))
        doc = _doc_keys()
        for key, stat in (("priority", "pri"), ("ttr", "ttr")):
            eq(str(job[stat]), _norm_default(doc[key]["default"]),
               "a memcache set's job %s against configuration.md's %s default" % (stat, key))
    text = data.decode().replace("\r\n", "\n")
    stats = re.findall(r"^STAT (\S+) ", text, re.M)
    check("queue_default_items" in stats, "no per-tube keys in stats: %r" % text)
    problems = _ordered_match(srv_keys, stats[:stats.index("queue_default_items")])
    for tube in ("default", "p", "p+c"):
        pre = "queue_%s_" % tube
        got = [k[len(pre):] for k in stats if k.startswith(pre) and "+" not in k[len(pre):]]
        want = tube_keys if tube == "p" else [k for k in tube_keys if k != "children"]
        problems += ["stats of %s: %s" % (tube, p) for p in _ordered_match(want, got)]
        block = re.search(r"^queue '%s' \{\n(.*?)^\}" % re.escape(tube), text, re.M | re.S)
        check(block, "dump_stats has no block for %s: %r" % (tube, text))
        dumped = re.findall(r"^  (\w+)=", block.group(1), re.M)
        problems += ["dump_stats of %s: %s" % (tube, p) for p in _ordered_match(want, dumped)]
    check(not problems, "\n".join(problems))


def _compare_tubes_json(doc, printed):
    """monitoring.md's /tubes.json: "server" has stats' keys in order,
    each tube its stats-tubes keys in order; the top-level keys are those
    the page names."""
    problems = []
    text = _between(_read("doc/monitoring.md"), "## /tubes.json", "## The status page")
    named = [k for k in re.findall(r'`(\w+)`', text) if k in doc or k in ("server", "tubes", "replication")]
    for k in doc:
        if k not in named:
            problems.append("/tubes.json has a top-level %r that monitoring.md does not name" % k)
    if list(doc) not in (["server", "tubes"], ["server", "tubes", "replication"]):
        problems.append("/tubes.json's top-level keys are %s, monitoring.md says server, tubes"
                        " and (with replication) replication" % list(doc))
    if list(doc.get("server", {})) != printed["stats"]:
        problems.append("/tubes.json server keys %s differ from stats' %s"
                        % (list(doc.get("server", {})), printed["stats"]))
    for name, t in doc.get("tubes", {}).items():
        if list(t) != printed["stats-tubes"]:
            problems.append("/tubes.json tube %s keys %s differ from stats-tubes' %s"
                            % (name, list(t), printed["stats-tubes"]))
    if "replication" in doc and list(doc["replication"]) != printed["stats-replication"]:
        problems.append("/tubes.json replication keys %s differ from stats-replication's %s"
                        % (list(doc["replication"]), printed["stats-replication"]))
    return problems


@no_server
@tubed_only(DOCS)
def test_docs_named_tests_exist(binary):
    """Every test the docs cite (test_x.py::test_y, test_y, test_x.py) is
    there, in the file named when one is."""
    files = _repo_files()
    tests = [f for f in files if f.startswith("tests/")]
    defs, by_file, words = set(), {}, set()
    for f in tests:
        if f.endswith(".py"):
            names = set(re.findall(r"^def (test_\w+)", _read(f), re.M))
            by_file[os.path.basename(f)] = names
            defs |= names
        elif f.endswith(".c"):
            words |= set(re.findall(r"\w+", _read(f)))
    stems = {os.path.splitext(os.path.basename(f))[0] for f in tests}
    problems = []
    docs = ["README.md"] + [f for f in files if re.match(r"^(doc/.*\.md|man/.*\.[17])$", f)]
    for rel in docs:
        text = _read(rel)
        for fname, name in re.findall(r"(test_\w+\.py)::(test_\w+)", text):
            if name not in by_file.get(fname, ()):
                problems.append("%s cites %s::%s: no such test" % (rel, fname, name))
        for name in set(re.findall(r"\b(test_\w+)", text)):
            if name not in defs and name not in stems and name not in words:
                problems.append("%s cites %s: no such test or test file" % (rel, name))
    check(not problems, "\n".join(problems))


@no_server
@tubed_only(DOCS)
def test_docs_readme_commands_are_what_make_and_ci_run(binary):
    """README's quick start: `make run` starts the server on
    127.0.0.1:11300, and its test command's targets are those .ci/run
    makes (after the fuzzing CI adds)."""
    readme = _read("README.md")
    start = re.search(r"(?m)^    sudo apt-get install -y build-essential && make (\w+)$", readme)
    check(start and start.group(1) == "run", "README's first command is no longer make run")
    mk = _read("Makefile")
    m = re.search(r"(?m)^run: .*\n\t(.*)$", mk)
    check(m, "Makefile has no run target")
    eq(m.group(1).split()[1:], ["-l", "127.0.0.1", "-p", "11300"], "make run's flags")
    check("127.0.0.1:11300" in readme, "README no longer says where make run listens")
    test = re.search(r"(?m)^    make ((?:\w+ ?)+)$", readme)
    check(test, "README has no test command")
    ci = re.findall(r"(?m)^make (\w+)(?: .*)?$", _read(".ci/run"))
    eq([t for t in ci if t != "fuzz"], test.group(1).split(),
       "the targets .ci/run makes (fuzz aside) against README's test command")


@no_server
@tubed_only(DOCS)
def test_docs_readme_layout_and_make_targets(binary):
    """README's Layout names every doc/ page and every src/ folder, and
    its list of make targets is the Makefile's .PHONY list."""
    readme = _read("README.md")
    layout = _between(readme, "## Layout", "\n\n[")
    problems = []
    for p in sorted(glob.glob(os.path.join(ROOT, "doc", "*.md"))):
        name = os.path.splitext(os.path.basename(p))[0]
        if not re.search(r"\b%s\b" % name, layout):
            problems.append("README's Layout does not name doc/%s.md" % name)
    for d in sorted(glob.glob(os.path.join(ROOT, "src", "*", ""))):
        rel = os.path.relpath(d, ROOT) + "/"
        if rel not in layout and not any(x.startswith(rel) for x in re.findall(r"src/[\w/]+", layout)):
            problems.append("README's Layout does not name %s" % rel)
    phony = re.search(r"(?m)^\.PHONY: (.*)$", _read("Makefile")).group(1).split()
    targets = re.findall(r"`([\w-]+)`", _between(readme, "Make targets:", "\n\n"))
    targets = [t for t in targets if t not in ("PREFIX", "DESTDIR")]
    if sorted(targets) != sorted(phony):
        problems.append("README's make targets %s, the Makefile's %s" % (targets, phony))
    check(not problems, "\n".join(problems))


@no_server
@tubed_only(DOCS)
def test_docs_ocf_parameters_match_man(binary):
    """man tubed-ocf(7) lists the OCF agent's parameters (its meta-data),
    in order, with the defaults it states."""
    agent = os.path.join(ROOT, "pkg", "ocf", "tubed")
    env = dict(os.environ, OCF_ROOT=os.environ.get("OCF_ROOT", "/usr/lib/ocf"))
    if not os.path.exists(os.path.join(env["OCF_ROOT"], "lib/heartbeat/ocf-shellfuncs")):
        raise harness.Skip("no resource-agents (ocf-shellfuncs) to run the agent")
    p = _run(["sh", agent, "meta-data"], env=env)
    eq(p.returncode, 0, "%s meta-data exit status (%s)" % (agent, p.stderr.decode()))
    meta = p.stdout.decode()
    params = re.findall(r'<parameter name="(\w+)"', meta)
    defaults = dict(re.findall(r'<parameter name="(\w+)".*?<content [^>]*default="([^"]*)"',
                               meta, re.S))
    man = _read("man/tubed-ocf.7")
    text = " ".join(_roff_text(l) for l in
                    _between(man, "Parameters:", "for their meaning.").split("\n"))
    named = [w for w in re.findall(r"\b(\w+)\b", text) if w in params or w.islower() and "_" in w]
    problems = []
    if [w for w in named if w in params] != params:
        problems.append("tubed-ocf.7 lists %s; the agent's meta-data %s" % (named, params))
    for name, d in re.findall(r"\b(\w+) \(default ([^)]*)\)", text):
        if defaults.get(name) != d:
            problems.append("tubed-ocf.7: %s default %s; meta-data says %r"
                            % (name, d, defaults.get(name)))
    check(not problems, "\n".join(problems))


@no_server
@tubed_only(DOCS)
def test_docs_keepalived_settings_match_the_scripts(binary):
    """failover.md's list of keepalived settings is the set of TUBED_*
    variables the notify and check scripts and their example file use."""
    used = set()
    for f in ("tubed-keepalived-notify", "tubed-keepalived-check", "tubed-keepalived.env"):
        used |= set(re.findall(r"\bTUBED_[A-Z_]+\b", _read("pkg/keepalived/" + f)))
    text = _between(_read("doc/failover.md"), "Settings: `/etc/tubed/keepalived.env`", "\n\n")
    listed = set(re.findall(r"`(TUBED_[A-Z_]+)`", text))
    eq(sorted(listed), sorted(used), "failover.md's keepalived settings against the scripts'")


@no_server
@tubed_only(DOCS)
def test_docs_every_option_has_its_config_key(binary):
    """configuration.md: every command-line option has a key (its flag
    column), but the ones it names as having none (and the obsolete -c,
    -n); every flag in the table is an option."""
    opts = set(_help_options(binary))
    keyed = {r["flag"].strip("` ") for r in _doc_keys().values() if "flag" in r} - {"—"}
    text = _read("doc/configuration.md")
    m = re.search(r"\n\n((?:`[-\w]+`(?:, | and )?)+) have no key\.", text)
    check(m, "configuration.md no longer says which options have no key")
    none = set(re.findall(r"`([-\w]+)`", m.group(1))) | {"-c", "-n", "--help", "--version"}
    problems = ["%s has no key in configuration.md and is not among those without one" % o
                for o in sorted(opts - keyed - none)]
    problems += ["configuration.md's flag %s is no option of tubed" % f for f in sorted(keyed - opts)]
    # "long options with dashes turned into underscores"
    for key, row in _doc_keys().items():
        flag = row.get("flag", "").strip("` ")
        if flag.startswith("--") and flag[2:].replace("-", "_") != key:
            problems.append("configuration.md: %s's key is %s, not %s"
                            % (flag, key, flag[2:].replace("-", "_")))
    check(not problems, "\n".join(problems))


@no_server
@tubed_only(DOCS)
def test_docs_beanstalkds_binlog_is_refused_even_with_recover(binary):
    """operations.md and binlog.md: tubed -b on beanstalkd's directory
    refuses to start, also with --recover, and leaves the files as they
    were (the jobs are still beanstalkd's)."""
    import hashlib
    import socket
    bsd = shutil.which("beanstalkd")
    if not bsd:
        raise harness.Skip("no beanstalkd to write a binlog")
    from binlog_util import run_refusing
    d = tempfile.mkdtemp(prefix="tubed-docs-bsd-")
    try:
        # beanstalkd binds its port before it opens the binlog: the port is
        # held from now on, and a start that collides on it is tried again
        # on a new one (harness.spawn_on).
        with harness.PortReservation() as port:
            p = harness.spawn_on([port], lambda: [bsd, "-l", harness.HOST, "-p",
                                                  str(port.port), "-b", d], "beanstalkd")
            try:
                s = socket.create_connection((harness.HOST, port.port), timeout=5)
                s.sendall(b"put 0 0 60 2\r\nhi\r\n")
                eq(s.recv(100), b"INSERTED 1\r\n", "beanstalkd's put")
                s.close()
            finally:
                p.terminate()
                p.wait(10)
        files = sorted(f for f in os.listdir(d) if f.startswith("binlog."))
        check(files, "beanstalkd wrote no binlog in %s" % d)

        def digest():
            h = hashlib.sha256()
            for f in files:
                with open(os.path.join(d, f), "rb") as fh:
                    h.update(fh.read())
            return h.hexdigest()
        before = digest()
        for extra in ([], ["--recover"]):
            # tubed binds its port before it opens the binlog: run_refusing
            # runs it again on a new port if the first was taken meanwhile.
            rc, out = run_refusing(binary, ["-b", d] + extra, timeout=10)
            eq(rc, 1, "tubed %s on beanstalkd's binlog: exit status (%s)" % (extra, out))
            check("is a beanstalkd binlog, not tubed's" in out, "tubed's message: %r" % out)
            eq(sorted(f for f in os.listdir(d) if f.startswith("binlog.")), files,
               "binlog files after tubed %s" % extra)
            eq(digest(), before, "beanstalkd's binlog bytes after tubed %s" % extra)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@no_server
@tubed_only(DOCS)
def test_docs_repository_paths_exist(binary):
    """Every path into the repository the docs name (src/..., tests/...,
    pkg/..., doc/..., man/...; not an installed /usr/... one) exists."""
    problems = []
    base = {os.path.basename(f) for f in _repo_files()}
    rx = re.compile(r"(?<![\w/.-])((?:src|tests|pkg|doc|man)/[\w./-]*\w)")
    for rel in ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in
                                      glob.glob(os.path.join(ROOT, "doc", "*.md"))
                                      + glob.glob(os.path.join(ROOT, "man", "*.[17]"))):
        text = _read(rel).replace("\\-", "-")
        for path in sorted(set(rx.findall(text))):
            if "NAME" in path or os.path.exists(os.path.join(ROOT, path)):
                continue
            problems.append("%s names %s: no such file or directory" % (rel, path))
        for name in sorted(set(re.findall(r"(?<![\w/.-])([a-z_0-9-]+\.(?:c|h|py|sh|rb|js|php))\b",
                                          text))):
            if name not in base:
                problems.append("%s names %s: no file of that name" % (rel, name))
    check(not problems, "\n".join(problems))


@no_server
@tubed_only(DOCS)
def test_docs_named_functions_exist(binary):
    """Every `function()` README.md and doc/*.md name is in src/ (or a
    unit test's)."""
    words = set()
    for f in _repo_files():
        if f.startswith(("src/", "tests/unit/")) and f.endswith((".c", ".h")):
            words |= set(re.findall(r"\w+", _read(f)))
    problems = []
    for rel in ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in
                                      glob.glob(os.path.join(ROOT, "doc", "*.md"))):
        for fn in sorted(set(re.findall(r"`([a-z_][a-z0-9_]*)\(\)", _read(rel)))):
            if fn not in words:
                problems.append("%s names %s(): not in src/" % (rel, fn))
    check(not problems, "\n".join(problems))


@no_server
@tubed_only(DOCS)
def test_docs_cli_commands_match_man(binary):
    """tubed-cli --help's commands (with their arguments) are the man
    page's COMMANDS, in the same order."""
    cli = _tool(binary, "tubed-cli")
    p = _run([cli, "--help"])
    text = (p.stdout + p.stderr).decode()
    block = _between(text, "commands:\n", "\n\n")
    helped = [re.split(r"\s{2,}", l.strip())[0] for l in block.split("\n") if l.strip()]
    lines = _man_section(os.path.join(ROOT, "man/tubed-cli.1"), "COMMANDS")
    manned = [_roff_text(lines[i + 1]) for i in range(len(lines) - 1) if lines[i].startswith(".TP")]

    def norm(s):
        return re.sub(r"\s+", " ", s.lower().replace(" | ", "|").replace("[ ", "[")
                      .replace(" ]", "]")).strip()
    eq([norm(x) for x in manned], [norm(x) for x in helped],
       "man tubed-cli COMMANDS against tubed-cli --help")


@no_server
@tubed_only(DOCS)
def test_docs_bench_workloads_match_man(binary):
    """tubed-bench --help's workloads are the man page's WORKLOADS, in
    order, and -w's list names them all."""
    p = _run([_tool(binary, "tubed-bench"), "--help"])
    text = (p.stdout + p.stderr).decode()
    block = text[text.index("\nWorkloads;"):]
    helped = re.findall(r"(?m)^  ([a-z][a-z-]+)\s{2,}", block)
    lines = _man_section(os.path.join(ROOT, "man/tubed-bench.1"), "WORKLOADS")
    manned = [_roff_text(lines[i + 1]) for i in range(len(lines) - 1) if lines[i].startswith(".TP")]
    eq(manned, helped, "man tubed-bench WORKLOADS against tubed-bench --help")
    wl = re.search(r"-w, --workload NAME\s+(.*?)\n\s+-n,", text, re.S).group(1)
    for w in helped:
        check(re.search(r"\b%s\b" % re.escape(w), wl), "-w's help does not list %s" % w)


@no_server
@tubed_only(DOCS)
def test_docs_bench_csv_columns_match_man(binary):
    """man tubed-bench OUTPUT names the --csv columns in order."""
    from server import Tubed
    lines = _man_section(os.path.join(ROOT, "man/tubed-bench.1"), "OUTPUT")
    text = " ".join(_roff_text(l) for l in lines)
    m = re.search(r"With --csv the columns are (.*?)\.", text)
    check(m, "man tubed-bench OUTPUT no longer lists the CSV columns")
    said = [w for w in re.split(r",\s*|\s+and\s+", m.group(1).strip()) if w]
    with Tubed(binary, prefix="tubed-docs-") as s:
        p = _run([_tool(binary, "tubed-bench"), "-p", str(s.port), "-q", "--csv", "-n", "10"],
                 timeout=30)
    eq(p.returncode, 0, "tubed-bench --csv exit status (%s)" % p.stderr.decode())
    header = p.stdout.decode().split("\n")[0].split(",")
    eq(said, header, "man tubed-bench's CSV columns against the header tubed-bench prints")
