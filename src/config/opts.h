/*
 * opts.h — the command line, parsed the way beanstalkd parses it.
 *
 * Contract: opts_parse() fills a Config from argv. Short flags combine and
 * take attached or separate arguments ("-VV", "-p11300", "-p 11300",
 * "-Vp11300"); tubed's own additions are long options ("--name VALUE" or
 * "--name=VALUE"). It returns OPTS_RUN to start the server, OPTS_EXIT_OK
 * after -h or -v have printed their text, or OPTS_ERROR after writing a
 * clear message to err; the caller prints usage and exits non-zero.
 */
#ifndef TUBED_OPTS_H
#define TUBED_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DEFAULT_PORT 11300
#define DEFAULT_MAX_JOB_SIZE 65535
#define MAX_JOB_SIZE_LIMIT 1073741824ULL
#define DEFAULT_BINLOG_SIZE 10485760ULL
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
} Config;

enum { OPTS_RUN, OPTS_EXIT_OK, OPTS_ERROR };

void opts_defaults(Config *cfg);
int opts_parse(Config *cfg, int argc, char **argv, FILE *out, char *err,
               size_t errlen);
void opts_usage(FILE *f, const char *prog);

#endif
