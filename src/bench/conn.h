/*
 * conn.h - one client connection: a non-blocking TCP socket, its input and
 * output buffers, and the FIFO of requests awaiting replies.
 *
 * Contract: the server answers requests in order, so replies are matched to
 * the ring's front entry; conn_push() must only be called with room left
 * (callers bound what they keep in flight by conn->ring_cap).  Socket
 * helpers return -1 with an explanation in the caller's buffer instead of
 * printing or exiting: the run loop decides what a failure means.
 * The workload-state fields are owned by workload.c.
 */
#ifndef TUBED_BENCH_CONN_H
#define TUBED_BENCH_CONN_H
#include <netdb.h>
#include <stdbool.h>
#include <stdint.h>

#include "buf.h"

typedef enum Role {
	ROLE_PRODUCER,  /* puts */
	ROLE_WORKER,    /* reserve + delete */
	ROLE_MIXED,     /* alternates put and reserve-with-timeout 0 */
	ROLE_ROUNDTRIP, /* put, then reserve + delete, as one op */
	ROLE_IDLE,      /* connected, sends nothing */
} Role;

/* A request awaiting its reply. */
typedef struct Pending Pending;
struct Pending {
	uint64_t t_sent;  /* when the request was queued for sending */
	uint64_t t_chain; /* when the op this request belongs to started */
	uint32_t aux;     /* request-specific: tube index or expected count */
	uint8_t kind;     /* Cmd */
	uint8_t flags;    /* PF_* in workload.c */
};

typedef struct Conn Conn;
struct Conn {
	int fd;
	unsigned index;
	Role role;
	Buf in, out;
	Pending *ring;
	uint32_t ring_cap; /* a power of two */
	uint32_t head;     /* oldest pending request */
	uint32_t count;    /* requests in flight */
	/* workload state */
	unsigned chains;     /* ops in flight */
	unsigned setup_sent; /* setup requests sent (watch) */
	unsigned cur_tube;   /* tube the server has this connection using */
	uint64_t put_seq;    /* puts so far, to rotate over tubes */
	bool flip;           /* mixed: next op is a reserve */
};

/* Resolve host:port; on failure fills err and returns NULL. */
struct addrinfo *conn_resolve(const char *host, const char *port, char *err, size_t errlen);
void conn_init(Conn *c, unsigned index, Role role, uint32_t ring_cap);
/* Connect within timeout_ms, then make the socket non-blocking, TCP_NODELAY. */
int conn_connect(Conn *c, const struct addrinfo *ai, int timeout_ms,
		 char *err, size_t errlen);
void conn_close(Conn *c);

Pending *conn_push(Conn *c);
Pending conn_pop(Conn *c);
/* The oldest request in flight (count > 0). */
Pending *conn_front(Conn *c);

/* Write out as much output as the socket takes: 0 (done or would block) or -1. */
int conn_flush(Conn *c, char *err, size_t errlen);
/* Read once into conn->in: bytes read, 0 at end of stream, -1 error, -2 would block.
 * *full is set when the read filled all the room offered (more may be waiting). */
ssize_t conn_read(Conn *c, bool *full, char *err, size_t errlen);

#endif
