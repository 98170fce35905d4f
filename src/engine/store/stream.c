#include "stream.h"

#include <string.h>

static int same(const StoreSub *a, const StoreSub *b)
{
    return a->write == b->write && a->arg == b->arg;
}

int stream_subscribe(StoreStream *s, const StoreSub *sub)
{
    for (unsigned i = 0; i < s->n; i++)
        if (same(&s->subs[i], sub)) {
            s->subs[i] = *sub;
            return 0;
        }
    if (s->n == STORE_SUBS)
        return -1;
    s->subs[s->n++] = *sub;
    return 0;
}

void stream_unsubscribe(StoreStream *s, const StoreSub *sub)
{
    for (unsigned i = 0; i < s->n; i++)
        if (same(&s->subs[i], sub)) {
            /* keep the others in their order */
            memmove(&s->subs[i], &s->subs[i + 1], (s->n - i - 1) * sizeof *s->subs);
            s->n--;
            return;
        }
}

void stream_publish(const StoreStream *s, const char *data, size_t len, uint64_t pos,
                    uint64_t lsn)
{
    if (!len)
        return;
    for (unsigned i = 0; i < s->n; i++)
        s->subs[i].write(s->subs[i].arg, data, len, pos, lsn);
}

void stream_reset(const StoreStream *s)
{
    for (unsigned i = 0; i < s->n; i++)
        if (s->subs[i].reset)
            s->subs[i].reset(s->subs[i].arg);
}
