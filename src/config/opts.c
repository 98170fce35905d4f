#include "opts.h"

#include <errno.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ascii.h"
#include "hostport.h"
#include "numparse.h"

void opts_defaults(Config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->port = DEFAULT_PORT;
    cfg->max_job_size = DEFAULT_MAX_JOB_SIZE;
    cfg->binlog_size = DEFAULT_BINLOG_SIZE;
    cfg->fsync_ms = DEFAULT_FSYNC_MS;
    cfg->stall_timeout = 30;
    cfg->repl_backlog = DEFAULT_REPL_BACKLOG;
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
        " -v       show version information and exit (also --version)\n"
        " -h       show this help and exit (also --help)\n"
        " --max-connections N  refuse connections past N open ones\n"
        "            (default: no limit)\n"
        " --job-memory BYTES  past this much job memory (bodies and headers;\n"
        "            bytes, K, M or G) put answers OUT_OF_MEMORY; other\n"
        "            commands work (default: no limit)\n"
        " --stall-timeout SECONDS  close a client that has read none of its\n"
        "            queued replies (256 KiB) for SECONDS (default 30; or 5m, 1h...)\n"
        " --recover  start even if the binlog is damaged, keeping every valid\n"
        "            record and reporting what was dropped\n"
        " --config FILE  server settings and tube policies from FILE; the\n"
        "            command line wins over it, key by key (no short form: -c\n"
        "            keeps its beanstalkd meaning)\n"
        " --check-config  check the flags and the --config file (if any),\n"
        "            print 'FILE: ok' (or 'command line: ok') and exit\n"
        "            (status 2 and the error if not)\n"
        " --memcache-port PORT  also serve kestrel's memcache protocol on PORT\n"
        "            (default: off)\n"
        " --metrics-port PORT  serve Prometheus metrics over HTTP on PORT\n"
        "            (default: off)\n"
        " --replica-of HOST:PORT  start as a replica of the primary whose\n"
        "            beanstalk address is HOST:PORT (needs -b)\n"
        " --sync-replicas N  acknowledge a change only once N replicas have\n"
        "            it (default: 0; needs -b)\n"
        " --repl-backlog BYTES  keep this much of the replication stream so a\n"
        "            replica that reconnects gets only what it lacks (default\n"
        "            16M; 0: every reconnection is a full resync)\n"
        " --import-beanstalkd DIR  at start, take over the jobs in beanstalkd's\n"
        "            binlog directory DIR (read only) when tubed's binlog holds\n"
        "            none yet; ignored once done (needs -b)\n",
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

/* -p, -f and -s as beanstalkd takes them (getaddrinfo's port, sscanf's
 * "%zu"): leading blanks and a '+' before the digits. What beanstalkd
 * wraps (a negative number, a port above 65535) stays an error here:
 * it would run with a size or port nobody asked for. */
static int beanstalkd_number(const char *flag, const char *val, uint64_t max,
                             uint64_t *out, char *err, size_t errlen)
{
    const char *p = val;

    while (*p == ' ' || (*p >= '\t' && *p <= '\r'))
        p++;
    if (*p == '+' && p[1] >= '0' && p[1] <= '9')
        p++;
    if (parse_u64_str(p, out) == 0 && *out <= max)
        return 0;
    return number(flag, val, max, out, err, errlen);
}

/* Whole seconds with an optional s, m, h or d, as the file's stall_timeout
 * takes them (its ms form is never whole seconds' business here). */
static int whole_seconds(const char *val, uint64_t *out)
{
    static const struct { char unit; uint64_t mul; } units[] = {
        {'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400},
    };
    size_t n = strlen(val);
    uint64_t mul = 1;

    for (size_t i = 0; n && i < sizeof units / sizeof units[0]; i++)
        if (val[n - 1] == units[i].unit) {
            mul = units[i].mul;
            n--;
            break;
        }
    if (parse_u64(val, n, out) < 0 || *out > UINT64_MAX / mul)
        return -1;
    *out *= mul;
    return 0;
}

/* -z as beanstalkd reads it (sscanf "%zu" and nothing after): leading
 * blanks and a sign are taken, a negative number wraps and one too large
 * saturates, both then capped with beanstalkd's warning; so "-z -1" runs
 * with the largest size, as it does there. */
static int job_size_number(const char *val, uint64_t *out)
{
    const char *p = val;
    uint64_t v = 0;
    int neg = 0, sat = 0;

    while (*p == ' ' || (*p >= '\t' && *p <= '\r'))
        p++;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            sat = 1;
        v = sat ? UINT64_MAX : v * 10 + d;
    }
    if (*p)
        return -1;
    *out = neg && !sat ? (uint64_t)0 - v : v;
    return 0;
}

/* Bytes with an optional K, M or G (powers of 1024), as the file's sizes. */
static int parse_size_str(const char *val, uint64_t *out)
{
    size_t n = strlen(val);
    unsigned shift = 0;

    if (n && (val[n - 1] == 'K' || val[n - 1] == 'M' || val[n - 1] == 'G')) {
        shift = val[n - 1] == 'K' ? 10 : val[n - 1] == 'M' ? 20 : 30;
        n--;
    }
    if (parse_u64(val, n, out) < 0 || *out > (UINT64_MAX >> shift))
        return -1;
    *out <<= shift;
    return 0;
}

/* The file key a flag with a value stands for (0 for --config). */
static uint32_t cli_key(const char *flag)
{
    static const struct { const char *flag; int key; } map[] = {
        {"-b", SK_BINLOG_DIR}, {"-l", SK_LISTEN}, {"-u", SK_USER}, {"-p", SK_PORT},
        {"-z", SK_MAX_JOB_SIZE}, {"-s", SK_BINLOG_FILE_SIZE}, {"-f", SK_FSYNC_MS},
        {"--stall-timeout", SK_STALL_TIMEOUT}, {"--job-memory", SK_JOB_MEMORY},
        {"--max-connections", SK_MAX_CONNECTIONS}, {"--memcache-port", SK_MEMCACHE_PORT},
        {"--metrics-port", SK_METRICS_PORT}, {"--replica-of", SK_REPLICA_OF},
        {"--sync-replicas", SK_SYNC_REPLICAS}, {"--repl-backlog", SK_REPL_BACKLOG},
        {"--import-beanstalkd", SK_IMPORT_BEANSTALKD},
    };

    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(flag, map[i].flag))
            return CONF_BIT(map[i].key);
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
    } else if (!strcmp(flag, "--config")) {
        cfg->config_path = val;
    } else if (!strcmp(flag, "--replica-of")) {
        cfg->replica_of = val;
    } else if (!strcmp(flag, "--sync-replicas")) {
        if (number(flag, val, 255, &v, err, errlen) < 0)
            return -1;
        cfg->sync_replicas = (uint32_t)v;
    } else if (!strcmp(flag, "--import-beanstalkd")) {
        if (!*val) {
            snprintf(err, errlen, "invalid value for %s: '' (want beanstalkd's binlog "
                     "directory)", flag);
            return -1;
        }
        cfg->import_dir = val;
    } else if (!strcmp(flag, "--repl-backlog")) {
        if (parse_size_str(val, &v) < 0 || v > (uint64_t)1 << 40) {
            snprintf(err, errlen, "invalid value for %s: '%s' (want bytes, K, M or G, "
                     "up to 1T)", flag, val);
            return -1;
        }
        cfg->repl_backlog = v;
    } else if (!strcmp(flag, "--memcache-port")) {
        if (number(flag, val, 65535, &v, err, errlen) < 0)
            return -1;
        cfg->memcache_port = (int)v;
    } else if (!strcmp(flag, "--metrics-port")) {
        if (number(flag, val, 65535, &v, err, errlen) < 0)
            return -1;
        cfg->metrics_port = (int)v;
    } else if (!strcmp(flag, "-p")) {
        /* beanstalkd hands -p to getaddrinfo as the service: a name from
         * the services database (-p http-alt) is its port there too. */
        const struct servent *se = NULL;
        if (beanstalkd_number(flag, val, 65535, &v, err, errlen) < 0) {
            se = *val ? getservbyname(val, "tcp") : NULL;
            if (!se)
                return -1;
            v = ntohs((uint16_t)se->s_port);
        }
        cfg->port = (int)v;
        cfg->addr_given = 1;
    } else if (!strcmp(flag, "-z")) {
        if (job_size_number(val, &v) < 0) {
            snprintf(err, errlen, "invalid value for %s: '%s' (want a number of bytes)",
                     flag, val);
            return -1;
        }
        if (v > MAX_JOB_SIZE_LIMIT) { /* beanstalkd caps it and runs */
            fprintf(stderr, "tubed: warning: maximum job size was set to %llu\n",
                    MAX_JOB_SIZE_LIMIT);
            v = MAX_JOB_SIZE_LIMIT;
        }
        cfg->max_job_size = (uint32_t)v;
    } else if (!strcmp(flag, "-s")) {
        if (beanstalkd_number(flag, val, UINT32_MAX, &v, err, errlen) < 0)
            return -1;
        cfg->binlog_size = v;
    } else if (!strcmp(flag, "-f")) {
        if (beanstalkd_number(flag, val, UINT32_MAX, &cfg->fsync_ms, err, errlen) < 0)
            return -1;
        /* As in beanstalkd, -f turns syncing on: after -F the last wins,
         * and over the file's no_fsync the command line does. */
        cfg->fsync_never = 0;
        cfg->cli_set |= CONF_BIT(SK_NO_FSYNC);
    } else if (!strcmp(flag, "--stall-timeout")) {
        if (whole_seconds(val, &cfg->stall_timeout) < 0 || cfg->stall_timeout > 86400) {
            snprintf(err, errlen, "invalid value for %s: '%s' (want whole seconds up to "
                     "86400: a number with an optional s, m, h or d)", flag, val);
            return -1;
        }
        if (!cfg->stall_timeout) {
            snprintf(err, errlen, "--stall-timeout must be at least 1 second");
            return -1;
        }
    } else if (!strcmp(flag, "--job-memory")) {
        /* A size, as job_memory in the file and --repl-backlog take. */
        if (parse_size_str(val, &cfg->job_memory) < 0) {
            snprintf(err, errlen, "invalid value for %s: '%s' (want bytes, K, M or G)",
                     flag, val);
            return -1;
        }
    } else if (!strcmp(flag, "--max-connections")) {
        if (number(flag, val, UINT32_MAX, &cfg->max_connections, err, errlen) < 0)
            return -1;
    } else {
        snprintf(err, errlen, "unknown option: %s", flag);
        return -1;
    }
    cfg->cli_set |= cli_key(flag);
    return 0;
}

static const char *const long_with_value[] = {"--max-connections", "--stall-timeout",
                                              "--job-memory", "--config",
                                              "--memcache-port", "--metrics-port",
                                              "--replica-of", "--sync-replicas",
                                              "--repl-backlog", "--import-beanstalkd",
                                              NULL};

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
        case 'V':
            cfg->verbosity++;
            cfg->cli_set |= CONF_BIT(SK_VERBOSE);
            break;
        case 'F':
            cfg->fsync_never = 1;
            cfg->cli_set |= CONF_BIT(SK_NO_FSYNC);
            break;
        case 'c': case 'n': break; /* obsolete in beanstalkd too */
        case 'v': fprintf(out, "tubed %s\n", TUBED_VERSION); return OPTS_EXIT_OK;
        case 'h': return OPTS_HELP; /* usage on stderr, as beanstalkd */
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

/* ---- the config file ---------------------------------------------------- */

/* Set the Config field of server key k from the file's value. */
static void set_key(Config *c, const ConfServer *s, int k)
{
    switch (k) {
    case SK_LISTEN: c->listen_addr = s->listen; c->addr_given = 1; break;
    case SK_PORT: c->port = (int)s->port; c->addr_given = 1; break;
    case SK_MAX_JOB_SIZE: c->max_job_size = s->max_job_size; break;
    case SK_USER: c->user = s->user; break;
    case SK_BINLOG_DIR: c->binlog_dir = s->binlog_dir; break;
    case SK_FSYNC_MS: c->fsync_ms = s->fsync_ms; break;
    case SK_NO_FSYNC: c->fsync_never = s->no_fsync; break;
    case SK_BINLOG_FILE_SIZE: c->binlog_size = s->binlog_file_size; break;
    case SK_VERBOSE: c->verbosity = (int)s->verbose; break;
    case SK_MAX_CONNECTIONS: c->max_connections = s->max_connections; break;
    case SK_STALL_TIMEOUT: c->stall_timeout = s->stall_timeout_ms / 1000; break;
    case SK_JOB_MEMORY: c->job_memory = s->job_memory; break;
    case SK_RECOVER: c->recover = s->recover; break;
    case SK_MEMCACHE_PORT: c->memcache_port = (int)s->memcache_port; break;
    case SK_METRICS_PORT: c->metrics_port = (int)s->metrics_port; break;
    case SK_ALLOW_SHUTDOWN: c->allow_shutdown = s->allow_shutdown; break;
    case SK_MAIN_LISTENER: c->no_main_listener = !s->main_listener; break;
    case SK_REPLICA_OF: c->replica_of = s->replica_of; break;
    case SK_SYNC_REPLICAS: c->sync_replicas = s->sync_replicas; break;
    case SK_ALLOW_REMOTE_ADMIN: c->allow_remote_admin = s->allow_remote_admin; break;
    case SK_REPL_BACKLOG: c->repl_backlog = s->repl_backlog; break;
    case SK_IMPORT_BEANSTALKD: c->import_dir = s->import_beanstalkd; break;
    }
}

/* Where server key k lives in a Config, and its size; *is_str for the
 * strings (const char *). */
static void *cfg_field(Config *c, int k, size_t *size, int *is_str)
{
#define F(field) (*size = sizeof c->field, (void *)&c->field)
    *is_str = k == SK_LISTEN || k == SK_USER || k == SK_BINLOG_DIR || k == SK_REPLICA_OF ||
              k == SK_IMPORT_BEANSTALKD;
    switch (k) {
    case SK_LISTEN: return F(listen_addr);
    case SK_PORT: return F(port);
    case SK_MAX_JOB_SIZE: return F(max_job_size);
    case SK_USER: return F(user);
    case SK_BINLOG_DIR: return F(binlog_dir);
    case SK_FSYNC_MS: return F(fsync_ms);
    case SK_NO_FSYNC: return F(fsync_never);
    case SK_BINLOG_FILE_SIZE: return F(binlog_size);
    case SK_VERBOSE: return F(verbosity);
    case SK_MAX_CONNECTIONS: return F(max_connections);
    case SK_STALL_TIMEOUT: return F(stall_timeout);
    case SK_JOB_MEMORY: return F(job_memory);
    case SK_RECOVER: return F(recover);
    case SK_MEMCACHE_PORT: return F(memcache_port);
    case SK_METRICS_PORT: return F(metrics_port);
    case SK_ALLOW_SHUTDOWN: return F(allow_shutdown);
    case SK_REPLICA_OF: return F(replica_of);
    case SK_SYNC_REPLICAS: return F(sync_replicas);
    case SK_ALLOW_REMOTE_ADMIN: return F(allow_remote_admin);
    case SK_REPL_BACKLOG: return F(repl_backlog);
    case SK_IMPORT_BEANSTALKD: return F(import_dir);
    default: return F(no_main_listener);
    }
#undef F
}

/* Copy the strings the Config takes from the file into one block it owns,
 * so the file can be replaced at reload without leaving them dangling. */
static int own_strings(Config *cfg, uint32_t taken)
{
    static const int str_keys[] = {SK_LISTEN, SK_USER, SK_BINLOG_DIR, SK_REPLICA_OF,
                                   SK_IMPORT_BEANSTALKD};
    const size_t nstr = sizeof str_keys / sizeof str_keys[0];
    size_t total = 0, sz;
    int is_str;
    char *p;

    for (size_t i = 0; i < nstr; i++)
        if (taken & CONF_BIT(str_keys[i]))
            total += strlen(*(const char **)cfg_field(cfg, str_keys[i], &sz, &is_str)) + 1;
    if (!total)
        return 0;
    if (!(p = cfg->file_strings = tb_malloc(total)))
        return -1;
    for (size_t i = 0; i < nstr; i++) {
        const char **f = cfg_field(cfg, str_keys[i], &sz, &is_str);
        size_t n;
        if (!(taken & CONF_BIT(str_keys[i])))
            continue;
        n = strlen(*f) + 1;
        memcpy(p, *f, n);
        *f = p;
        p += n;
    }
    return 0;
}

/* Did systemd hand us sockets, and under which names (LISTEN_FDNAMES,
 * colon-separated)? Asked once, when the command line is read: the
 * server takes them and unsets the variables, and a reload must judge
 * the file as that start did. */
static int socket_activated_names(const char **names)
{
    static int cached = -1;
    static char fdnames[1024];

    if (cached < 0) {
        const char *n = getenv("LISTEN_FDNAMES");
        cached = getenv("LISTEN_FDS") != NULL;
        snprintf(fdnames, sizeof fdnames, "%s", n ? n : "");
    }
    if (names)
        *names = fdnames;
    return cached;
}

static int socket_activated(void)
{
    return socket_activated_names(NULL);
}

/* Does the listener called name (memcache, metrics) take an inherited
 * socket of that name, so that its port is not used? */
static int inherits(const char *name)
{
    const char *names, *p;
    size_t n = strlen(name);

    if (!socket_activated_names(&names))
        return 0;
    for (p = names; *p; p = strchr(p, ':') ? strchr(p, ':') + 1 : p + strlen(p))
        if (!strncmp(p, name, n) && (p[n] == ':' || !p[n]))
            return 1;
    return 0;
}

/* A [listen] section on the address of the -l/-p listener, or of the
 * --memcache-port and --metrics-port ones (which share -l's host). */
static int main_clash(const Config *cfg, char *err, size_t errlen)
{
    /* Under socket activation the -l/-p listener binds nothing (it takes
     * the inherited sockets), nor does a side listener handed its own. */
    const int ports[] = {cfg->no_main_listener || socket_activated() ? 0 : cfg->port,
                         inherits("memcache") ? 0 : cfg->memcache_port,
                         inherits("metrics") ? 0 : cfg->metrics_port};
    static const char *const who[] = {"the -l/-p listener", "the --memcache-port listener",
                                      "the --metrics-port listener"};
    char why[300];

    if (!cfg->conf->n_listen)
        return 0;
    for (size_t i = 0; i < sizeof ports / sizeof ports[0]; i++) {
        unsigned long line;
        if (!ports[i])
            continue;
        line = conf_listen_clash(cfg->conf->listen, cfg->conf->n_listen, cfg->listen_addr,
                                 ports[i], who[i], why, sizeof why);
        if (line) {
            snprintf(err, errlen, "%s:%lu: %s", cfg->config_path, line, why);
            return -1;
        }
    }
    return 0;
}

/* A primary's address: host:port (port 1..65535), [v6]:port, unix:/path
 * (the one parser follow uses too). */
static int addr_ok(const char *a)
{
    char host[256];
    int port;

    return hostport_split(a, host, sizeof host, &port) == 0;
}

/* Did the file give key k (and the command line, which wins, not)? Then
 * an error about it names the file's line. */
static int from_file(const ConfFile *cf, uint32_t cli_set, int k)
{
    return cf && !(cli_set & CONF_BIT(k)) && (cf->server.set & CONF_BIT(k));
}

/* Replication needs a binlog on both sides (spec/replication.md §1): a
 * replica_of, or a sync_replicas above 0, without one names the key, with
 * the file's line when the file set it. 0, or -1 with the message in err. */
static int check_replication(const char *binlog_dir, const char *replica_of,
                             uint32_t sync_replicas, uint32_t cli_set,
                             const ConfFile *cf, char *err, size_t errlen)
{
    int k = replica_of ? SK_REPLICA_OF : sync_replicas ? SK_SYNC_REPLICAS : -1;
    const char *bad = replica_of && !addr_ok(replica_of) ? "is not host:port, [v6]:port or unix:/path" : NULL;

    if (bad) {
        if (from_file(cf, cli_set, SK_REPLICA_OF))
            snprintf(err, errlen, "%s:%lu: replica_of '%s' %s", cf->path,
                     cf->server_line[SK_REPLICA_OF], replica_of, bad);
        else
            snprintf(err, errlen, "replica_of '%s' %s", replica_of, bad);
        return -1;
    }
    if (binlog_dir || k < 0)
        return 0;
    if (from_file(cf, cli_set, k))
        snprintf(err, errlen, "%s:%lu: %s needs a binlog: give -b DIR or binlog_dir",
                 cf->path, cf->server_line[k], conf_server_key_name(k));
    else
        snprintf(err, errlen, "%s needs a binlog: give -b DIR or binlog_dir",
                 conf_server_key_name(k));
    return -1;
}

/* --memcache-port and --metrics-port listen on -l's host. A Unix socket
 * has no port: binding its path again took the socket file from the
 * beanstalk listener (beanstalk clients then met the HTTP server), so the
 * pair is refused, naming the way to give the listener an address. Under
 * socket activation the beanstalk listener ignores -l, but the memcache
 * and metrics ones still listen on its host unless systemd hands them a
 * socket of their name: -l unix:PATH then bound the memcache listener on
 * PATH (and the metrics one failed at start), so only those are exempt. */
static int check_side_ports(const Config *cfg, const ConfFile *cf, char *err,
                            size_t errlen)
{
    static const struct { int key; const char *flag, *proto; } side[] = {
        {SK_MEMCACHE_PORT, "--memcache-port", "memcache"},
        {SK_METRICS_PORT, "--metrics-port", "http"},
    };
    const int ports[] = {cfg->memcache_port, cfg->metrics_port};
    static const char *const names[] = {"memcache", "metrics"};

    if (!cfg->listen_addr || strncmp(cfg->listen_addr, "unix:", 5))
        return 0;
    for (size_t i = 0; i < sizeof ports / sizeof ports[0]; i++) {
        int k = side[i].key;
        if (!ports[i] || inherits(names[i]))
            continue;
        if (from_file(cf, cfg->cli_set, k))
            snprintf(err, errlen, "%s:%lu: %s = %d needs a TCP listen address, not "
                     "%.200s: give it one with a [listen] section "
                     "(protocol = %s)", cf->path, cf->server_line[k],
                     conf_server_key_name(k), ports[i], cfg->listen_addr, side[i].proto);
        else
            snprintf(err, errlen, "%s %d needs a TCP listen address, not %.200s: "
                     "give it one with a [listen] section (protocol = %s)",
                     side[i].flag, ports[i], cfg->listen_addr, side[i].proto);
        return -1;
    }
    return 0;
}

/* The -l/-p, --memcache-port and --metrics-port listeners share -l's
 * host, so two of them on one port could only fail at bind, after
 * --check-config had said ok. Under socket activation -p is not used. */
static int check_port_clash(const Config *cfg, const ConfFile *cf, char *err,
                            size_t errlen)
{
    static const struct { int key; const char *flag; } who[] = {
        {SK_PORT, "-p"}, {SK_MEMCACHE_PORT, "--memcache-port"},
        {SK_METRICS_PORT, "--metrics-port"},
    };
    const int main_tcp = !cfg->no_main_listener && !socket_activated() &&
                         !(cfg->listen_addr && !strncmp(cfg->listen_addr, "unix:", 5));
    const int ports[] = {main_tcp ? cfg->port : 0,
                         inherits("memcache") ? 0 : cfg->memcache_port,
                         inherits("metrics") ? 0 : cfg->metrics_port};
    char name[2][160];

    for (size_t i = 0; i < 3; i++) {
        for (size_t j = i + 1; j < 3; j++) {
            if (!ports[i] || ports[i] != ports[j])
                continue;
            for (size_t k = 0; k < 2; k++) {
                int key = who[k ? j : i].key;
                if (from_file(cf, cfg->cli_set, key))
                    snprintf(name[k], sizeof name[k], "%s (%s:%lu)", conf_server_key_name(key),
                             cf->path, cf->server_line[key]);
                else
                    snprintf(name[k], sizeof name[k], "%s", who[k ? j : i].flag);
            }
            snprintf(err, errlen, "%s and %s are both port %d: each listener needs its own",
                     name[0], name[1], ports[i]);
            return -1;
        }
    }
    return 0;
}

/* main_listener = false with no [listen] section (and no memcache or
 * metrics port) started a server that listened nowhere, silently. Under
 * socket activation the sockets come from systemd: not checked. */
static int check_listens_somewhere(const Config *cfg, const ConfFile *cf, char *err,
                                   size_t errlen)
{
    if (!cfg->no_main_listener || !cf || cf->n_listen || cfg->memcache_port ||
        cfg->metrics_port || socket_activated())
        return 0;
    snprintf(err, errlen, "%s:%lu: main_listener = false and no [listen] section: the "
             "server would listen nowhere", cf->path, cf->server_line[SK_MAIN_LISTENER]);
    return -1;
}

/* The user to become must exist. The file's user is checked whenever
 * the file is (start, --check-config, reload: the next start would fail
 * after binding, status 1); -u from the command line only by
 * --check-config, so that a start with an unknown -u fails as it always
 * has (at the privilege drop, as beanstalkd does). */
static int check_user(const Config *cfg, const ConfFile *cf, int cli_too, char *err,
                      size_t errlen)
{
    int file = from_file(cf, cfg->cli_set, SK_USER);
    char shown[CONF_QUOTED_SIZE];

    if (!cfg->user || (!file && !cli_too))
        return 0;
    errno = 0;
    if (getpwnam(cfg->user))
        return 0;
    /* As the file's other messages: one printable line, the value cut. */
    ascii_text_cut(shown, sizeof shown, cfg->user, strlen(cfg->user));
    if (file)
        snprintf(err, errlen, "%s:%lu: unknown user '%s'%s%s", cf->path,
                 cf->server_line[SK_USER], shown, errno ? ": " : "",
                 errno ? strerror(errno) : "");
    else
        snprintf(err, errlen, "-u %.40s: %s", cfg->user,
                 errno ? strerror(errno) : "no such user");
    return -1;
}

/* --import-beanstalkd writes what it reads into tubed's binlog, on a
 * primary (a replica's jobs are its primary's): both on the command line
 * contradict each other; the file's import_beanstalkd may stay in the
 * file of a node that now starts as a replica, and is ignored there
 * (engine_open_binlog()). */
static int check_import(const Config *cfg, char *err, size_t errlen)
{
    if (!cfg->import_dir)
        return 0;
    if (!*cfg->import_dir) {
        snprintf(err, errlen, "import_beanstalkd is empty (want beanstalkd's binlog directory)");
        return -1;
    }
    if (!cfg->binlog_dir) {
        snprintf(err, errlen, "--import-beanstalkd needs a binlog: give -b DIR or binlog_dir");
        return -1;
    }
    if (cfg->replica_of && (cfg->cli_set & CONF_BIT(SK_IMPORT_BEANSTALKD)) &&
        (cfg->cli_set & CONF_BIT(SK_REPLICA_OF))) {
        snprintf(err, errlen, "--import-beanstalkd and replica_of: a replica takes its "
                 "jobs from its primary; import on the primary");
        return -1;
    }
    return 0;
}

/* Every check a start makes of its merged configuration, in one order,
 * so that a start, --check-config and a reload (of the next start's
 * configuration) refuse the same files with the same message. cf: the
 * file, NULL without one; user_cli: check -u from the command line too. */
static int check_start(const Config *cfg, const ConfFile *cf, int user_cli, char *err,
                       size_t errlen)
{
    if (cf && (conf_validate(cf, cfg->binlog_dir, err, errlen) < 0 ||
               main_clash(cfg, err, errlen) < 0))
        return -1;
    if (check_side_ports(cfg, cf, err, errlen) < 0 ||
        check_port_clash(cfg, cf, err, errlen) < 0 ||
        check_replication(cfg->binlog_dir, cfg->replica_of, cfg->sync_replicas,
                          cfg->cli_set, cf, err, errlen) < 0 ||
        check_import(cfg, err, errlen) < 0 ||
        check_user(cfg, cf, user_cli, err, errlen) < 0 ||
        check_listens_somewhere(cfg, cf, err, errlen) < 0)
        return -1;
    return 0;
}

/* Load --config, merge it under the command line, validate the result. */
static int load_config(Config *cfg, FILE *out, char *err, size_t errlen)
{
    uint32_t taken;
    ConfFile *cf;

    if (!cfg->config_path) {
        if (check_start(cfg, NULL, cfg->check_config, err, errlen) < 0)
            return OPTS_CONFIG_ERROR;
        if (!cfg->check_config)
            return OPTS_RUN;
        /* No file: the flags alone, so the unit's ExecReload can run the
         * same check whether or not TUBED_OPTS names a file. */
        fprintf(out, "command line: ok\n");
        return OPTS_EXIT_OK;
    }
    if (conf_load(cfg->config_path, &cf, err, errlen) < 0)
        return OPTS_CONFIG_ERROR;
    cfg->conf = cf;
    taken = cf->server.set & ~cfg->cli_set;
    for (int k = 0; k < SK_COUNT; k++)
        if (taken & CONF_BIT(k))
            set_key(cfg, &cf->server, k);
    if (own_strings(cfg, taken) < 0) {
        snprintf(err, errlen, "%s: out of memory", cfg->config_path);
        opts_free(cfg);
        return OPTS_CONFIG_ERROR;
    }
    if (check_start(cfg, cf, cfg->check_config, err, errlen) < 0) {
        opts_free(cfg);
        return OPTS_CONFIG_ERROR;
    }
    if (!cfg->check_config)
        return OPTS_RUN;
    fprintf(out, "%s: ok\n", cfg->config_path);
    opts_free(cfg);
    return OPTS_EXIT_OK;
}

void opts_free(Config *cfg)
{
    conf_free(cfg->conf);
    cfg->conf = NULL;
    tb_free(cfg->file_strings);
    cfg->file_strings = NULL;
}

/* The Config the next start (same command line, this file) would have:
 * the command line's keys from cur, the rest from cf or their defaults.
 * Its strings point into cur and cf. */
static void next_start(const Config *cur, const ConfFile *cf, Config *next)
{
    Config *src = (Config *)cur; /* cfg_field only reads it here */

    opts_defaults(next);
    next->config_path = cur->config_path;
    next->cli_set = cur->cli_set;
    next->addr_given = !!(cur->cli_set & (CONF_BIT(SK_LISTEN) | CONF_BIT(SK_PORT)));
    next->conf = (ConfFile *)cf;
    for (int k = 0; k < SK_COUNT; k++) {
        size_t size = 0;
        int is_str;
        if (cur->cli_set & CONF_BIT(k)) {
            void *to = cfg_field(next, k, &size, &is_str);
            memcpy(to, cfg_field(src, k, &size, &is_str), size);
        } else if (cf->server.set & CONF_BIT(k))
            set_key(next, &cf->server, k);
    }
}

/* A reload must not accept a file the next start (or --check-config)
 * would refuse: the keys that wait for a restart (port, memcache_port,
 * metrics_port, listen, binlog_dir, replica_of...) are checked as that
 * start will check them, with the same messages, so the operator hears
 * of a clash now, not when a restart leaves the server down. */
static int check_next_start(const Config *cur, const ConfFile *cf, char *err,
                            size_t errlen)
{
    Config next;

    next_start(cur, cf, &next);
    return check_start(&next, cf, 0, err, errlen);
}

int opts_reload(const Config *cur, ConfFile **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!cur->config_path)
        return 0;
    if (conf_load(cur->config_path, out, err, errlen) < 0)
        return -1;
    if (conf_validate(*out, cur->binlog_dir, err, errlen) < 0 ||
        check_replication(cur->binlog_dir, NULL,
                          cur->cli_set & CONF_BIT(SK_SYNC_REPLICAS) ? cur->sync_replicas
                                                                     : (*out)->server.sync_replicas,
                          cur->cli_set, *out, err, errlen) < 0 ||
        check_next_start(cur, *out, err, errlen) < 0) {
        conf_free(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

/* The server keys a running server picks up: each is read where it is
 * used (accept, the stall timer, put, the shutdown command, the log). */
static int runtime_key(int k)
{
    return k == SK_VERBOSE || k == SK_MAX_CONNECTIONS || k == SK_STALL_TIMEOUT ||
           k == SK_JOB_MEMORY || k == SK_ALLOW_SHUTDOWN || k == SK_SYNC_REPLICAS ||
           k == SK_ALLOW_REMOTE_ADMIN;
}

static int same_value(Config *a, Config *b, int k)
{
    size_t size;
    int is_str;
    void *fa = cfg_field(a, k, &size, &is_str), *fb = cfg_field(b, k, &size, &is_str);
    const char *sa, *sb;

    if (!is_str)
        return !memcmp(fa, fb, size);
    sa = *(const char **)fa;
    sb = *(const char **)fb;
    return sa == sb || (sa && sb && !strcmp(sa, sb));
}

static void note_key(char *note, size_t notelen, int k)
{
    size_t used = strlen(note);

    if (used < notelen)
        snprintf(note + used, notelen - used, "%s%s", used ? ", " : "",
                 conf_server_key_name(k));
}

/* What the file alone would give; strings point into next. */
static void file_alone(Config *want, const ConfFile *next)
{
    opts_defaults(want);
    for (int k = 0; next && k < SK_COUNT; k++)
        if (next->server.set & CONF_BIT(k))
            set_key(want, &next->server, k);
}

void opts_reload_apply(Config *live, ConfFile *next, char *note, size_t notelen,
                       char *kept, size_t keptlen)
{
    Config want;

    file_alone(&want, next);
    if (notelen)
        note[0] = '\0';
    if (keptlen)
        kept[0] = '\0';
    for (int k = 0; k < SK_COUNT; k++) {
        size_t size;
        int is_str;
        void *f = cfg_field(live, k, &size, &is_str);

        if (live->cli_set & CONF_BIT(k)) {
            if (next && (next->server.set & CONF_BIT(k)) && !same_value(live, &want, k))
                note_key(kept, keptlen, k);
            continue;
        }
        if (same_value(live, &want, k))
            continue;
        if (runtime_key(k))
            memcpy(f, cfg_field(&want, k, &size, &is_str), size);
        else
            note_key(note, notelen, k);
    }
    conf_free(live->conf);
    live->conf = next;
}

int opts_parse(Config *cfg, int argc, char **argv, FILE *out, char *err,
               size_t errlen)
{
    const char *prog = argc > 0 ? argv[0] : "tubed";

    (void)socket_activated(); /* before the server takes the sockets */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r;

        if (!strcmp(a, "--help")) {
            opts_usage(out, prog);
            return OPTS_EXIT_OK;
        }
        if (!strcmp(a, "--recover")) {
            cfg->recover = 1;
            cfg->cli_set |= CONF_BIT(SK_RECOVER);
            continue;
        }
        if (!strcmp(a, "--check-config")) {
            cfg->check_config = 1;
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
    return load_config(cfg, out, err, errlen);
}
