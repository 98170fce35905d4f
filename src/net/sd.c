#include "sd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "numparse.h"

/* The i-th name of a colon-separated LISTEN_FDNAMES into out ("" when
 * there is none). */
static void fd_name(const char *names, int i, char *out, size_t outlen)
{
    const char *p = names;

    out[0] = '\0';
    for (; p && i > 0; i--) {
        p = strchr(p, ':');
        if (p)
            p++;
    }
    if (p) {
        size_t n = strcspn(p, ":");
        if (n >= outlen)
            n = outlen - 1;
        memcpy(out, p, n);
        out[n] = '\0';
    }
}

int sd_listen_fds(char names[][SD_NAME_MAX], int max)
{
    const char *pid_s = getenv("LISTEN_PID"), *fds_s = getenv("LISTEN_FDS");
    const char *names_s = getenv("LISTEN_FDNAMES");
    uint64_t pid, n;

    if (!pid_s || !fds_s)
        return 0;
    if (parse_u64_str(pid_s, &pid) < 0 || parse_u64_str(fds_s, &n) < 0 ||
        n > 1024) {
        errno = EINVAL;
        return -1;
    }
    for (int i = 0; i < max; i++)
        fd_name(names_s, i, names[i], SD_NAME_MAX);
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    if ((pid_t)pid != getpid())
        return 0; /* meant for another process */
    for (int fd = SD_LISTEN_FDS_START; fd < SD_LISTEN_FDS_START + (int)n; fd++) {
        int fl = fcntl(fd, F_GETFD);
        if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0)
            return -1;
        fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
            return -1;
    }
    return (int)n;
}

int sd_notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t plen;
    socklen_t salen;
    int fd, rc;

    if (!path || !*path)
        return 0;
    plen = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || plen >= sizeof sa.sun_path) {
        errno = EINVAL;
        return -1;
    }
    memcpy(sa.sun_path, path, plen);
    if (path[0] == '@')
        sa.sun_path[0] = '\0'; /* abstract namespace */
    salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen);
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    rc = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen) < 0 ? -1 : 0;
    close(fd);
    return rc;
}

int sd_notifyf(const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sd_notify(msg);
}
