#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "hostport.h"

#define BACKLOG 1024

/* Someone serves the socket file at path (this process's listener under
 * another spelling of the path, or another server): it accepts, or its
 * backlog is full. Only a stale file, which refuses, may be replaced. */
static int socket_live(const struct sockaddr_un *sa)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), r, e;

    if (fd < 0)
        return 1; /* cannot tell: leave it */
    r = connect(fd, (const struct sockaddr *)sa, sizeof *sa);
    e = errno;
    close(fd);
    return r == 0 || (e != ECONNREFUSED && e != ENOENT);
}

static int listen_unix(const char *path, char *err, size_t errlen)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct stat st;
    int fd;

    if (strlen(path) >= sizeof sa.sun_path) {
        snprintf(err, errlen, "unix socket path too long: %s", path);
        return -1;
    }
    strcpy(sa.sun_path, path);
    /* Replace a stale socket from an earlier run, never a regular file,
     * nor a socket still served: taking that one over would hand its
     * clients to this listener's role. */
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
        if (socket_live(&sa)) {
            snprintf(err, errlen, "%s: a server listens there already", path);
            return -1;
        }
        unlink(path);
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        listen(fd, BACKLOG) < 0) {
        snprintf(err, errlen, "bind %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static int listen_ai(const struct addrinfo *ai, int v6only, char *err, size_t errlen)
{
    int one = 1;
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);

    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ai->ai_family == AF_INET6 && v6only)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, BACKLOG) < 0) {
        snprintf(err, errlen, "bind: %s", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int net_listen(const char *addr, int port, char *err, size_t errlen)
{
    return net_listen_v6(addr, port, 1, err, errlen);
}

int net_listen_v6(const char *addr, int port, int v6only, char *err, size_t errlen)
{
    struct addrinfo hints = {0}, *res, *ai;
    char portstr[16];
    int rc, fd = -1;

    if (addr && strncmp(addr, "unix:", 5) == 0)
        return listen_unix(addr + 5, err, errlen);
    /* NULL (no -l): every IPv4 address. An empty -l "" goes to the name
     * lookup like any other name, as in beanstalkd, and fails there: it
     * does not mean every address. */
    hints.ai_family = addr ? AF_UNSPEC : AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(portstr, sizeof portstr, "%d", port);
    rc = getaddrinfo(addr, portstr, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "address %s: %s", addr ? addr : "*", gai_strerror(rc));
        return -1;
    }
    for (ai = res; ai && fd < 0; ai = ai->ai_next)
        fd = listen_ai(ai, v6only, err, errlen);
    freeaddrinfo(res);
    return fd;
}

int net_accept(int lfd)
{
    int one = 1;
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

    /* As beanstalkd's (it sets both on its listening socket, and the
     * accepted ones inherit them): TCP keepalive, so that a client whose
     * host vanished is closed in the end (its wait and its reservations
     * with it) instead of being held for ever. Both fail harmlessly on a
     * Unix socket. */
    if (fd >= 0) {
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    }
    return fd;
}

void net_describe(int fd, char *out, size_t outlen)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "?";

    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
        snprintf(out, outlen, "fd %d", fd);
        return;
    }
    if (ss.ss_family == AF_UNIX) {
        snprintf(out, outlen, "unix:%s", ((struct sockaddr_un *)&ss)->sun_path);
    } else if (ss.ss_family == AF_INET) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &sin->sin_addr, host, sizeof host);
        snprintf(out, outlen, "%s:%d", host, ntohs(sin->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof host);
        snprintf(out, outlen, "[%s]:%d", host, ntohs(sin6->sin6_port));
    } else {
        snprintf(out, outlen, "fd %d", fd);
    }
}

static void describe_sa(const struct sockaddr_storage *ss, char *out, size_t outlen)
{
    char host[INET6_ADDRSTRLEN] = "?";

    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &sin->sin_addr, host, sizeof host);
        snprintf(out, outlen, "%s:%d", host, ntohs(sin->sin_port));
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof host);
        snprintf(out, outlen, "[%s]:%d", host, ntohs(sin6->sin6_port));
    } else {
        snprintf(out, outlen, "unix");
    }
}

void net_describe_peer(int fd, char *out, size_t outlen)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;

    if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0) {
        snprintf(out, outlen, "fd %d", fd);
        return;
    }
    describe_sa(&ss, out, outlen);
}

int net_peer_local(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;

    if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
        return 0;
    if (ss.ss_family == AF_UNIX)
        return 1;
    if (ss.ss_family == AF_INET)
        return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss.ss_family == AF_INET6) {
        const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a))
            return 1;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return 0;
}

static int connect_fd(int family, const struct sockaddr *sa, socklen_t len, char *err,
                      size_t errlen)
{
    int one = 1;
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    if (family != AF_UNIX)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, sa, len) < 0 && errno != EINPROGRESS) {
        snprintf(err, errlen, "connect: %s", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Connect to the nth of res's addresses (modulo their number, in *count). */
static int connect_nth(struct addrinfo *res, unsigned nth, unsigned *count, char *err,
                       size_t errlen)
{
    struct addrinfo *ai;
    unsigned n = 0;

    for (ai = res; ai; ai = ai->ai_next)
        n++;
    *count = n;
    for (ai = res, nth %= n; nth; nth--)
        ai = ai->ai_next;
    return connect_fd(ai->ai_family, ai->ai_addr, ai->ai_addrlen, err, errlen);
}

int net_connect(const char *addr, unsigned nth, unsigned *count, char *err, size_t errlen)
{
    char host[256], portstr[16];
    struct addrinfo hints = {0}, *res;
    int port, rc, fd;

    *count = 1;
    if (hostport_split(addr, host, sizeof host, &port) < 0) {
        snprintf(err, errlen, "bad address '%s' (want host:port, [v6]:port or unix:/path)",
                 addr);
        return -1;
    }
    if (port < 0) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(host) >= sizeof sa.sun_path) {
            snprintf(err, errlen, "unix socket path too long: %s", host);
            return -1;
        }
        strcpy(sa.sun_path, host);
        return connect_fd(AF_UNIX, (struct sockaddr *)&sa, sizeof sa, err, errlen);
    }
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    snprintf(portstr, sizeof portstr, "%d", port);
    rc = getaddrinfo(host, portstr, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "address %s: %s", host, gai_strerror(rc));
        return -1;
    }
    fd = connect_nth(res, nth, count, err, errlen);
    freeaddrinfo(res);
    return fd;
}

/* ---- name lookups off the loop ------------------------------------------ */

struct NetLookup {
    struct gaicb cb;
    struct gaicb *list[1];
    struct addrinfo hints;
    char host[256], port[16];
    NetLookup *next;      /* on the orphans' list */
};

/* Lookups ended while libc's thread still works on them: freed once done. */
static NetLookup *orphans;

static void lookup_free(NetLookup *l)
{
    if (l->cb.ar_result)
        freeaddrinfo(l->cb.ar_result);
    tb_free(l);
}

static void reap_orphans(void)
{
    NetLookup **pp = &orphans, *l;

    while ((l = *pp)) {
        if (gai_error(&l->cb) == EAI_INPROGRESS) {
            pp = &l->next;
            continue;
        }
        *pp = l->next;
        lookup_free(l);
    }
}

int net_needs_lookup(const char *addr)
{
    char host[256];
    int port;
    unsigned char a[sizeof(struct in6_addr)];

    return hostport_split(addr, host, sizeof host, &port) == 0 && port >= 0 &&
           inet_pton(AF_INET, host, a) != 1 && inet_pton(AF_INET6, host, a) != 1;
}

NetLookup *net_lookup_start(const char *addr, char *err, size_t errlen)
{
    NetLookup *l;
    int port, rc;

    reap_orphans();
    if (!(l = tb_calloc(1, sizeof *l))) {
        snprintf(err, errlen, "out of memory for a name lookup");
        return NULL;
    }
    if (hostport_split(addr, l->host, sizeof l->host, &port) < 0 || port < 0) {
        snprintf(err, errlen, "bad address '%s' (want host:port)", addr);
        tb_free(l);
        return NULL;
    }
    snprintf(l->port, sizeof l->port, "%d", port);
    l->hints.ai_family = AF_UNSPEC;
    l->hints.ai_socktype = SOCK_STREAM;
    l->hints.ai_flags = AI_NUMERICSERV;
    l->cb.ar_name = l->host;
    l->cb.ar_service = l->port;
    l->cb.ar_request = &l->hints;
    l->list[0] = &l->cb;
    if ((rc = getaddrinfo_a(GAI_NOWAIT, l->list, 1, NULL)) != 0) {
        snprintf(err, errlen, "address %s: %s", l->host, gai_strerror(rc));
        tb_free(l);
        return NULL;
    }
    return l;
}

int net_lookup_connect(NetLookup *l, unsigned nth, unsigned *count, char *err, size_t errlen)
{
    int rc = gai_error(&l->cb);

    *count = 1;
    if (rc == EAI_INPROGRESS)
        return -2;
    if (rc != 0 || !l->cb.ar_result) {
        snprintf(err, errlen, "address %s: %s", l->host,
                 gai_strerror(rc ? rc : EAI_NONAME));
        return -1;
    }
    return connect_nth(l->cb.ar_result, nth, count, err, errlen);
}

void net_lookup_drain(void)
{
    struct timespec wait = {2, 0};

    for (NetLookup *l = orphans; l; l = l->next) {
        const struct gaicb *one[1] = {&l->cb};
        if (gai_error(&l->cb) == EAI_INPROGRESS)
            gai_suspend(one, 1, &wait);
    }
    reap_orphans();
}

void net_lookup_end(NetLookup *l)
{
    reap_orphans();
    if (!l)
        return;
    /* (EAI_ALLDONE: it ended meanwhile; EAI_CANCELED: it never will) */
    if (gai_error(&l->cb) == EAI_INPROGRESS && gai_cancel(&l->cb) == EAI_NOTCANCELED) {
        l->next = orphans;
        orphans = l;
        return;
    }
    lookup_free(l);
}
