/*
 * net.h — socket setup. Policy-free: functions return -1 and describe the
 * failure in the caller's buffer; the caller decides whether to exit.
 *
 * Contract: net_listen() opens a non-blocking, close-on-exec listening
 * socket for "HOST" + port (IPv4 or IPv6 literal or name; NULL or "" means
 * all IPv4 addresses) or for "unix:/path" (an existing socket file at that
 * path is replaced). net_accept() returns a non-blocking client fd with
 * TCP_NODELAY set where it applies, or -1 with errno (EAGAIN when none is
 * pending).
 */
#ifndef TUBED_NET_H
#define TUBED_NET_H

#include <stddef.h>

int net_listen(const char *addr, int port, char *err, size_t errlen);
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

#endif
