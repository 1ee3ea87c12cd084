/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_ux.h - the unexpected-message store and its bounds (opx_ux.c):
 * the per-sender byte counts, taking a descriptor and putting it back,
 * and queueing a message that arrived before its receive (counted in the
 * endpoint's telemetry).  struct opx_ux itself is in opx_match.h.  All with
 * the domain lock held.
 */
#ifndef OPX_UX_H
#define OPX_UX_H

#include <stdlib.h>

#include "opx_ep.h"

/* Unexpected bytes of one sender (opx_ux.c): open addressing by
 * slid << 16 | sctx; senders beyond OPX_UX_SRC_SLOTS share one count. */
#define OPX_UX_SRC_SLOTS 256u
#define OPX_UX_SRC_NONE 0u   /* not counted per sender (no memory for the table) */
#define OPX_UX_SRC_OWN 1u    /* in the sender's slot */
#define OPX_UX_SRC_SHARED 2u /* in the slot the senders beyond the table share */
struct opx_ux_src {
	uint32_t key;
	bool used;
	size_t bytes;
};

/* opx_ux.c: the unexpected-message store and its bounds.  Lock held.
 * A descriptor for an unexpected message of sender (slid, sctx) holding
 * len payload bytes; NULL when the sender is over its share of the bound
 * (opx_ux_src_over, with the ring's slack): the packet stays queued. */
struct opx_ux *opx_ux_get(struct opx_ep *ep, uint16_t slid, uint16_t sctx, size_t len);
void opx_ux_src_refund(struct opx_ep *ep, const struct opx_ux *ux);
/* Whether sender (slid, sctx) may not add unexpected bytes now: it holds
 * FI_OPX_UX_PEER_MAX_BYTES, or the endpoint holds FI_OPX_UX_MAX_BYTES +
 * slack and the sender at least its fair share of that (the bound over
 * the senders holding any).  A sender with less never waits for the
 * others: one sender cannot block the rest. */
bool opx_ux_src_over(struct opx_ep *ep, uint16_t slid, uint16_t sctx, size_t slack);
void opx_ux_src_fini(struct opx_ep *ep);
/* An unexpected-message descriptor back to the pool, its bytes off the bound. */
static inline void opx_ux_put(struct opx_ep *ep, struct opx_ux *ux)
{
	opx_ux_src_refund(ep, ux);
	ep->match.ux_bytes -= ux->cost;
	if (ux->queued)
		ep->tel.ux_cnt--;
	if (ux->buf != ux->inl)
		free(ux->buf);
	ux->buf = NULL;
	opx_list_insert_head(&ep->match.ux_free, &ux->link);
}
/* A message arrived before its receive: queue it, and count it. */
static inline void opx_ux_queue(struct opx_ep *ep, bool tagged, struct opx_ux *ux)
{
	opx_list_insert_tail(tagged ? &ep->match.ux_tag : &ep->match.ux_msg, &ux->link);
	ux->queued = true;
	ep->tel.stats.ux_msgs++;
	if (++ep->tel.ux_cnt > ep->tel.stats.ux_peak)
		ep->tel.stats.ux_peak = ep->tel.ux_cnt;
	if (ep->match.ux_bytes > ep->tel.stats.ux_bytes_peak)
		ep->tel.stats.ux_bytes_peak = ep->match.ux_bytes;
}

#endif /* OPX_UX_H */
