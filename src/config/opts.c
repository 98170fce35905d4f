#include "opts.h"

#include <string.h>

#include "numparse.h"

void opts_defaults(Config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->port = DEFAULT_PORT;
    cfg->max_job_size = DEFAULT_MAX_JOB_SIZE;
    cfg->binlog_size = DEFAULT_BINLOG_SIZE;
    cfg->fsync_ms = DEFAULT_FSYNC_MS;
    cfg->stall_timeout = 30;
}

void opts_usage(FILE *f, const char *prog)
{
    fprintf(f,
        "Usage: %s [OPTIONS]\n"
        "Options:\n"
        " -b DIR   write-ahead log directory\n"
        " -f MS    fsync at most once every MS milliseconds (default %d);\n"
        "          -f0 syncs before every acknowledgement (group commit)\n"
        " -F       never fsync\n"
        " -l ADDR  listen on address ADDR (default 0.0.0.0), or unix:PATH\n"
        " -p PORT  listen on port PORT (default %d)\n"
        " -u USER  become user USER after binding\n"
        " -z BYTES maximum job size in bytes (default %d, at most %llu)\n"
        " -s BYTES size of each write-ahead log file (default %llu)\n"
        " -c, -n   accepted and ignored (obsolete in beanstalkd)\n"
        " -V       increase verbosity (-V connections, -VV commands)\n"
        " -v       show version information and exit\n"
        " -h       show this help and exit\n"
        " --max-connections N  refuse connections past N open ones\n"
        " --job-memory BYTES  past this much job memory (bodies and headers)\n"
        "            put answers OUT_OF_MEMORY; other commands work (default: no limit)\n"
        " --stall-timeout S  close a client that has read none of its queued\n"
        "            replies (256 KiB) for S seconds (default 30)\n"
        " --recover  start even if the binlog is damaged, keeping every valid\n"
        "            record and reporting what was dropped\n",
        prog, DEFAULT_FSYNC_MS, DEFAULT_PORT, DEFAULT_MAX_JOB_SIZE,
        MAX_JOB_SIZE_LIMIT, DEFAULT_BINLOG_SIZE);
}

static int number(const char *flag, const char *val, uint64_t max,
                  uint64_t *out, char *err, size_t errlen)
{
    if (parse_u64_str(val, out) < 0 || *out > max) {
        snprintf(err, errlen, "invalid value for %s: '%s' (want a number up to %llu)",
                 flag, val, (unsigned long long)max);
        return -1;
    }
    return 0;
}

/* Apply one flag that takes a value. */
static int apply(Config *cfg, const char *flag, const char *val, char *err,
                 size_t errlen)
{
    uint64_t v;

    if (!strcmp(flag, "-b")) {
        cfg->binlog_dir = val;
    } else if (!strcmp(flag, "-l")) {
        cfg->listen_addr = val;
        cfg->addr_given = 1;
    } else if (!strcmp(flag, "-u")) {
        cfg->user = val;
    } else if (!strcmp(flag, "-p")) {
        if (number(flag, val, 65535, &v, err, errlen) < 0)
            return -1;
        cfg->port = (int)v;
        cfg->addr_given = 1;
    } else if (!strcmp(flag, "-z")) {
        if (number(flag, val, UINT64_MAX, &v, err, errlen) < 0)
            return -1;
        if (v > MAX_JOB_SIZE_LIMIT) { /* beanstalkd caps it and runs */
            fprintf(stderr, "tubed: warning: maximum job size was set to %llu\n",
                    MAX_JOB_SIZE_LIMIT);
            v = MAX_JOB_SIZE_LIMIT;
        }
        cfg->max_job_size = (uint32_t)v;
    } else if (!strcmp(flag, "-s")) {
        if (number(flag, val, UINT32_MAX, &v, err, errlen) < 0)
            return -1;
        cfg->binlog_size = v;
    } else if (!strcmp(flag, "-f")) {
        if (number(flag, val, UINT32_MAX, &cfg->fsync_ms, err, errlen) < 0)
            return -1;
    } else if (!strcmp(flag, "--stall-timeout")) {
        if (number(flag, val, 86400, &cfg->stall_timeout, err, errlen) < 0)
            return -1;
        if (!cfg->stall_timeout) {
            snprintf(err, errlen, "--stall-timeout must be at least 1 second");
            return -1;
        }
    } else if (!strcmp(flag, "--job-memory")) {
        if (number(flag, val, UINT64_MAX, &cfg->job_memory, err, errlen) < 0)
            return -1;
    } else if (!strcmp(flag, "--max-connections")) {
        if (number(flag, val, UINT32_MAX, &cfg->max_connections, err, errlen) < 0)
            return -1;
    } else {
        snprintf(err, errlen, "unknown option: %s", flag);
        return -1;
    }
    return 0;
}

static const char *const long_with_value[] = {"--max-connections", "--stall-timeout",
                                              "--job-memory", NULL};

static int parse_long(Config *cfg, int argc, char **argv, int *i, char *err,
                      size_t errlen)
{
    char name[64];
    const char *arg = argv[*i], *eq = strchr(arg, '=');
    size_t n = eq ? (size_t)(eq - arg) : strlen(arg);

    if (n >= sizeof name) {
        snprintf(err, errlen, "unknown option: %s", arg);
        return -1;
    }
    memcpy(name, arg, n);
    name[n] = '\0';
    for (int k = 0; long_with_value[k]; k++) {
        if (strcmp(name, long_with_value[k]))
            continue;
        if (eq)
            return apply(cfg, name, eq + 1, err, errlen);
        if (*i + 1 >= argc) {
            snprintf(err, errlen, "option %s requires an argument", name);
            return -1;
        }
        return apply(cfg, name, argv[++*i], err, errlen);
    }
    snprintf(err, errlen, "unknown option: %s", arg);
    return -1;
}

/* One "-abc" word; may consume the next argv word as a value. */
static int parse_short(Config *cfg, int argc, char **argv, int *i, FILE *out,
                       const char *prog, char *err, size_t errlen)
{
    const char *w = argv[*i] + 1;

    if (!*w) {
        snprintf(err, errlen, "unknown option: -");
        return OPTS_ERROR;
    }
    for (; *w; w++) {
        char flag[3] = {'-', *w, '\0'};
        switch (*w) {
        case 'V': cfg->verbosity++; break;
        case 'F': cfg->fsync_never = 1; break;
        case 'c': case 'n': break; /* obsolete in beanstalkd too */
        case 'v': fprintf(out, "tubed %s\n", TUBED_VERSION); return OPTS_EXIT_OK;
        case 'h': opts_usage(out, prog); return OPTS_EXIT_OK;
        case 'b': case 'f': case 'l': case 'p': case 'u': case 'z': case 's':
            if (w[1]) {
                if (apply(cfg, flag, w + 1, err, errlen) < 0)
                    return OPTS_ERROR;
            } else if (*i + 1 < argc) {
                if (apply(cfg, flag, argv[++*i], err, errlen) < 0)
                    return OPTS_ERROR;
            } else {
                snprintf(err, errlen, "option %s requires an argument", flag);
                return OPTS_ERROR;
            }
            return OPTS_RUN;
        default:
            snprintf(err, errlen, "unknown option: -%c", *w);
            return OPTS_ERROR;
        }
    }
    return OPTS_RUN;
}

int opts_parse(Config *cfg, int argc, char **argv, FILE *out, char *err,
               size_t errlen)
{
    const char *prog = argc > 0 ? argv[0] : "tubed";

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r;

        if (!strcmp(a, "--help")) {
            opts_usage(out, prog);
            return OPTS_EXIT_OK;
        }
        if (!strcmp(a, "--recover")) {
            cfg->recover = 1;
            continue;
        }
        if (!strcmp(a, "--version")) {
            fprintf(out, "tubed %s\n", TUBED_VERSION);
            return OPTS_EXIT_OK;
        }
        if (a[0] != '-') {
            snprintf(err, errlen, "unexpected argument: %s", a);
            return OPTS_ERROR;
        }
        if (a[1] == '-') {
            if (parse_long(cfg, argc, argv, &i, err, errlen) < 0)
                return OPTS_ERROR;
            continue;
        }
        r = parse_short(cfg, argc, argv, &i, out, prog, err, errlen);
        if (r != OPTS_RUN)
            return r;
    }
    return OPTS_RUN;
}
