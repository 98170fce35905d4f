/*
 * log.h — one line per event on stderr, with a level, for the journal.
 *
 * Contract: log_msg() writes "tubed: LEVEL: message\n" in a single write so
 * lines from one process never interleave. Verbosity: errors and warnings
 * always; info by default; LOG_CONN lines with -V; LOG_CMD lines with -VV.
 */
#ifndef TUBED_LOG_H
#define TUBED_LOG_H

enum { LOG_ERR, LOG_WARN, LOG_INFO, LOG_CONN, LOG_CMD };

extern int log_verbosity; /* 0 = default, 1 = -V, 2 = -VV */

void log_msg(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_err(...)  log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)

#endif
