#include "hostport.h"
#include <arpa/inet.h>
#include <string.h>

/* "PORT" up to the end of the string: 1..65535, digits only. */
static int port_of(const char *p)
{
    long v = 0;

    if (!*p || strlen(p) > 5)
        return -1;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v >= 1 && v <= 65535 ? (int)v : -1;
}

static int name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_';
}

/* [h, h+len): an IPv6 literal, with an optional %zone after it. */
static int v6_ok(const char *h, size_t len)
{
    char a[INET6_ADDRSTRLEN + 1];
    struct in6_addr in;
    const char *pct = memchr(h, '%', len);
    size_t n = pct ? (size_t)(pct - h) : len;

    if (!n || n >= sizeof a || (pct && pct + 1 == h + len))
        return 0;
    memcpy(a, h, n);
    a[n] = '\0';
    return inet_pton(AF_INET6, a, &in) == 1;
}

int hostport_split(const char *addr, char *host, size_t hostlen, int *port)
{
    const char *h = addr, *colon;
    size_t hl;
    int p;

    if (!strncmp(addr, "unix:", 5)) {
        if (addr[5] != '/' || strlen(addr + 5) >= hostlen)
            return -1;
        strcpy(host, addr + 5);
        *port = -1;
        return 0;
    }
    if (*addr == '[') {
        const char *close = strchr(addr, ']');
        if (!close || close[1] != ':')
            return -1;
        h = addr + 1;
        hl = (size_t)(close - h);
        colon = close + 1;
        if (!v6_ok(h, hl))
            return -1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon)
            return -1;
        hl = (size_t)(colon - addr);
        for (size_t i = 0; i < hl; i++)
            if (!name_char(addr[i]))
                return -1;
    }
    if (!hl || hl >= hostlen || (p = port_of(colon + 1)) < 0)
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = p;
    return 0;
}
