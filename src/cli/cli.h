/*
 * cli.h — what every part of tubed-cli shares: the exit statuses, an error
 * value that carries one of them with its message, and the run's settings.
 *
 * Contract: functions that can fail return a Status and describe the
 * failure in an Err instead of printing it, so one-shot commands print it
 * on stderr while `top` shows it on its screen. The exit statuses are part
 * of the interface (man/tubed-cli.1 lists them): never renumber them.
 */
#ifndef TUBED_CLI_H
#define TUBED_CLI_H

#include <stdarg.h>

typedef enum Status {
    ST_OK = 0,
    ST_NOT_FOUND = 1, /* NOT_FOUND: no such tube or job, nothing to peek */
    ST_USAGE = 2,     /* bad command line */
    ST_CONN = 3,      /* cannot connect, connection lost, timed out */
    ST_SERVER = 4,    /* an error or unexpected reply from the server */
    ST_NO_EXT = 5,    /* the server lacks a tubed extension */
    ST_LOCAL = 6,     /* a local failure: input file, output, terminal, memory */
} Status;

typedef struct Err {
    Status code;
    char msg[512];
} Err;

/* Fill e and return code, so a failure is one statement: return err_set(...). */
Status err_set(Err *e, Status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "tubed-cli: msg" on stderr. */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The settings of one run, from the command line and the environment. */
typedef struct Cli {
    const char *host;    /* name, IPv4/IPv6 literal, or "unix:/path" */
    const char *port;
    int timeout_ms;      /* longest wait for the server to make progress */
    int json;            /* --json: machine output */
    int color;           /* colour escapes on stdout */
    int width;           /* stdout columns; 0 = do not cut lines */
    int raw;             /* peek --raw: the body only */
    unsigned long pri, delay, ttr; /* put options */
} Cli;

#endif
