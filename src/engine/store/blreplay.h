/*
 * blreplay.h — reading the binlog back at startup.
 *
 * Contract: bl_replay() reads DIR/binlog.N oldest first (DIR is already
 * locked), rebuilds every live job in s (table, tubes, states, deadlines),
 * records each file it read in e->binlog.files with its size and live
 * count, sets e->next_id above every id seen, and stores in *next_index
 * the number the new current file must take. Damage is never skipped
 * silently: a torn tail of the newest file is cut off with a warning; any
 * other damage, a missing file or a beanstalkd binlog makes it return -1
 * with a message naming the file and offset — unless --recover is set,
 * which keeps every valid record, reports each drop and sets
 * e->binlog.damaged.
 */
#ifndef TUBED_BLREPLAY_H
#define TUBED_BLREPLAY_H

#include <stddef.h>
#include <stdint.h>

typedef struct Engine Engine;

int bl_replay(Engine *e, uint32_t *next_index, char *err, size_t errlen);

#endif
