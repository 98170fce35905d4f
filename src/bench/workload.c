/* workload.c - request chains and reply checks per workload; see workload.h. */
#include "workload.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcwork.h"
#include "wlshare.h"

/* Urgent-free priority and a TTR far beyond any reserve-to-delete gap, so
 * DEADLINE_SOON can never be a legitimate answer. */
#define JOB_PRI 1024
#define JOB_TTR 60

#define SHOWN_ERRORS 5   /* unexpected replies printed in full */
#define MAX_ERRORS 1000  /* past this the server is clearly broken: give up */

static const char *const cmd_names[CMD__COUNT] = {
	[CMD_USE] = "use",
	[CMD_WATCH] = "watch",
	[CMD_IGNORE] = "ignore",
	[CMD_PUT] = "put",
	[CMD_RESERVE] = "reserve",
	[CMD_RESERVE_NOW] = "reserve-with-timeout",
	[CMD_DELETE] = "delete",
	[CMD_MC_SET] = "set",
	[CMD_MC_GET] = "get",
	[CMD_MC_OPEN] = "get/open",
	[CMD_MC_CLOSE] = "get/close",
};

const char *cmd_name(Cmd k)
{
	return cmd_names[k];
}

const char *phase_name(Phase ph)
{
	static const char *const names[] = {"setup", "prefill", "measure"};
	return names[ph];
}

/* Tubes of their own (bench.<pid>.<k>), with "default" ignored: a run
 * pointed at a live server never reserves or deletes anybody else's jobs,
 * and jobs left over by an earlier run cannot disturb this one. */
void wl_tube_name(const Bench *b, unsigned k, char *out, size_t n)
{
	if (b->o->tube)
		snprintf(out, n, "%s", b->o->tube); /* --tube: -t is 1 */
	else
		snprintf(out, n, "bench.%u.%u", b->run_id, k);
}

static Role role_of(const BenchOpts *o, unsigned i)
{
	switch (o->workload) {
	case WL_PUT: return ROLE_PRODUCER;
	case WL_RESERVE_DELETE: return ROLE_WORKER;
	case WL_PRODUCE_CONSUME: return i < o->producers ? ROLE_PRODUCER : ROLE_WORKER;
	case WL_MIXED: return ROLE_MIXED;
	case WL_WATCH: return ROLE_ROUNDTRIP;
	case WL_MC_SET: return ROLE_PRODUCER;
	case WL_MC_GET:
	case WL_MC_OPEN_CLOSE: return ROLE_WORKER;
	}
	return ROLE_IDLE;
}

static uint32_t ring_size(unsigned pipeline)
{
	/* Two requests per op can be in flight (use + put); at least 64 lets
	 * setup and prefill run deep pipelines whatever -P says. */
	uint32_t need = 2 * pipeline > 64 ? 2 * pipeline : 64, cap = 1;
	while (cap < need)
		cap *= 2;
	return cap;
}

void workload_init(Bench *b)
{
	const BenchOpts *o = b->o;
	b->nwork = o->connections;
	b->nconns = o->connections + o->idle;
	b->nprod = o->workload == WL_PRODUCE_CONSUME ? o->producers : o->connections;
	b->run_id = (unsigned)getpid();
	b->conns = calloc(b->nconns, sizeof *b->conns);
	b->body = malloc(o->size ? o->size : 1);
	if (!b->conns || !b->body) {
		fprintf(stderr, "tubed-bench: out of memory\n");
		exit(1);
	}
	uint32_t ring = ring_size(o->pipeline);
	for (unsigned i = 0; i < b->nconns; i++) {
		conn_init(&b->conns[i], i, i < b->nwork ? role_of(o, i) : ROLE_IDLE, ring);
		b->conns[i].cur_tube = UINT_MAX; /* none of ours until setup's "use" */
	}
	/* A varying pattern, so a body shifted or cut by the server shows. */
	for (size_t i = 0; i < o->size; i++)
		b->body[i] = (char)('a' + i % 26);
	buf_init(&b->put_req, o->size + 64);
	if (o->protocol == PROTO_MEMCACHE)
		mcwork_init(b);
	else
		proto_put(&b->put_req, JOB_PRI, 0, JOB_TTR, b->body, o->size);
}

void workload_free(Bench *b)
{
	for (unsigned i = 0; i < b->nconns; i++)
		conn_close(&b->conns[i]);
	free(b->conns);
	free(b->body);
	buf_free(&b->put_req);
}

static bool reserves(const Conn *c)
{
	return c->role == ROLE_WORKER || c->role == ROLE_MIXED || c->role == ROLE_ROUNDTRIP;
}

/* Setup: "use" of the connection's first tube; then, for connections that
 * reserve, "watch" of every tube and "ignore default". */
static unsigned setup_count(const Bench *b, const Conn *c)
{
	if (c->role == ROLE_IDLE || b->o->protocol == PROTO_MEMCACHE)
		return 0;
	return 1 + (reserves(c) ? b->o->tubes + 1 : 0);
}

bool workload_has_phase(const Bench *b, Phase ph)
{
	switch (ph) {
	case PHASE_SETUP: return true;
	case PHASE_PREFILL: return workload_drains(b->o->workload) && b->o->prefill > 0;
	case PHASE_MEASURE: return true;
	}
	return false;
}

void workload_begin(Bench *b, Phase ph, uint64_t now)
{
	b->phase = ph;
	b->started = b->done = b->failed = 0;
	b->stop = false;
	switch (ph) {
	case PHASE_SETUP:
		b->setup_left = 0;
		for (unsigned i = 0; i < b->nwork; i++)
			b->setup_left += setup_count(b, &b->conns[i]);
		break;
	case PHASE_PREFILL:
		b->target = b->o->prefill;
		break;
	case PHASE_MEASURE:
		b->target = b->o->requests;
		/* A drain can only take what the prefill stored: asking for
		 * more would block in reserve forever (or get END).  A
		 * memcached's get takes nothing; --prefill 0 drains jobs an
		 * earlier run put into --tube. */
		if (workload_drains(b->o->workload) && !b->o->memcached &&
		    b->o->prefill > 0 && b->prefilled < b->target)
			b->target = b->prefilled;
		b->puts_started = b->puts_failed = 0;
		b->t_begin = now;
		break;
	}
}

bool workload_done(const Bench *b)
{
	if (b->phase == PHASE_SETUP)
		return b->setup_left == 0;
	return b->stop || b->done + b->failed >= b->target;
}

/* ---- sending ---- */

void wl_push(Conn *c, Cmd kind, uint32_t aux, unsigned flags,
	     uint64_t t_chain, uint64_t now)
{
	Pending *p = conn_push(c);
	*p = (Pending){.t_sent = now, .t_chain = t_chain, .aux = aux,
			      .kind = (uint8_t)kind, .flags = (uint8_t)flags};
}

/* Which tube this connection's next put goes to.  With at least as many
 * putting connections as tubes each sticks to one tube; with fewer, each
 * rotates over its share (tubes i, i+np, i+2np, ...), sending "use" before
 * each put.  Round trips all go to the last watched tube: the worst case
 * for a server that scans the watch list in order. */
unsigned wl_put_tube(const Bench *b, Conn *c)
{
	unsigned t = b->o->tubes;
	unsigned np = b->phase == PHASE_PREFILL ? b->nwork : b->nprod;
	if (c->role == ROLE_ROUNDTRIP)
		return t - 1;
	if (t <= np || c->index >= np)
		return c->index % t;
	unsigned owned = (t - c->index + np - 1) / np;
	return c->index + np * (unsigned)(c->put_seq++ % owned);
}

static void send_use(Bench *b, Conn *c, unsigned tube, unsigned flags,
		     uint64_t t_chain, uint64_t now)
{
	char name[64];
	wl_tube_name(b, tube, name, sizeof name);
	wl_push(c, CMD_USE, tube, flags, t_chain, now);
	proto_line_name(&c->out, "use", name);
	c->cur_tube = tube;
}

static void send_put(Bench *b, Conn *c, unsigned flags, uint64_t now)
{
	unsigned tube = wl_put_tube(b, c);
	if (tube != c->cur_tube)
		send_use(b, c, tube, flags, now, now);
	wl_push(c, CMD_PUT, 0, flags, now, now);
	buf_append(&c->out, b->put_req.data, b->put_req.len);
}

static void send_reserve(Conn *c, Cmd kind, unsigned flags,
			 uint64_t t_chain, uint64_t now)
{
	wl_push(c, kind, 0, flags, t_chain, now);
	proto_line(&c->out, kind == CMD_RESERVE ? "reserve" : "reserve-with-timeout 0");
}

static void send_delete(Conn *c, uint64_t id, unsigned flags,
			uint64_t t_chain, uint64_t now)
{
	wl_push(c, CMD_DELETE, 0, flags, t_chain, now);
	proto_line_u64(&c->out, "delete", id);
}

/* Setup step i of a connection (see setup_count). */
static void send_setup(Bench *b, Conn *c, unsigned i, uint64_t now)
{
	unsigned t = b->o->tubes;
	char name[64];
	if (i == 0) {
		/* Peek at the first tube without advancing the rotation. */
		uint64_t seq = c->put_seq;
		send_use(b, c, wl_put_tube(b, c), 0, now, now);
		c->put_seq = seq;
	} else if (i <= t) {
		wl_tube_name(b, i - 1, name, sizeof name);
		wl_push(c, CMD_WATCH, i + 1, 0, now, now); /* default + i tubes */
		proto_line_name(&c->out, "watch", name);
	} else {
		wl_push(c, CMD_IGNORE, t, 0, now, now);
		proto_line_name(&c->out, "ignore", "default");
	}
}

static void fill_setup(Bench *b, Conn *c, uint64_t now)
{
	unsigned total = setup_count(b, c);
	while (c->setup_sent < total && c->count < c->ring_cap)
		send_setup(b, c, c->setup_sent++, now);
}

static bool may_start(const Bench *b)
{
	/* A failed put in produce-consume is a job no worker will ever get. */
	uint64_t limit = b->target - (b->puts_failed < b->target ? b->puts_failed : b->target);
	return !b->stop && b->started < limit;
}

/* Start one op on c; false when the phase has none left to start. */
static bool start_chain(Bench *b, Conn *c, uint64_t now)
{
	Role role = b->phase == PHASE_PREFILL ? ROLE_PRODUCER : c->role;
	if (role == ROLE_PRODUCER && b->o->workload == WL_PRODUCE_CONSUME) {
		/* Producers feed the workers' ops; their puts are not ops. */
		if (b->stop || b->puts_started >= b->target)
			return false;
		b->puts_started++;
		send_put(b, c, 0, now);
		return true;
	}
	if (role == ROLE_IDLE || !may_start(b))
		return false;
	b->started++;
	if (b->o->protocol == PROTO_MEMCACHE) {
		mcwork_start(b, c, role, now);
		return true;
	}
	switch (role) {
	case ROLE_PRODUCER: send_put(b, c, PF_COUNTED, now); break;
	case ROLE_WORKER: send_reserve(c, CMD_RESERVE, PF_COUNTED, now, now); break;
	case ROLE_ROUNDTRIP: send_put(b, c, PF_COUNTED | PF_ROUNDTRIP, now); break;
	case ROLE_MIXED:
		c->flip = !c->flip;
		if (c->flip)
			send_put(b, c, PF_COUNTED, now);
		else
			send_reserve(c, CMD_RESERVE_NOW, PF_COUNTED, now, now);
		break;
	case ROLE_IDLE: break;
	}
	return true;
}

void workload_fill(Bench *b, Conn *c, uint64_t now)
{
	if (b->phase == PHASE_SETUP) {
		fill_setup(b, c, now);
		return;
	}
	/* The prefill is not measured: run it as deep as the ring allows. */
	unsigned depth = b->phase == PHASE_PREFILL ? c->ring_cap / 2 : b->o->pipeline;
	while (c->chains < depth && start_chain(b, c, now))
		c->chains++;
}

/* ---- replies ---- */

static void unexpected(Bench *b, const Conn *c, const Pending *p,
		       const Reply *r)
{
	b->errors++;
	if (b->errors <= SHOWN_ERRORS) {
		char q[120];
		bench_quote(r->line, r->line_len, q, sizeof q);
		fprintf(stderr, "tubed-bench: connection %u: unexpected reply to %s: %s", c->index,
			cmd_name((Cmd)p->kind), q);
		if (r->body && r->body_len != b->o->size)
			fprintf(stderr, " with a %zu-byte body, expected %zu bytes", r->body_len,
				b->o->size);
		else if (r->body)
			fprintf(stderr, " with a body unlike the one put");
		fputc('\n', stderr);
	}
	if (b->errors == SHOWN_ERRORS + 1)
		fprintf(stderr, "tubed-bench: (further unexpected replies only counted)\n");
	if (b->errors >= MAX_ERRORS)
		bench_fail(b, "giving up after %d unexpected replies", MAX_ERRORS);
}

bool wl_expect(Bench *b, const Conn *c, const Pending *p,
	       const Reply *r, bool ok)
{
	if (!ok)
		unexpected(b, c, p, r);
	return ok;
}

void wl_chain_end(Bench *b, Conn *c, const Pending *p,
		  bool ok, uint64_t now)
{
	c->chains--;
	if (p->flags & PF_COUNTED) {
		if (!ok) {
			b->failed++;
		} else {
			b->done++;
			if (b->phase == PHASE_MEASURE)
				hist_record(&b->op_lat, now - p->t_chain);
		}
	} else if (!ok && p->kind == CMD_PUT) {
		b->failed++; /* produce-consume: the job this op was for never exists */
		b->puts_failed++;
	}
}

bool wl_body_ok(const Bench *b, const Reply *r)
{
	return r->body_len == b->o->size && memcmp(r->body, b->body, r->body_len) == 0;
}

static void on_put(Bench *b, Conn *c, const Pending *p,
		   const Reply *r, uint64_t now)
{
	uint64_t id;
	bool ok = wl_expect(b, c, p, r, reply_word_u64(r, "INSERTED", &id));
	if (ok && b->phase == PHASE_PREFILL)
		b->prefilled++;
	if (ok && (p->flags & PF_ROUNDTRIP))
		send_reserve(c, CMD_RESERVE, p->flags, p->t_chain, now);
	else
		wl_chain_end(b, c, p, ok, now);
}

static void on_reserve(Bench *b, Conn *c, const Pending *p,
		       const Reply *r, uint64_t now)
{
	uint64_t id;
	if (reply_reserved(r, &id) && wl_body_ok(b, r)) {
		send_delete(c, id, p->flags, p->t_chain, now);
		return;
	}
	/* An empty queue is a normal answer to reserve-with-timeout 0. */
	bool ok = p->kind == CMD_RESERVE_NOW && reply_is(r, "TIMED_OUT");
	wl_chain_end(b, c, p, wl_expect(b, c, p, r, ok), now);
}

void workload_reply(Bench *b, Conn *c, const Reply *r, uint64_t now)
{
	Pending p = conn_pop(c);
	char name[64];
	uint64_t n;
	if (b->phase == PHASE_MEASURE) {
		b->cmds++;
		hist_record(&b->cmd_lat[p.kind], now - p.t_sent);
	}
	if (b->o->protocol == PROTO_MEMCACHE) {
		mcwork_reply(b, c, &p, r, now);
		return;
	}
	switch ((Cmd)p.kind) {
	case CMD_WATCH:
	case CMD_IGNORE:
		wl_expect(b, c, &p, r, reply_word_u64(r, "WATCHING", &n) && n == p.aux);
		b->setup_left--;
		break;
	case CMD_USE:
		/* In setup, or part of a put's chain (whose put reply ends it). */
		wl_tube_name(b, p.aux, name, sizeof name);
		wl_expect(b, c, &p, r, reply_word_name(r, "USING", name));
		if (b->phase == PHASE_SETUP)
			b->setup_left--;
		break;
	case CMD_PUT:
		on_put(b, c, &p, r, now);
		break;
	case CMD_RESERVE:
	case CMD_RESERVE_NOW:
		on_reserve(b, c, &p, r, now);
		break;
	case CMD_DELETE:
		wl_chain_end(b, c, &p, wl_expect(b, c, &p, r, reply_is(r, "DELETED")), now);
		break;
	case CMD_MC_SET: /* memcache: mcwork.c */
	case CMD_MC_GET:
	case CMD_MC_OPEN:
	case CMD_MC_CLOSE:
	case CMD__COUNT:
		break;
	}
}
