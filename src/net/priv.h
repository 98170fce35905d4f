/*
 * priv.h — giving up root after the sockets are bound.
 *
 * Contract: priv_drop() switches to USER's uid and primary gid and clears
 * supplementary groups, in the order that cannot leave a process half
 * privileged (groups, gid, uid), then checks that root cannot be regained.
 * Returns 0, or -1 with a message in err; the caller must then refuse to
 * run.
 */
#ifndef TUBED_PRIV_H
#define TUBED_PRIV_H

#include <stddef.h>

int priv_drop(const char *user, char *err, size_t errlen);

#endif
