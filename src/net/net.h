/*
 * net.h — socket setup. Policy-free: functions return -1 and describe the
 * failure in the caller's buffer; the caller decides whether to exit.
 *
 * Contract: net_listen() opens a non-blocking, close-on-exec listening
 * socket for "HOST" + port (IPv4 or IPv6 literal or name; NULL means all
 * IPv4 addresses; "" is a name like any other, which the lookup refuses)
 * or for "unix:/path" (an existing socket file at that path is replaced).
 * Its IPv6 sockets take IPv6 only (IPV6_V6ONLY); net_listen_v6() with
 * v6only 0 leaves the system's default, as beanstalkd does for -l: on
 * Linux (net.ipv6.bindv6only = 0) "::" then takes IPv4 clients too, and
 * "::ffff:127.0.0.1" is 127.0.0.1. net_accept() returns a non-blocking client fd with
 * TCP_NODELAY and SO_KEEPALIVE set where they apply (as beanstalkd's), or
 * -1 with errno (EAGAIN when none is pending).
 */
#ifndef TUBED_NET_H
#define TUBED_NET_H

#include <stddef.h>

int net_listen(const char *addr, int port, char *err, size_t errlen);
int net_listen_v6(const char *addr, int port, int v6only, char *err, size_t errlen);
int net_accept(int lfd);
/* Human-readable local address of a socket, for logs. */
void net_describe(int fd, char *out, size_t outlen);
/* ... and of its peer ("host:port", "[v6]:port", "unix"). */
void net_describe_peer(int fd, char *out, size_t outlen);
/* Is the socket's peer on this host (a loopback address or a Unix
 * socket)? */
int net_peer_local(int fd);
/* Start a non-blocking connect to an address as hostport.h reads it
 * ("host:port", "[v6]:port", "unix:/path"): the fd (connected or
 * connecting: wait for EPOLLOUT and read SO_ERROR), or -1 with err. A name
 * may resolve to several addresses (IPv6 and IPv4, say, where the server
 * listens on one family only): this tries the nth of them, counting
 * modulo how many there are, and sets *count to that number (1 for a
 * Unix socket or on failure), so a caller tries each in turn. */
int net_connect(const char *addr, unsigned nth, unsigned *count, char *err, size_t errlen);

/*
 * A host name looked up without blocking the loop: getaddrinfo_a(), whose
 * thread is libc's (a resolver that does not answer would otherwise hold
 * every client for its timeout, at every retry). net_needs_lookup(addr):
 * addr is "host:port" with a host that is no address literal (literals and
 * Unix paths connect at once with net_connect()). net_lookup_start() begins
 * one (NULL with err on a bad address or no memory); net_lookup_connect()
 * returns -2 while it runs, then what net_connect() would have. A lookup
 * ended with net_lookup_end() while it runs is cancelled, or, where libc
 * cannot cancel it, freed once it ends (by a later call of any of these).
 */
typedef struct NetLookup NetLookup;

int net_needs_lookup(const char *addr);
NetLookup *net_lookup_start(const char *addr, char *err, size_t errlen);
int net_lookup_connect(NetLookup *l, unsigned nth, unsigned *count, char *err, size_t errlen);
void net_lookup_end(NetLookup *l);
/* At exit: wait a little (2 s each at most) for lookups still running in
 * libc's thread, and free them. */
void net_lookup_drain(void);

#endif
