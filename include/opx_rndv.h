/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rndv.h - between the two files of the rendezvous: opx_rndv.c (the
 * protocol's steps, described there) calls opx_rndv_peer.c (slots,
 * control packets, peers, CMA) through what is declared here, and
 * opx_rndv_peer.c never calls opx_rndv.c.  What the rest of the provider
 * calls is declared in opx_ep.h.
 */
#ifndef OPX_RNDV_H
#define OPX_RNDV_H

#include "opx_ep.h"

/* A slot's cookie: its index, and its generation in the high 32 bits. */
static inline uint64_t opx_rndv_cookie(uint32_t gen, size_t idx)
{
	return ((uint64_t)gen << 32) | (uint64_t)idx;
}

/* RELEASE of a send slot: its completion (or error entry), a new generation. */
void opx_rndv_tx_release(struct opx_ep *ep, struct opx_rndv_tx *t, int err);
/* Take the free receive slot x for a message still due from its sender. */
void opx_rndv_rx_take(struct opx_ep *ep, struct opx_rndv_rx *x, struct opx_rx_req *req,
		      size_t off, size_t cap, const struct opx_ux *ux, size_t expect,
		      struct shim_peer *peer);
/* Free a receive slot: its TIDs released, a new generation. */
void opx_rndv_rx_free(struct opx_ep *ep, struct opx_rndv_rx *x);
/* A control packet to peer now, or queued on ep->ctl_pend without credits. */
void opx_rndv_ctl_send(struct opx_ep *ep, struct shim_peer *peer, uint8_t op,
		       const union opx_pw *w, const void *payload, uint32_t paylen);
/* DONE {cookie, status} to the sender of a rendezvous message. */
void opx_rndv_ctl_done(struct opx_ep *ep, struct shim_peer *peer, uint64_t cookie,
		       uint32_t status);
/* Send the queued control packets, in order, as far as credits allow. */
void opx_rndv_ctl_retry(struct opx_ep *ep);

#endif /* OPX_RNDV_H */
