/* args.c — the command line; see args.h. */
#include "args.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "commands.h"
#include "numparse.h"
#include "term.h"

#ifndef TUBED_VERSION
#define TUBED_VERSION "unknown"
#endif

void args_usage(FILE *out)
{
    fprintf(out,
            "usage: tubed-cli [-h HOST] [-p PORT] [--json] COMMAND [ARG...]\n"
            "\n"
            "A client for tubed and beanstalkd.\n"
            "\n"
            "commands:\n");
    for (const Command *c = commands; c->name; c++) {
        char both[64];
        snprintf(both, sizeof both, "%s %s", c->name, c->args);
        fprintf(out, "  %-33s %s\n", both, c->help);
    }
    fprintf(out,
            "\n"
            "options:\n"
            "  -h, --host HOST   server name or address, or unix:/path "
            "(default 127.0.0.1);\n"
            "                    HOST:PORT and [V6]:PORT name the port too\n"
            "  -p, --port PORT   TCP port (default 11300)\n"
            "  -j, --json        one JSON document on stdout, for scripts\n"
            "  --no-color        no colour even on a terminal (so does NO_COLOR)\n"
            "  --timeout SECONDS give up on a silent server after SECONDS "
            "(default 10)\n"
            "  --pri N, --delay SECONDS, --ttr SECONDS\n"
            "                    put: priority (default 1024), delay (default 0),\n"
            "                    time to run (default 60)\n"
            "  --raw             peek, job: the body only, byte for byte\n"
            "  --help, --version\n"
            "\n"
            "exit status: 0 ok, 1 not found, 2 usage, 3 connection, "
            "4 server error,\n"
            "5 the server lacks a tubed extension, 6 local error. "
            "See tubed-cli(1).\n");
}

/* What one parse has seen, beyond the Cli fields. */
typedef struct Seen {
    int put_opts, raw, no_color, port;
} Seen;

static Status number(const char *opt, const char *v, uint64_t min, uint64_t max,
                     unsigned long *out, Err *e)
{
    uint64_t n;

    if (parse_u64_str(v, &n) < 0 || n < min || n > max)
        return err_set(e, ST_USAGE, "%s: '%s' is not a number from %llu to %llu",
                       opt, v, (unsigned long long)min, (unsigned long long)max);
    *out = (unsigned long)n;
    return ST_OK;
}

/* The value of an option: "--opt=V", "-oV", or the next argument. */
static const char *value(int argc, char **argv, int *i, const char *attached,
                         Err *e)
{
    if (attached)
        return attached;
    if (*i + 1 >= argc) {
        err_set(e, ST_USAGE, "%s needs a value%s", argv[*i],
                strcmp(argv[*i], "-h") == 0 ? " (help is --help)" : "");
        return NULL;
    }
    return argv[++*i];
}

/* Match "--name", "--name=V" or (short) "-cV"; sets *attached. */
static int is_opt(const char *arg, const char *lng, char shrt, const char **attached)
{
    size_t n = strlen(lng);

    *attached = NULL;
    if (strncmp(arg, lng, n) == 0 && (arg[n] == '\0' || arg[n] == '=')) {
        if (arg[n] == '=')
            *attached = arg + n + 1;
        return 1;
    }
    if (shrt && arg[0] == '-' && arg[1] == shrt) {
        if (arg[2])
            *attached = arg + 2;
        return 1;
    }
    return 0;
}

/* Options without a value: 1 if `a` is one (set), else 0; -1 when it
 * was --help or --version, answered on stdout. */
static int flag_opt(Cli *cli, Seen *s, const char *a)
{
    if (strcmp(a, "--help") == 0 || strcmp(a, "-help") == 0) {
        args_usage(stdout);
        return -1;
    }
    if (strcmp(a, "--version") == 0) {
        printf("tubed-cli %s\n", TUBED_VERSION);
        return -1;
    }
    if (strcmp(a, "--json") == 0 || strcmp(a, "-j") == 0)
        cli->json = 1;
    else if (strcmp(a, "--no-color") == 0)
        s->no_color = 1;
    else if (strcmp(a, "--raw") == 0)
        cli->raw = s->raw = 1;
    else
        return 0;
    return 1;
}

/* -h, -p, --timeout: 1 if `a` is one of them, with *st the outcome. */
static int conn_opt(Cli *cli, Seen *s, int argc, char **argv, int *i, Status *st,
                    Err *e)
{
    const char *a = argv[*i], *v, *att;
    unsigned long n = 0;

    *st = ST_USAGE;
    if (is_opt(a, "--host", 'h', &att)) {
        if ((v = value(argc, argv, i, att, e)) && !*v)
            err_set(e, ST_USAGE, "empty host");
        else if (v)
            cli->host = v, *st = ST_OK;
    } else if (is_opt(a, "--port", 'p', &att)) {
        if ((v = value(argc, argv, i, att, e)) && !number("port", v, 1, 65535, &n, e))
            cli->port = v, s->port = 1, *st = ST_OK;
    } else if (is_opt(a, "--timeout", 0, &att)) {
        if ((v = value(argc, argv, i, att, e)) &&
            !number("--timeout", v, 1, 86400, &n, e))
            cli->timeout_ms = (int)n * 1000, *st = ST_OK;
    } else {
        return 0;
    }
    return 1;
}

/* --pri, --delay, --ttr: 1 if `a` is one of them, with *st the outcome. */
static int put_opt(Cli *cli, Seen *s, int argc, char **argv, int *i, Status *st,
                   Err *e)
{
    const struct { const char *name; unsigned long *dst; } put[] = {
        {"--pri", &cli->pri}, {"--delay", &cli->delay}, {"--ttr", &cli->ttr},
    };
    const char *v, *att;

    for (size_t k = 0; k < sizeof put / sizeof put[0]; k++) {
        if (!is_opt(argv[*i], put[k].name, 0, &att))
            continue;
        s->put_opts = 1;
        *st = ST_USAGE;
        if ((v = value(argc, argv, i, att, e)) &&
            !number(put[k].name, v, 0, UINT32_MAX, put[k].dst, e))
            *st = ST_OK;
        return 1;
    }
    return 0;
}

/* One option at argv[*i]: ST_OK, ST_USAGE, or -1 for help/version. */
static int one_opt(Cli *cli, Seen *s, int argc, char **argv, int *i, Err *e)
{
    Status st;
    int r = flag_opt(cli, s, argv[*i]);

    if (r < 0)
        return -1;
    if (r > 0)
        return ST_OK;
    if (conn_opt(cli, s, argc, argv, i, &st, e) || put_opt(cli, s, argc, argv, i, &st, e))
        return st;
    return err_set(e, ST_USAGE, "unknown option '%s'", argv[*i]);
}

/* -h HOST:PORT or [V6]:PORT, as `replication` shows the primary and
 * `follow` takes it: split into host and port (-p then says it twice).
 * A bare IPv6 address has two colons or more and stays whole. */
static Status split_host_port(Cli *cli, const Seen *s, Err *e)
{
    static char host[256];
    const char *h = cli->host, *colon = strrchr(h, ':'), *port;
    size_t hl;
    unsigned long n;

    if (strncmp(h, "unix:", 5) == 0 || !colon)
        return ST_OK;
    if (h[0] == '[') {
        if (colon == h || colon[-1] != ']')
            return ST_OK;               /* "[::1]": no port */
        h++;
        hl = (size_t)(colon - 1 - h);
    } else if (strchr(h, ':') != colon) {
        return ST_OK;                   /* "::1" */
    } else {
        hl = (size_t)(colon - h);
    }
    port = colon + 1;
    if (hl == 0 || hl >= sizeof host)
        return err_set(e, ST_USAGE, "-h: '%s' is not HOST, HOST:PORT or [V6]:PORT",
                       cli->host);
    if (s->port)
        return err_set(e, ST_USAGE, "-h %s names a port already: leave out -p",
                       cli->host);
    if (number("port", port, 1, 65535, &n, e) != ST_OK)
        return ST_USAGE;
    memcpy(host, h, hl);
    host[hl] = '\0';
    cli->host = host;
    cli->port = port;
    return ST_OK;
}

/* Does n arguments fit one of the command's forms (its rows, which
 * stand together in the table)? */
static int arity_fits(const Command *c, int n)
{
    for (const Command *f = c; f->name && strcmp(f->name, c->name) == 0; f++)
        if (n >= f->min_args && n <= f->max_args)
            return 1;
    return 0;
}

/* "usage: tubed-cli move ID... TUBE | move FROM STATE TUBE". */
static Status usage_of(const Command *c, Err *e)
{
    size_t n = (size_t)snprintf(e->msg, sizeof e->msg, "usage: tubed-cli");

    for (const Command *f = c; f->name && strcmp(f->name, c->name) == 0 &&
                               n < sizeof e->msg; f++)
        n += (size_t)snprintf(e->msg + n, sizeof e->msg - n, "%s %s%s%s",
                              f == c ? "" : " |", f->name,
                              *f->args ? " " : " (no arguments)", f->args);
    e->code = ST_USAGE;
    return ST_USAGE;
}

static Status check_command(const Cli *cli, const Seen *s, char **pos, int npos,
                            Err *e)
{
    const Command *c;

    if (npos == 0)
        return err_set(e, ST_USAGE, "no command given");
    if (!(c = command_find(pos[0])))
        return err_set(e, ST_USAGE, "unknown command '%s'", pos[0]);
    if (!arity_fits(c, npos - 1))
        return usage_of(c, e);
    if (s->put_opts && strcmp(c->name, "put") != 0)
        return err_set(e, ST_USAGE, "--pri, --delay and --ttr are for put");
    if (s->raw && strcmp(c->name, "peek") != 0 && strcmp(c->name, "job") != 0)
        return err_set(e, ST_USAGE, "--raw is for peek and job");
    if (s->raw && cli->json)
        return err_set(e, ST_USAGE, "--raw and --json do not go together");
    return ST_OK;
}

int args_parse(Cli *cli, int argc, char **argv, char ***pos, int *npos, Err *e)
{
    Seen s = {0};
    int only_pos = 0, r;

    memset(cli, 0, sizeof *cli);
    cli->host = "127.0.0.1";
    cli->port = "11300";
    cli->timeout_ms = 10000;
    cli->pri = 1024;
    cli->ttr = 60;
    *npos = 0;
    *pos = tb_calloc((size_t)argc + 1, sizeof **pos);
    if (!*pos)
        return err_set(e, ST_LOCAL, "out of memory");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_pos || a[0] != '-' || strcmp(a, "-") == 0) {
            (*pos)[(*npos)++] = argv[i];
        } else if (strcmp(a, "--") == 0) {
            only_pos = 1;
        } else if ((r = one_opt(cli, &s, argc, argv, &i, e)) != ST_OK) {
            return r;
        }
    }
    if (split_host_port(cli, &s, e) != ST_OK)
        return ST_USAGE;
    cli->color = !s.no_color && term_color(STDOUT_FILENO);
    cli->width = term_width(STDOUT_FILENO);
    return check_command(cli, &s, *pos, *npos, e);
}
