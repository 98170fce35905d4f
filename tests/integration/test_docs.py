"""The docs say what the program does (README.md, doc/*.md, man/*).

Mechanical checks, each cheap: every option of --help is in the man page
and back (spelling, argument name, default); every config key of
src/config/conf.c is in doc/configuration.md's tables and back (default,
reload); every stats key the server prints is documented in its order;
every /metrics family is in doc/monitoring.md with its type; every example
config passes --check-config; every relative link resolves; the man pages
lint clean.  Servers are started only where a live answer is compared."""

import glob
import os
import re
import shutil
import subprocess
import tempfile

import harness
from harness import check, eq, fail, no_server

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

SERVER = "none"


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
def test_docs_tubed_options_match_man(binary):
    p = _compare_options(binary, "man/tubed.1")
    check(not p, "\n".join(p))


@no_server
def test_docs_cli_options_match_man(binary):
    p = _compare_options(_tool(binary, "tubed-cli"), "man/tubed-cli.1")
    check(not p, "\n".join(p))


@no_server
def test_docs_bench_options_match_man(binary):
    p = _compare_options(_tool(binary, "tubed-bench"), "man/tubed-bench.1")
    check(not p, "\n".join(p))
