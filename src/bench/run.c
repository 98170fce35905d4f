/* run.c - epoll event loop, limits and progress; see run.h. */
#include "run.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mcproto.h"
#include "workload.h"

#define MAX_EVENTS 256
#define TICK_MS 100

static volatile sig_atomic_t got_sigint;

static void on_sigint(int sig)
{
	got_sigint = 1;
}

typedef struct Limits Limits;
struct Limits {
	uint64_t hard_deadline;    /* --timeout, whole run */
	uint64_t measure_deadline; /* -d, 0 when counting ops */
	uint64_t stall;            /* --stall */
	bool progress;             /* a progress line on stderr */
	bool progress_shown;
	uint64_t phase_start, next_progress, last_t, last_done;
};

static uint64_t secs_to_ns(double s)
{
	return (uint64_t)llround(s * 1e9);
}

/* Many idle connections need more descriptors than the usual soft limit. */
static void raise_fd_limit(unsigned need)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
		rl.rlim_cur = need < rl.rlim_max ? need : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* The first connection tries every address the name resolves to; the rest
 * reuse the one that worked. */
static int connect_all(Bench *b, int timeout_ms)
{
	char err[256] = "";
	const BenchOpts *o = b->o;
	struct addrinfo *list = conn_resolve(o->host, o->port, err, sizeof err);
	if (!list)
		return bench_fail(b, "%s", err);
	raise_fd_limit(b->nconns + 64);
	struct addrinfo *ai = list;
	while (conn_connect(&b->conns[0], ai, timeout_ms, err, sizeof err) < 0 && ai->ai_next)
		ai = ai->ai_next;
	for (unsigned i = 0; i < b->nconns; i++) {
		Conn *c = &b->conns[i];
		if (c->fd < 0 && (i == 0 || conn_connect(c, ai, timeout_ms, err, sizeof err) < 0)) {
			freeaddrinfo(list);
			return bench_fail(b, "cannot connect to %s port %s: %s (connection %u of %u)",
					  o->host, o->port, err, i + 1, b->nconns);
		}
		/* Edge-triggered: one registration, no epoll_ctl per write stall. */
		struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = c};
		if (c->role != ROLE_IDLE)
			ev.events |= EPOLLOUT;
		if (epoll_ctl(b->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
			freeaddrinfo(list);
			return bench_fail(b, "epoll_ctl: %s", strerror(errno));
		}
	}
	freeaddrinfo(list);
	return 0;
}

static int parse_replies(Bench *b, Conn *c, uint64_t now)
{
	char q[120];
	for (;;) {
		Reply r;
		size_t need;
		size_t avail = buf_pending(&c->in);
		ssize_t k = b->o->protocol == PROTO_MEMCACHE
				    ? mcproto_frame(c->in.data + c->in.off, avail, &r, &need)
				    : proto_frame(c->in.data + c->in.off, avail, &r, &need);
		if (k == 0) {
			if (need > avail) /* a large body: make room for all of it */
				buf_space(&c->in, need - avail);
			return 0;
		}
		if (k < 0)
			return bench_fail(b, "connection %u: malformed reply from server: %s", c->index,
					  bench_quote(c->in.data + c->in.off, avail, q, sizeof q));
		if (c->count == 0)
			return bench_fail(b, "connection %u: reply without a request: %s", c->index,
					  bench_quote(r.line, r.line_len, q, sizeof q));
		workload_reply(b, c, &r, now);
		buf_consume(&c->in, (size_t)k);
		if (b->failure[0])
			return -1;
	}
}

static int read_replies(Bench *b, Conn *c, uint64_t *now)
{
	char err[128];
	for (;;) {
		bool full;
		ssize_t n = conn_read(c, &full, err, sizeof err);
		if (n == -2)
			return 0;
		if (n < 0)
			return bench_fail(b, "lost connection %u to the server: %s", c->index, err);
		if (n == 0)
			return bench_fail(b, "server closed connection %u (%u request%s outstanding)",
					  c->index, c->count, c->count == 1 ? "" : "s");
		*now = now_ns();
		b->t_last_rx = *now;
		if (parse_replies(b, c, *now) < 0)
			return -1;
		/* A short read drained the socket; the next edge wakes us. */
		if (!full)
			return 0;
	}
}

static int idle_event(Bench *b, Conn *c)
{
	char tmp[256];
	ssize_t n = recv(c->fd, tmp, sizeof tmp, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n == 0)
		return bench_fail(b, "server closed idle connection %u", c->index);
	if (n < 0)
		return bench_fail(b, "idle connection %u: %s", c->index, strerror(errno));
	return bench_fail(b, "server sent %zd bytes on idle connection %u", n, c->index);
}

static int on_event(Bench *b, Conn *c, uint32_t events)
{
	char err[128];
	uint64_t now = now_ns();
	if (c->role == ROLE_IDLE)
		return idle_event(b, c);
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		if (read_replies(b, c, &now) < 0)
			return -1;
	workload_fill(b, c, now);
	if (conn_flush(c, err, sizeof err) < 0)
		return bench_fail(b, "connection %u: %s", c->index, err);
	return 0;
}

static uint64_t outstanding(const Bench *b)
{
	uint64_t n = 0;
	for (unsigned i = 0; i < b->nwork; i++)
		n += b->conns[i].count;
	return n;
}

static int check_limits(Bench *b, const Limits *lim, uint64_t now)
{
	if (got_sigint) {
		b->interrupted = b->stop = true;
		return 0;
	}
	if (now >= lim->hard_deadline)
		return bench_fail(b, "time limit reached (--timeout %g s) in the %s phase, "
				  "%llu of %llu ops done", b->o->timeout, phase_name(b->phase),
				  (unsigned long long)b->done, (unsigned long long)b->target);
	if (now - b->t_last_rx >= lim->stall && outstanding(b) > 0)
		return bench_fail(b, "server stopped answering: nothing received for %g s with "
				  "%llu request%s outstanding (%s phase; --stall to change)",
				  b->o->stall, (unsigned long long)outstanding(b),
				  outstanding(b) == 1 ? "" : "s", phase_name(b->phase));
	if (b->phase == PHASE_MEASURE && lim->measure_deadline && now >= lim->measure_deadline)
		b->stop = true;
	return 0;
}

static void show_progress(const Bench *b, Limits *lim, uint64_t now)
{
	if (!lim->progress || b->phase == PHASE_SETUP || now < lim->next_progress)
		return;
	double rate = (double)(b->done - lim->last_done) * 1e9 / (double)(now - lim->last_t);
	fprintf(stderr, "\r\033[K%s %.0fs: %llu", phase_name(b->phase),
		(double)(now - lim->phase_start) / 1e9, (unsigned long long)b->done);
	if (b->target != UINT64_MAX)
		fprintf(stderr, "/%llu", (unsigned long long)b->target);
	fprintf(stderr, " ops, %.0f ops/s, %llu unexpected", rate, (unsigned long long)b->errors);
	lim->progress_shown = true;
	lim->last_done = b->done;
	lim->last_t = now;
	lim->next_progress = now + 1000000000u;
}

static int wait_ms(const Bench *b, const Limits *lim, uint64_t now)
{
	if (b->phase == PHASE_MEASURE && lim->measure_deadline) {
		uint64_t left = lim->measure_deadline > now ? lim->measure_deadline - now : 0;
		uint64_t ms = (left + 999999) / 1000000;
		return ms < TICK_MS ? (int)ms : TICK_MS;
	}
	return TICK_MS;
}

static int start_phase(Bench *b, Phase ph, Limits *lim)
{
	char err[128];
	uint64_t now = now_ns();
	workload_begin(b, ph, now);
	b->t_last_rx = now;
	lim->phase_start = lim->last_t = now;
	lim->last_done = 0;
	lim->next_progress = now + 1000000000u;
	if (ph == PHASE_MEASURE && b->o->duration > 0)
		lim->measure_deadline = now + secs_to_ns(b->o->duration);
	for (unsigned i = 0; i < b->nwork; i++) {
		Conn *c = &b->conns[i];
		workload_fill(b, c, now);
		if (conn_flush(c, err, sizeof err) < 0)
			return bench_fail(b, "connection %u: %s", c->index, err);
	}
	return 0;
}

static int run_phase(Bench *b, Phase ph, Limits *lim)
{
	struct epoll_event evs[MAX_EVENTS];
	if (start_phase(b, ph, lim) < 0)
		return -1;
	while (!workload_done(b)) {
		uint64_t now = now_ns();
		if (check_limits(b, lim, now) < 0)
			return -1;
		if (b->stop)
			break;
		show_progress(b, lim, now);
		int n = epoll_wait(b->epfd, evs, MAX_EVENTS, wait_ms(b, lim, now));
		if (n < 0 && errno != EINTR)
			return bench_fail(b, "epoll_wait: %s", strerror(errno));
		for (int i = 0; i < n; i++)
			if (on_event(b, evs[i].data.ptr, evs[i].events) < 0)
				return -1;
	}
	if (ph == PHASE_MEASURE)
		b->t_end = now_ns();
	return 0;
}

static void install_sigint(void)
{
	/* No SA_RESTART: epoll_wait must return so the loop sees the flag. */
	struct sigaction sa = {.sa_handler = on_sigint};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
}

int bench_run(Bench *b)
{
	const BenchOpts *o = b->o;
	Limits lim = {
		.hard_deadline = now_ns() + secs_to_ns(o->timeout),
		.stall = secs_to_ns(o->stall),
		.progress = !o->quiet && isatty(STDERR_FILENO),
	};
	install_sigint();
	b->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (b->epfd < 0)
		return bench_fail(b, "epoll_create1: %s", strerror(errno));
	int rc = connect_all(b, (int)(o->stall * 1000));
	for (Phase ph = PHASE_SETUP; rc == 0 && ph <= PHASE_MEASURE; ph++) {
		if (!workload_has_phase(b, ph))
			continue;
		rc = run_phase(b, ph, &lim);
		if (b->interrupted)
			break;
	}
	if (lim.progress_shown)
		fputs("\r\033[K", stderr);
	close(b->epfd);
	return rc;
}
