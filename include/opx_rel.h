/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rel.h - the udp wire's reliability module as the rest of the
 * provider calls it (opx_rel.c); what its two files share only between
 * themselves is in opx_rel_priv.h.
 */
#ifndef OPX_REL_H
#define OPX_REL_H

#include "opx_ep.h"

/* opx_rel.c: reliability over the udp wire (lock held).  Without any udp
 * flow the socket is polled once every OPX_REL_IDLE_POLL_MASK + 1
 * progress calls (a first contact waits that long); with flows, always. */
#define OPX_REL_IDLE_POLL_MASK 4095u
void opx_rel_progress(struct opx_ep *ep);
/* Keepalive period: at most a quarter of FI_OPX_PEER_TIMEOUT, so that a
 * live peer that does not progress is heard a few times within it. */
uint64_t opx_rel_keepalive_ns(void);
void opx_rel_linger(struct opx_ep *ep); /* close: until sent packets are acknowledged */
/* The peer waits for our ack of what it sent (a rendezvous push from it
 * just completed here: its send completes on that ack, shim_sdma.c's
 * zero copy): ack at the next timer tick, not when a reply would carry
 * it.  Not a udp peer, or no flow: nothing. */
void opx_rel_ack_soon(struct shim_peer *peer);
void opx_rel_fini(struct opx_ep *ep);

#endif /* OPX_REL_H */
