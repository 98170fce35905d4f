/*
 * stream.h — the store's record stream, published to its subscribers.
 *
 * Contract. Every write of records is published, in the order the store
 * wrote them, to each subscriber: the bytes of one or more whole records
 * (blcodec.h), exactly as they were placed in the file, the sequence
 * number of the last of them and the replication position after them. The
 * local file writer is the stream's first consumer: a subscriber hears of
 * records only once they are written to the file (a record that could not
 * be written is never published). A reset tells every subscriber that the
 * records since the last publication will never be published (the log was
 * rewritten whole after a failed write): a consumer that must see every
 * record starts over.
 *
 * Subscribers are called on the loop, in the order they subscribed; a
 * callback must not subscribe or unsubscribe. A subscriber is its (write,
 * arg) pair: subscribing the same pair again replaces it. The list is a
 * fixed array (STORE_SUBS), so subscribing never allocates.
 */
#ifndef TUBED_STREAM_H
#define TUBED_STREAM_H

#include <stddef.h>
#include <stdint.h>

typedef struct StoreSub {
    /* data: len bytes of whole records; lsn: the last one's sequence
     * number; pos: the replication position after them. */
    void (*write)(void *arg, const char *data, size_t len, uint64_t pos, uint64_t lsn);
    void (*reset)(void *arg); /* may be NULL */
    void *arg;
} StoreSub;

#define STORE_SUBS 4

typedef struct StoreStream {
    StoreSub subs[STORE_SUBS];
    unsigned n;
} StoreStream;

/* 0; -1 when STORE_SUBS subscribers are there already. */
int stream_subscribe(StoreStream *s, const StoreSub *sub);
/* Remove the subscriber (write, arg), if it is there. */
void stream_unsubscribe(StoreStream *s, const StoreSub *sub);
void stream_publish(const StoreStream *s, const char *data, size_t len, uint64_t pos,
                    uint64_t lsn);
void stream_reset(const StoreStream *s);

#endif
