/* SPDX-License-Identifier: BSD-2-Clause */
/* opx_list.h - a small intrusive doubly linked list. */
#ifndef OPX_LIST_H
#define OPX_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct opx_list {
	struct opx_list *next;
	struct opx_list *prev;
};

#define OPX_CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

static inline void opx_list_init(struct opx_list *h)
{
	h->next = h->prev = h;
}

static inline bool opx_list_empty(const struct opx_list *h)
{
	return h->next == h;
}

static inline void opx_list_insert_tail(struct opx_list *h, struct opx_list *n)
{
	n->next = h;
	n->prev = h->prev;
	h->prev->next = n;
	h->prev = n;
}

static inline void opx_list_insert_head(struct opx_list *h, struct opx_list *n)
{
	n->prev = h;
	n->next = h->next;
	h->next->prev = n;
	h->next = n;
}

static inline void opx_list_remove(struct opx_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}

#define opx_list_foreach(h, it) for ((it) = (h)->next; (it) != (h); (it) = (it)->next)
#define opx_list_foreach_safe(h, it, tmp)                                                          \
	for ((it) = (h)->next, (tmp) = (it)->next; (it) != (h); (it) = (tmp), (tmp) = (it)->next)

#endif /* OPX_LIST_H */
