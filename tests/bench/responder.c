/*
 * responder.c - a fake beanstalk server that does no work: it answers each
 * request with a fixed reply, so `make bench` can show the machine's ceiling
 * (kernel, loopback and client cost) for the same request pattern.
 *
 *   put ...  <bytes>  -> skips the body (bytes + 2), then "INSERTED 1"
 *   reserve[...]      -> "RESERVED 1 100" + the 100-byte body tubed-bench puts
 *   delete ...        -> "DELETED"
 *   use <t>           -> "USING <t>";  watch / ignore -> "WATCHING <n>"
 *   quit              -> closes;       anything else  -> "OK"
 *
 * Usage: responder [-l ADDR] [-p PORT] [other server flags, ignored]
 * Takes beanstalkd's flags so the bench script starts all servers alike.
 * Single-threaded epoll; built by tests/bench/run.sh with cc -O2.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BODY 100
#define INCAP 65536

struct client {
	int fd;
	size_t len;       /* bytes in in[] */
	size_t skip;      /* body bytes still to discard */
	int watching;     /* size of the watch list, for WATCHING <n> */
	char *out;        /* replies not yet written */
	size_t olen, ocap;
	char in[INCAP];
};

static char reserved[64 + BODY];
static size_t reserved_len;

static void emit(struct client *c, const char *p, size_t n)
{
	if (c->olen + n > c->ocap) {
		c->ocap = (c->olen + n) * 2;
		c->out = realloc(c->out, c->ocap);
		if (!c->out)
			abort();
	}
	memcpy(c->out + c->olen, p, n);
	c->olen += n;
}

/* Answers one request line (without \r\n); returns -1 for quit. */
static int answer(struct client *c, char *line, size_t n)
{
	char tmp[300];
	line[n] = '\0';
	if (strncmp(line, "put ", 4) == 0) {
		const char *sp = strrchr(line, ' ');
		c->skip = strtoul(sp + 1, NULL, 10) + 2;
		emit(c, "INSERTED 1\r\n", 12); /* client reads it only after its body */
	} else if (strncmp(line, "reserve", 7) == 0) {
		emit(c, reserved, reserved_len);
	} else if (strncmp(line, "delete ", 7) == 0) {
		emit(c, "DELETED\r\n", 9);
	} else if (strncmp(line, "use ", 4) == 0 && n < 250) {
		emit(c, tmp, (size_t)snprintf(tmp, sizeof tmp, "USING %s\r\n", line + 4));
	} else if (strncmp(line, "watch ", 6) == 0 || strncmp(line, "ignore ", 7) == 0) {
		c->watching += line[0] == 'w' ? 1 : -1;
		emit(c, tmp, (size_t)snprintf(tmp, sizeof tmp, "WATCHING %d\r\n", c->watching));
	} else if (strcmp(line, "quit") == 0) {
		return -1;
	} else {
		emit(c, "OK\r\n", 4);
	}
	return 0;
}

/* Consumes complete lines and bodies from in[]; -1 when the client quits. */
static int process(struct client *c)
{
	size_t off = 0;
	while (off < c->len) {
		if (c->skip) {
			size_t k = c->len - off < c->skip ? c->len - off : c->skip;
			off += k;
			c->skip -= k;
			continue;
		}
		char *nl = memmem(c->in + off, c->len - off, "\r\n", 2);
		if (!nl)
			break;
		if (answer(c, c->in + off, (size_t)(nl - (c->in + off))) < 0)
			return -1;
		off = (size_t)(nl + 2 - c->in);
	}
	c->len -= off;
	memmove(c->in, c->in + off, c->len);
	if (c->len == INCAP) /* a line that never ends: drop it */
		c->len = 0;
	return 0;
}

static int flush(struct client *c)
{
	size_t done = 0;
	while (done < c->olen) {
		ssize_t k = send(c->fd, c->out + done, c->olen - done, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN)
			break;
		if (k <= 0)
			return -1;
		done += (size_t)k;
	}
	c->olen -= done;
	memmove(c->out, c->out + done, c->olen);
	return 0;
}

/* Reads until the socket is drained (edge-triggered), answering as it goes. */
static int on_readable(struct client *c)
{
	for (;;) {
		ssize_t k = recv(c->fd, c->in + c->len, INCAP - c->len, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN)
			return 0;
		if (k <= 0)
			return -1;
		c->len += (size_t)k;
		if (process(c) < 0 || flush(c) < 0)
			return -1;
	}
}

static void drop(struct client *c)
{
	close(c->fd);
	free(c->out);
	free(c);
}

static int listen_on(const char *addr, int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 1024) < 0) {
		fprintf(stderr, "responder: cannot listen on %s:%d: %s\n", addr, port, strerror(errno));
		exit(1);
	}
	return fd;
}

static void accept_all(int ep, int lfd)
{
	int fd, one = 1;
	while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
		struct client *c = calloc(1, sizeof *c);
		if (!c)
			abort();
		c->fd = fd;
		c->watching = 1; /* "default" */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = c};
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	}
}

int main(int argc, char **argv)
{
	const char *addr = "127.0.0.1";
	int port = 11300;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-l") == 0 && i + 1 < argc)
			addr = argv[++i];
		else if (strcmp(argv[i], "-p") == 0 && i + 1 < argc)
			port = atoi(argv[++i]);
	}
	reserved_len = (size_t)snprintf(reserved, sizeof reserved, "RESERVED 1 %d\r\n", BODY);
	for (int i = 0; i < BODY; i++) /* tubed-bench's body pattern */
		reserved[reserved_len++] = (char)('a' + i % 26);
	memcpy(reserved + reserved_len, "\r\n", 2);
	reserved_len += 2;

	int lfd = listen_on(addr, port), ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	struct epoll_event evs[256];
	for (;;) {
		int n = epoll_wait(ep, evs, 256, -1);
		for (int i = 0; i < n; i++) {
			struct client *c = evs[i].data.ptr;
			if (!c)
				accept_all(ep, lfd);
			else if ((evs[i].events & EPOLLIN ? on_readable(c) : flush(c)) < 0)
				drop(c);
		}
	}
}
