#include "store.h"

#include "core.h"

int store_subscribe(Engine *e, const StoreSub *sub)
{
    return stream_subscribe(&e->binlog.stream, sub);
}

void store_unsubscribe(Engine *e, const StoreSub *sub)
{
    stream_unsubscribe(&e->binlog.stream, sub);
}
