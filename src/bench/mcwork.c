/* mcwork.c - memcache request chains and reply checks; see mcwork.h. */
#include "mcwork.h"

#include "mcproto.h"
#include "wlshare.h"

/* What a get of each kind appends to the queue name. */
static const char *suffix_of(Cmd kind)
{
	switch (kind) {
	case CMD_MC_OPEN: return "/open";
	case CMD_MC_CLOSE: return "/close";
	default: return "";
	}
}

void mcwork_init(Bench *b)
{
	mcproto_set_tail(&b->put_req, b->body, b->o->size);
}

/* The queue of the op just started, in turn over the phase. */
static unsigned turn_queue(const Bench *b)
{
	return (unsigned)((b->started - 1) % b->o->tubes);
}

static void send_set(Bench *b, Conn *c, unsigned q, uint64_t now)
{
	char name[64];
	wl_tube_name(b, q, name, sizeof name);
	wl_push(c, CMD_MC_SET, q, PF_COUNTED, now, now);
	mcproto_set(&c->out, name, &b->put_req);
}

static void send_get(Bench *b, Conn *c, Cmd kind, unsigned q,
		     uint64_t now)
{
	char name[64];
	wl_tube_name(b, q, name, sizeof name);
	wl_push(c, kind, q, PF_COUNTED, now, now);
	mcproto_get(&c->out, name, suffix_of(kind));
}

void mcwork_start(Bench *b, Conn *c, Role role, uint64_t now)
{
	if (role == ROLE_PRODUCER) {
		unsigned q = b->phase == PHASE_PREFILL ? turn_queue(b) : wl_put_tube(b, c);
		send_set(b, c, q, now);
	} else if (b->o->workload == WL_MC_GET) {
		send_get(b, c, CMD_MC_GET, turn_queue(b), now);
	} else {
		/* Sent together: the server runs them in order, so the
		 * connection never holds two open items of a queue (kestrel's
		 * limit), whatever the pipeline depth. */
		unsigned q = turn_queue(b);
		send_get(b, c, CMD_MC_OPEN, q, now);
		send_get(b, c, CMD_MC_CLOSE, q, now);
	}
}

/* VALUE <key> 0 <size> with the body every item is set with.  tubed echoes
 * the key as sent (q/open); kestrel itself echoed the bare queue name. */
static bool value_ok(const Bench *b, const Pending *p, const Reply *r)
{
	char name[64];
	wl_tube_name(b, p->aux, name, sizeof name);
	bool key_ok = mcreply_value(r, name, suffix_of((Cmd)p->kind)) ||
		      (p->kind == CMD_MC_OPEN && mcreply_value(r, name, ""));
	return key_ok && wl_body_ok(b, r);
}

static void on_set(Bench *b, Conn *c, const Pending *p,
		   const Reply *r, uint64_t now)
{
	bool ok = wl_expect(b, c, p, r, reply_is(r, "STORED"));
	if (ok && b->phase == PHASE_PREFILL)
		b->prefilled++;
	wl_chain_end(b, c, p, ok, now);
}

/* The close went out with the open: a failed open marks it, and the op
 * ends (failed) with the close's reply. */
static void on_open(Bench *b, Conn *c, const Pending *p,
		    const Reply *r)
{
	if (!wl_expect(b, c, p, r, value_ok(b, p, r)))
		conn_front(c)->flags |= PF_FAILED;
}

static void on_close(Bench *b, Conn *c, const Pending *p,
		     const Reply *r, uint64_t now)
{
	bool ok = wl_expect(b, c, p, r, reply_is(r, "END"));
	wl_chain_end(b, c, p, ok && !(p->flags & PF_FAILED), now);
}

void mcwork_reply(Bench *b, Conn *c, const Pending *p,
		  const Reply *r, uint64_t now)
{
	switch ((Cmd)p->kind) {
	case CMD_MC_SET:
		on_set(b, c, p, r, now);
		break;
	case CMD_MC_GET:
		wl_chain_end(b, c, p, wl_expect(b, c, p, r, value_ok(b, p, r)), now);
		break;
	case CMD_MC_OPEN:
		on_open(b, c, p, r);
		break;
	case CMD_MC_CLOSE:
		on_close(b, c, p, r, now);
		break;
	default:
		break;
	}
}
