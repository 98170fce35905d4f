/*
 * opts.h — the command line, parsed the way beanstalkd parses it.
 *
 * Contract: opts_parse() fills a Config from argv. Short flags combine and
 * take attached or separate arguments ("-VV", "-p11300", "-p 11300",
 * "-Vp11300"); tubed's own additions are long options ("--name VALUE" or
 * "--name=VALUE"). It returns OPTS_RUN to start the server, OPTS_EXIT_OK
 * after -v or --help have printed their text to out, OPTS_HELP for -h
 * (nothing printed: the caller prints the usage on standard error and
 * exits 0, as beanstalkd does, whose -h leaves standard output empty), or
 * OPTS_ERROR after writing a clear message to err; the caller prints
 * usage and exits non-zero.
 *
 * --config FILE loads the config file (conf.h) once argv is read; every
 * server key the file sets and the command line does not give is merged
 * in, key by key. A bad file, or a merged configuration conf_validate()
 * refuses, returns OPTS_CONFIG_ERROR with "FILE:LINE: what" in err (the
 * caller prints it without the usage text and exits 2). --check-config
 * does all that, prints "FILE: ok" to out and returns OPTS_EXIT_OK;
 * without --config it checks the flags alone ("command line: ok").
 *
 * Ownership: after OPTS_RUN the Config owns cfg->conf and copies of the
 * file's strings; opts_free() releases them. server_init() copies the
 * Config, and from then on the server's copy is the live one: reload and
 * opts_free() act on it. On any other result nothing is left to free.
 *
 * Reload (SIGHUP, memcache "reload"): opts_reload() reads the file again
 * and checks it against the running Config, and as the next start with
 * the same command line would (the same checks and messages as
 * --check-config: a reload that succeeds promises a restart that
 * starts); opts_reload_apply() puts it
 * in force. Only the run-time server keys (verbose, max_connections,
 * stall_timeout, job_memory, allow_shutdown, sync_replicas,
 * allow_remote_admin) change at reload, and only
 * those the command line did not give; the others (listen, port, user,
 * binlog_dir, ...) need a restart and are ignored, and the tube policies
 * are all replaced.
 */
#ifndef TUBED_OPTS_H
#define TUBED_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "conf.h"

#define DEFAULT_PORT 11300
#define DEFAULT_MAX_JOB_SIZE 65535
/* MAX_JOB_SIZE_LIMIT (-z's ceiling) is in conf.h: the file shares it. */
#define DEFAULT_BINLOG_SIZE 10485760ULL
#define DEFAULT_REPL_BACKLOG (16ULL << 20)
#define DEFAULT_FSYNC_MS 50

typedef struct Config {
    const char *listen_addr; /* NULL: all IPv4 addresses */
    int port;
    uint32_t max_job_size;
    const char *user;
    const char *binlog_dir;
    uint64_t binlog_size;
    uint64_t fsync_ms;
    int fsync_never;
    int verbosity;
    uint64_t max_connections; /* 0: no limit beyond the fd limit */
    int recover;              /* --recover: replay past binlog damage */
    int addr_given;           /* -l or -p was on the command line */
    uint64_t stall_timeout;   /* s: a client not reading replies is closed */
    uint64_t job_memory;      /* bytes of job memory put may use; 0: no limit */
    const char *config_path;  /* --config FILE; NULL: no config file */
    ConfFile *conf;           /* that file, in force (owned: opts_free) */
    int memcache_port;        /* --memcache-port; 0: no memcache listener */
    int metrics_port;         /* --metrics-port; 0: no metrics listener */
    int allow_shutdown;       /* memcache "shutdown" may stop the server */
    int check_config;         /* --check-config was given */
    int no_main_listener;     /* main_listener = false: no -l/-p listener */
    const char *replica_of;   /* --replica-of HOST:PORT; NULL: a primary */
    uint32_t sync_replicas;   /* --sync-replicas N (reloadable) */
    int allow_remote_admin;   /* promote/follow from any address */
    uint64_t repl_backlog;    /* --repl-backlog BYTES: partial resyncs (0: off) */
    const char *import_dir;   /* --import-beanstalkd DIR: take over beanstalkd's
                                 binlog at start (bsimport.h); NULL: none */
    uint32_t cli_set;         /* CONF_BIT(SK_x): the command line gave x, so
                                 the file never overrides it (nor a reload) */
    char *file_strings;       /* owned copies of listen/user/binlog_dir/
                                 replica_of taken
                                 from the file */
} Config;

/* OPTS_CONFIG_ERROR: the config file (or the merged configuration) is bad;
 * err holds "FILE:LINE: what". Exit 2, without the usage text. */
enum { OPTS_RUN, OPTS_EXIT_OK, OPTS_ERROR, OPTS_CONFIG_ERROR, OPTS_HELP };

void opts_defaults(Config *cfg);
int opts_parse(Config *cfg, int argc, char **argv, FILE *out, char *err,
               size_t errlen);
void opts_usage(FILE *f, const char *prog);
/* Free what opts_parse() left in cfg (the file and the string copies). */
void opts_free(Config *cfg);

/* Read cur->config_path again and check it against the running Config
 * (its binlog directory). 0: *out is the new file (NULL without
 * --config). -1: err holds "FILE:LINE: what", *out is NULL and the old
 * configuration stays in force. */
int opts_reload(const Config *cur, ConfFile **out, char *err, size_t errlen);

/* Put next (from opts_reload, may be NULL) in force in the live Config:
 * sets live->conf (freeing the old file) and the run-time server keys the
 * command line did not give (a key the file no longer sets returns to its
 * default). Server keys that need a restart are left as they are; if the
 * file now says otherwise for some, their names go to note ("port,
 * listen"), else note is "". kept gets the names of the server keys next
 * sets to a value other than the command line's, which stays
 * ("sync_replicas"; "" when none), so the reload can say so rather than
 * ignore them silently (the command line wins over the file,
 * extensions.md §1). The caller re-resolves every tube's policy and sets
 * log_verbosity from live->verbosity. */
void opts_reload_apply(Config *live, ConfFile *next, char *note, size_t notelen,
                       char *kept, size_t keptlen);

#endif
