/*
 * list.h — intrusive circular doubly-linked lists.
 *
 * Contract: a List is a sentinel node; an element embeds a List node and is
 * on at most one list through that node at a time. An unlinked node points
 * to itself, so list_linked() tells membership in O(1) and list_remove() of
 * an unlinked node is harmless. No allocation ever happens here, which is
 * why buried jobs, reserved jobs and waiting connections use it: moving a
 * job between these lists cannot fail.
 */
#ifndef TUBED_LIST_H
#define TUBED_LIST_H

#include <stddef.h>
#include <stdbool.h>

typedef struct List List;
struct List {
    List *prev, *next;
};

#define container_of(ptr, type, member) \
    ((type *)((char *)(ptr) - offsetof(type, member)))

static inline void list_init(List *l) { l->prev = l->next = l; }
static inline bool list_empty(const List *l) { return l->next == l; }
static inline bool list_linked(const List *n) { return n->next != n; }

static inline void list_insert_tail(List *l, List *n)
{
    n->prev = l->prev;
    n->next = l;
    l->prev->next = n;
    l->prev = n;
}

static inline void list_remove(List *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
}

/* Move every node of `from` to the tail of `to` at once; `from` ends empty. */
static inline void list_splice_tail(List *to, List *from)
{
    if (list_empty(from))
        return;
    from->next->prev = to->prev;
    to->prev->next = from->next;
    from->prev->next = to;
    to->prev = from->prev;
    list_init(from);
}

static inline List *list_first(const List *l)
{
    return list_empty(l) ? NULL : l->next;
}

#endif
