/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_ux.c - the unexpected-message store: descriptors for messages that
 * arrived before their receive was posted (from a free list, so the
 * steady state does not allocate), the endpoint's bound on their bytes
 * (FI_OPX_UX_MAX_BYTES) and its fair share per sender.  Used by receive
 * dispatch (opx_rx.c) to take a message, by matching and rendezvous to
 * give it back (opx_ux_put in opx_ux.h), and by the reliability module
 * (opx_rel.c) to hold a sender over its share before its packets reach
 * the receive ring.  Calls nothing else in the provider.
 */
#include <stdlib.h>
#include <string.h>

#include "opx_ep.h"
#include "opx_ux.h"

/* ---------------------------------------------------------------------
 * Unexpected bytes per sender.
 *
 * The bound on unexpected bytes (FI_OPX_UX_MAX_BYTES) is the endpoint's,
 * but a first packet that cannot be taken stays at the head of the
 * receive ring, and everything behind it waits: one sender flooding
 * unexpected messages would block every other sender, including the one
 * whose message the application waits for.  So the bound is shared out:
 * once the endpoint holds its bound, a sender holding at least its fair
 * share (the bound over the senders holding any) is refused, and one
 * holding less is not.  On the udp wire the refusal happens before the
 * receive ring (opx_rel.c holds the sender's flow: back-pressure, its
 * sends see -FI_EAGAIN while its acks say HELD), so what is in the ring
 * can always be taken (the drain allows ep->match.ux_slack over the bound) and
 * the ring keeps moving for everyone else.  A shm sender (same user, same
 * host) is refused at the ring's head as before.
 */
static uint32_t opx_ux_src_hash(uint32_t key)
{
	return (key * 0x9e3779b1u) >> 24; /* OPX_UX_SRC_SLOTS = 256 */
}

/* The sender's slot (added when add); with add, the shared slot when the
 * table is full; NULL when it has none (or no memory). */
static struct opx_ux_src *opx_ux_src_find(struct opx_ep *ep, uint32_t key, bool add)
{
	struct opx_ux_src *t = ep->match.ux_src;
	uint32_t i = opx_ux_src_hash(key);

	if (!t) {
		if (!add)
			return NULL;
		t = calloc(OPX_UX_SRC_SLOTS + 1, sizeof(*t));
		if (!t)
			return NULL;
		ep->match.ux_src = t;
	}
	for (uint32_t n = 0; n < OPX_UX_SRC_SLOTS; n++, i = (i + 1) & (OPX_UX_SRC_SLOTS - 1)) {
		if (t[i].used && t[i].key == key)
			return &t[i];
		if (!t[i].used) {
			if (!add)
				return NULL;
			t[i].used = true;
			t[i].key = key;
			t[i].bytes = 0;
			return &t[i];
		}
	}
	/* table full: the rest share the last slot */
	return add ? &t[OPX_UX_SRC_SLOTS] : NULL;
}

/* Remove slot i (linear probing: later members of its cluster move up). */
static void opx_ux_src_remove(struct opx_ux_src *t, uint32_t i)
{
	uint32_t j = i;

	t[i].used = false;
	for (;;) {
		uint32_t h;

		j = (j + 1) & (OPX_UX_SRC_SLOTS - 1);
		if (!t[j].used)
			return;
		h = opx_ux_src_hash(t[j].key);
		/* t[j] may fill the hole when its home is not in (i, j] */
		if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
			t[i] = t[j];
			t[j].used = false;
			i = j;
		}
	}
}

static void opx_ux_src_charge(struct opx_ep *ep, struct opx_ux *ux)
{
	struct opx_ux_src *s = opx_ux_src_find(ep, ux->src_key, true);

	ux->src_count = OPX_UX_SRC_NONE;
	if (!s)
		return; /* no memory for the table: the endpoint bound still holds */
	ux->src_count = s == &ep->match.ux_src[OPX_UX_SRC_SLOTS] ? OPX_UX_SRC_SHARED : OPX_UX_SRC_OWN;
	if (!s->bytes) {
		ep->match.ux_srcs++;
		s->used = true;
	}
	s->bytes += ux->cost;
}

void opx_ux_src_refund(struct opx_ep *ep, const struct opx_ux *ux)
{
	struct opx_ux_src *s;

	if (ux->src_count == OPX_UX_SRC_NONE)
		return;
	s = ux->src_count == OPX_UX_SRC_SHARED ? &ep->match.ux_src[OPX_UX_SRC_SLOTS]
					       : opx_ux_src_find(ep, ux->src_key, false);
	if (!s || !s->bytes)
		return;
	s->bytes -= ux->cost < s->bytes ? ux->cost : s->bytes;
	if (s->bytes)
		return;
	ep->match.ux_srcs--;
	if (s == &ep->match.ux_src[OPX_UX_SRC_SLOTS])
		s->used = false;
	else
		opx_ux_src_remove(ep->match.ux_src, (uint32_t)(s - ep->match.ux_src));
}

bool opx_ux_src_over(struct opx_ep *ep, uint16_t slid, uint16_t sctx, size_t slack)
{
	size_t total = ep->match.ux_bytes, bound = opx_env.ux_max_bytes, cap = opx_env.ux_peer_max_bytes;
	const struct opx_ux_src *s;
	size_t mine;

	/* x over limit by slack, without overflow */
#define OPX_UX_PAST(x, limit) ((x) >= (limit) && (x) - (limit) >= slack)
	if (!OPX_UX_PAST(total, cap) && !OPX_UX_PAST(total, bound))
		return false; /* the common case: far from either bound */
	s = opx_ux_src_find(ep, (uint32_t)slid << 16 | sctx, false);
	mine = s ? s->bytes : 0;
	if (OPX_UX_PAST(mine, cap))
		return true;
	if (!OPX_UX_PAST(total, bound))
		return false;
#undef OPX_UX_PAST
	return ep->match.ux_srcs && mine >= bound / ep->match.ux_srcs;
}

void opx_ux_src_fini(struct opx_ep *ep)
{
	free(ep->match.ux_src);
	ep->match.ux_src = NULL;
	ep->match.ux_srcs = 0;
}

/* len: payload bytes the descriptor will hold (counted against the bound) */
struct opx_ux *opx_ux_get(struct opx_ep *ep, uint16_t slid, uint16_t sctx, size_t len)
{
	struct opx_ux *ux;
	size_t cost = sizeof(*ux) + (len > sizeof(ux->inl) ? len : 0);

	if (ep->match.ux_bytes && opx_ux_src_over(ep, slid, sctx, ep->match.ux_slack))
		return NULL; /* over its share: the caller leaves the packet queued */
	if (!opx_list_empty(&ep->match.ux_free)) {
		struct opx_list *n = ep->match.ux_free.next;
		opx_list_remove(n);
		ux = OPX_CONTAINER_OF(n, struct opx_ux, link);
	} else {
		ux = malloc(sizeof(*ux));
		if (!ux)
			return NULL;
	}
	memset(ux, 0, offsetof(struct opx_ux, rts));
	ux->buf = ux->inl;
	if (len > sizeof(ux->inl)) {
		ux->buf = malloc(len);
		if (!ux->buf) {
			opx_list_insert_head(&ep->match.ux_free, &ux->link);
			return NULL;
		}
	}
	ux->len = len;
	ux->cost = cost;
	ux->src_key = (uint32_t)slid << 16 | sctx;
	opx_list_init(&ux->link);
	ep->match.ux_bytes += cost;
	opx_ux_src_charge(ep, ux);
	return ux;
}
