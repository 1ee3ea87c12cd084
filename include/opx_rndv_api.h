/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rndv_api.h - the rendezvous as the rest of the provider calls it:
 * the protocol's entry points (opx_rndv.c) and the peers, CMA copies and
 * delivery-complete slots it shares with one-sided communication and
 * eager sends (opx_rndv_peer.c).  What the two rendezvous files share
 * only between themselves is in opx_rndv.h.
 */
#ifndef OPX_RNDV_API_H
#define OPX_RNDV_API_H

#include "opx_ep.h"

/* opx_rndv.c, opx_rndv_peer.c: rendezvous, both sides (opx_rndv.h: between them) */
int opx_rndv_init(struct opx_ep *ep);
void opx_rndv_fini(struct opx_ep *ep);
int opx_rndv_send(struct opx_ep *ep, struct shim_peer *peer, const struct iovec *iov, size_t cnt,
		  size_t len, uint64_t tag, uint64_t data, uint8_t pflags, void *context,
		  uint64_t flags, fi_addr_t dest);
int opx_rndv_match(struct opx_ep *ep, struct opx_rx_req *req, size_t off, size_t cap,
		   struct opx_ux *ux);
void opx_rndv_discard(struct opx_ep *ep, struct opx_ux *ux);
struct shim_peer *opx_rndv_reply_peer(struct opx_ep *ep, const struct shim_addr *to, fi_addr_t src);
struct shim_peer *opx_rndv_src_peer(struct opx_ep *ep, uint16_t slid, uint16_t sctx, uint32_t nonce,
				    fi_addr_t src);
/* The rendezvous packets' receive handlers (opx_rx_ops[] dispatches to
 * them): DONE, CTS, DATA (TID-placed), CTW, WDONE. */
int opx_rndv_rx_done(struct opx_ep *ep, const struct shim_rhq_entry *e, const uint8_t *pay);
int opx_rndv_rx_cts(struct opx_ep *ep, const struct shim_rhq_entry *e, const uint8_t *pay);
int opx_rndv_rx_data(struct opx_ep *ep, const struct shim_rhq_entry *e, const uint8_t *pay);
int opx_rndv_rx_ctw(struct opx_ep *ep, const struct shim_rhq_entry *e, const uint8_t *pay);
int opx_rndv_rx_wdone(struct opx_ep *ep, const struct shim_rhq_entry *e, const uint8_t *pay);
void opx_rndv_progress(struct opx_ep *ep);
void opx_rndv_check_peers(struct opx_ep *ep);
/* An RTS payload the receiver may act on: its source is the packet's
 * source and its iovec adds up to the message length. */
bool opx_rndv_rts_ok(const struct shim_pkt_hdr *h, const struct opx_rts_payload *rts);
/* One Cross Memory Attach copy of len bytes between our liov and riov in
 * the process that owns peer (the one the shim verified when it mapped
 * it, never a pid from a packet); write: ours into theirs.  Returns the
 * bytes copied, -ESRCH when no verified process is there, or -errno
 * (-EPERM, -ENOSYS: CMA not permitted).  The iovecs may be advanced. */
ssize_t opx_rndv_cma_peer(struct shim_peer *peer, struct iovec *liov, size_t lcnt,
			  struct iovec *riov, size_t rcnt, size_t len, bool write);
/* FI_DELIVERY_COMPLETE eager sends (opx_msg.c) use a rendezvous send slot
 * that the receiver's DONE completes: get one (-EAGAIN when none is
 * free), put it back unused (no completion), and, on the receiving side,
 * answer a sender with DONE(cookie). */
int opx_rndv_dc_get(struct opx_ep *ep, struct shim_peer *peer, void *context, uint64_t flags,
		    size_t len, fi_addr_t dest, uint64_t *cookie);
void opx_rndv_dc_put(struct opx_ep *ep, uint64_t cookie);
void opx_rndv_ack(struct opx_ep *ep, const struct shim_addr *to, fi_addr_t src, uint64_t cookie);

static inline bool opx_rndv_pending(const struct opx_ep *ep)
{
	return ep->rndv_st.sdma_reqs || !opx_list_empty(&ep->rndv_st.ctl_pend) ||
	       !opx_list_empty(&ep->rndv_st.sdma_wait) || !opx_list_empty(&ep->rndv_st.cts_defer);
}

#endif /* OPX_RNDV_API_H */
