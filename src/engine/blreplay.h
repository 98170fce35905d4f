/*
 * blreplay.h — reading the binlog back at startup.
 *
 * Contract: bl_replay() reads DIR/binlog.N oldest first (DIR is already
 * locked), rebuilds every live job in s (table, tubes, states, deadlines),
 * records each file it read in s->binlog.files with its size and live
 * count, sets s->next_id above every id seen, and stores in *next_index
 * the number the new current file must take. Damage is never skipped
 * silently: a torn tail of the newest file is cut off with a warning; any
 * other damage, a missing file or a beanstalkd binlog makes it return -1
 * with a message naming the file and offset — unless --recover is set,
 * which keeps every valid record, reports each drop and sets
 * s->binlog.damaged. The helpers below are binlog.c's, shared with it.
 */
#ifndef TUBED_BLREPLAY_H
#define TUBED_BLREPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "binlog.h"
#include "server.h"

#define BL_DEL_SIZE BL_DELETE_SIZE

int bl_replay(Server *s, uint32_t *next_index, char *err, size_t errlen);

static inline Binlog *bl(Server *s) { return &s->binlog; }
static inline BlFile *cur_file(Binlog *b) { return &b->files[b->nfiles - 1]; }

/* binlog.c helpers used by the replay */
void bl_file_name(const Binlog *b, uint32_t index, char *out, size_t n);
int bl_files_push(Binlog *b, uint32_t index);
BlFile *bl_file_of(Binlog *b, uint32_t index);
size_t bl_job_record_size(const Job *j);
/* A logged realtime on s's monotonic clock, given the realtime now
 * (read once for a whole replay: one clock for every job). */
int64_t bl_mono_of(const Server *s, int64_t wall, int64_t now);

#endif
