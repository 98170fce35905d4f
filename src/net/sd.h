/*
 * sd.h — the two systemd protocols tubed speaks, with libc only.
 *
 * Contract: sd_listen_fds() implements socket activation: when LISTEN_PID
 * names this process and LISTEN_FDS is N > 0, descriptors 3..3+N-1 are
 * inherited listening sockets; it returns N (marking them close-on-exec
 * and non-blocking) or 0, and unsets the variables so children do not
 * inherit them. names[i] gets the i-th name of LISTEN_FDNAMES ("" if none),
 * for i < max: the name systemd gives each socket (FileDescriptorName=). sd_notify() sends one datagram of "KEY=VALUE\n" lines to
 * $NOTIFY_SOCKET (a path, or "@name" in the abstract namespace); without
 * that variable it does nothing. Both return -1 with errno on failure.
 */
#ifndef TUBED_SD_H
#define TUBED_SD_H

#define SD_LISTEN_FDS_START 3
#define SD_NAME_MAX 64

int sd_listen_fds(char names[][SD_NAME_MAX], int max);
int sd_notify(const char *state);
int sd_notifyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
