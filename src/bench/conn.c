/* conn.c - non-blocking beanstalk client connection; see conn.h. */
#include "conn.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Room offered to each read: large enough to take a whole burst of
 * pipelined replies in one system call. */
#define READ_CHUNK (64 * 1024)

struct addrinfo *conn_resolve(const char *host, const char *port, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct addrinfo *ai = NULL;
	int rc = getaddrinfo(host, port, &hints, &ai);
	if (rc != 0) {
		snprintf(err, errlen, "cannot resolve %s port %s: %s", host, port, gai_strerror(rc));
		return NULL;
	}
	return ai;
}

void conn_init(Conn *c, unsigned index, Role role, uint32_t ring_cap)
{
	memset(c, 0, sizeof *c);
	c->fd = -1;
	c->index = index;
	c->role = role;
	if (role == ROLE_IDLE)
		return; /* idle connections hold no buffers: there may be many */
	buf_init(&c->in, READ_CHUNK);
	buf_init(&c->out, 4096);
	c->ring_cap = ring_cap;
	c->ring = calloc(ring_cap, sizeof *c->ring);
	if (!c->ring) {
		fprintf(stderr, "tubed-bench: out of memory\n");
		exit(1);
	}
}

static int wait_connected(int fd, int timeout_ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLOUT};
	int rc;
	do
		rc = poll(&pfd, 1, timeout_ms);
	while (rc < 0 && errno == EINTR);
	if (rc == 0) {
		errno = ETIMEDOUT;
		return -1;
	}
	int soerr = 0;
	socklen_t len = sizeof soerr;
	if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
		return -1;
	if (soerr) {
		errno = soerr;
		return -1;
	}
	return 0;
}

int conn_connect(Conn *c, const struct addrinfo *ai, int timeout_ms,
		 char *err, size_t errlen)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			ai->ai_protocol);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	if ((connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) ||
	    wait_connected(fd, timeout_ms) < 0) {
		snprintf(err, errlen, "%s", strerror(errno));
		close(fd);
		return -1;
	}
	/* Without NODELAY, Nagle holds back each small request until the
	 * previous reply arrives, and latency measures the kernel, not the server. */
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	c->fd = fd;
	return 0;
}

void conn_close(Conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	if (c->role != ROLE_IDLE) {
		buf_free(&c->in);
		buf_free(&c->out);
	}
	free(c->ring);
	c->ring = NULL;
}

Pending *conn_push(Conn *c)
{
	if (c->count == c->ring_cap) {
		/* A bug in the caller's in-flight accounting, never the server's fault. */
		fprintf(stderr, "tubed-bench: internal error: request ring full\n");
		abort();
	}
	Pending *p = &c->ring[(c->head + c->count) & (c->ring_cap - 1)];
	c->count++;
	return p;
}

Pending conn_pop(Conn *c)
{
	Pending p = c->ring[c->head];
	c->head = (c->head + 1) & (c->ring_cap - 1);
	c->count--;
	return p;
}

Pending *conn_front(Conn *c)
{
	return &c->ring[c->head];
}

int conn_flush(Conn *c, char *err, size_t errlen)
{
	while (buf_pending(&c->out) > 0) {
		ssize_t n = send(c->fd, c->out.data + c->out.off, buf_pending(&c->out), MSG_NOSIGNAL);
		if (n > 0) {
			buf_consume(&c->out, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0; /* the edge-triggered EPOLLOUT resumes us */
		snprintf(err, errlen, "write: %s", n < 0 ? strerror(errno) : "no progress");
		return -1;
	}
	return 0;
}

ssize_t conn_read(Conn *c, bool *full, char *err, size_t errlen)
{
	char *p = buf_space(&c->in, READ_CHUNK);
	size_t room = c->in.cap - c->in.len;
	ssize_t n;
	do
		n = recv(c->fd, p, room, 0);
	while (n < 0 && errno == EINTR);
	*full = n > 0 && (size_t)n == room;
	if (n > 0) {
		c->in.len += (size_t)n;
		return n;
	}
	if (n == 0)
		return 0;
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		return -2;
	snprintf(err, errlen, "read: %s", strerror(errno));
	return -1;
}
