/*
 * policy.h — the tube policies of the config file in force: limits,
 * expiry with dead-letter tubes, the TTR-timeout limit, and fanout.
 *
 * Contract. Every tube carries its resolved TubePolicy (conf.h), given
 * when the tube is created and again for every tube when the config is
 * reloaded (policy_reload): new settings apply at once to every job,
 * including those already queued.
 *
 * - Limits count jobs in every state, so a release never fails on one.
 *   policy_make_room() admits a new job of n body bytes or, with
 *   discard_old_when_full, deletes the oldest ready jobs, then delayed,
 *   then buried (never a reserved one) to make room; if even that cannot
 *   make room it deletes nothing and refuses.
 * - Expiry: a job expires at queue_expiry_of() (max_age after it entered
 *   its tube, or a client's earlier expiry). An expired job is never
 *   handed out or peeked: policy_check() expires a job found past its
 *   time on any path before it is used, and the timer sweeps the rest a
 *   bounded batch per loop iteration, so a million jobs expiring at once
 *   never stall other clients for long. A reserved job expires when it is
 *   released, buried, times out or its worker goes. An expired job is
 *   deleted, or moved to move_expired_to (same id, priority, TTR and
 *   counters, ready, its clock restarted), each step journaled.
 * - Fanout: with fanout on tube P, a tube "P+CHILD" created by a client
 *   is registered as P's child (the engine holds a reference, so it stays
 *   when empty, and it is journaled in the binlog, BL_CHILD); each
 *   job put into P is copied, with its own id, into every child that has
 *   room (priority, TTR, delay and a client's expiry kept).
 */
#ifndef TUBED_POLICY_H
#define TUBED_POLICY_H

#include <stdint.h>

#include "core.h"

void policy_init(Engine *e);
/* Before a reload: take the memory policy_reload() will need to apply the
 * config next (expiry heap room and JobExts for tubes whose max_age
 * changes), so that applying it cannot fail. 0, or -1: out of memory, the
 * config in force and every job's expiry unchanged. */
int policy_reload_prepare(Engine *e, const ConfFile *next);
/* The config in force changed (e->cfg->conf): re-resolve every tube. */
void policy_reload(Engine *e);

/* The largest body tube t takes. */
uint32_t policy_max_body(const Engine *e, const Tube *t);
/* Room in t for one more job of n body bytes: 0 (made, maybe by
 * discarding), -1 (full, nothing changed). */
int policy_make_room(Engine *e, Tube *t, uint32_t n);

/* 1 if j is past its time and would expire now: not reserved, not on a
 * replica, and not a job whose move to a full move_expired_to tube failed
 * and waits for its retry (that one stays a job of its tube, served,
 * peeked, counted and listed, until a retry moves it). Changes nothing. */
int policy_due(const Engine *e, const Job *j);
/* If j's time has passed (and it is not reserved), expire it now and
 * return 1 (j is gone from its tube: deleted or moved); else 0. */
int policy_check(Engine *e, Job *j);
/* Expire due jobs of t, at most budget of them; returns how many. */
uint64_t policy_expire_due(Engine *e, Tube *t, uint64_t budget);
/* Every due expiry of every tube (before a stats document is made). */
void policy_expire_all(Engine *e);

/* Move a ready, delayed or buried job to dst (dst's limits apply), keeping
 * its id, priority, TTR, counters and, unless to_ready, its state and
 * delay deadline; its expiry clock restarts. 0, or -1 with nothing
 * changed (dst full, or out of memory). */
int policy_move(Engine *e, Job *j, Tube *dst, int to_ready);

/* A job was put into t: copy it into t's fanout children, each copy with
 * j's priority, TTR, delay and client expiry (JobExt.exptime). */
void policy_fanout(Engine *e, Tube *t, const Job *j);
/* A client named t (use, watch, set, get...): register it as a fanout
 * child if its parent has fanout on. */
void policy_named(Engine *e, Tube *t);
/* End t's fanout subscription (memcache delete). */
void policy_unregister(Engine *e, Tube *t);
/* After the replay: link the children it registered to their parents,
 * and journal those of an older version's DIR/fanout (the file then
 * goes). -1 with a message when the server must not start. */
int policy_children_replayed(Engine *e, char *err, size_t errlen);
/* A replica applies its primary's BL_CHILD record: register (on) or let
 * go the child `name` whatever this server's config says, and journal it.
 * -1 out of memory. */
int policy_child_apply(Engine *e, const char *name, size_t len, int on);

#endif
