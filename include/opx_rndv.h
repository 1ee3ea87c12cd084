/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rndv.h - between the two files of the rendezvous: opx_rndv.c (the
 * protocol's steps, described there) calls opx_rndv_peer.c (slots,
 * control packets, peers, CMA) through what is declared here, and
 * opx_rndv_peer.c never calls opx_rndv.c.  Both keep the slots below.
 * What the rest of the provider calls is declared in opx_rndv_api.h.
 */
#ifndef OPX_RNDV_H
#define OPX_RNDV_H

#include "opx_ep.h"
#include "opx_rndv_api.h"

#define OPX_RNDV_SLOTS 1024

/* Rendezvous send waiting for DONE (pull) or for its SDMA pushes (CTS). */
struct opx_rndv_tx {
	struct opx_list link; /* ep->rndv_st.sdma_wait while the engine's ring is full */
	void *context;
	uint64_t flags;
	size_t len;
	fi_addr_t dest;
	struct shim_peer *peer;
	size_t iov_count;
	struct iovec iov[OPX_IOV_LIMIT];
	uint64_t rx_cookie;
	uint32_t cts_ntid;  /* nonzero once a CTS arrived */
	uint32_t cts_next;  /* TID ranges handed to the engine */
	uint32_t sdma_left; /* engine requests not yet reaped */
	uint32_t tid[OPX_IOV_LIMIT];
	uint64_t tid_len[OPX_IOV_LIMIT];
	int err;
	uint32_t gen;
	uint8_t dones_left; /* DONEs before completion (2 when a CTW was refused) */
	bool ctw_seen;      /* one CTW per rendezvous */
	bool busy;
	struct opx_rndv_tx *next_free;
};

/* Rendezvous receive waiting for pushed data (CTS path). */
struct opx_rndv_rx {
	struct opx_rx_req *req;
	size_t off;
	size_t cap;
	size_t total;
	size_t expect;
	size_t placed;
	uint64_t tag;
	uint64_t data;
	fi_addr_t src;
	struct shim_peer *peer; /* the sender, watched while data is due */
	int err;                /* split CMA: first error of either half */
	uint64_t tx_cookie;     /* split: the sender's cookie (second DONE) */
	struct opx_rts_payload rts; /* split: the sender's iovec (fallback pull) */
	size_t half;            /* split: where the sender's part starts */
	uint32_t tid[OPX_IOV_LIMIT];
	uint32_t ntid;
	uint32_t gen;
	uint8_t pflags;
	bool busy;
	struct opx_rndv_rx *next_free;
};
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
/* A control packet to peer now, or queued on ep->rndv_st.ctl_pend without credits. */
void opx_rndv_ctl_send(struct opx_ep *ep, struct shim_peer *peer, uint8_t op,
		       const union opx_proto_pw *w, const void *payload, uint32_t paylen);
/* DONE {cookie, status} to the sender of a rendezvous message. */
void opx_rndv_ctl_done(struct opx_ep *ep, struct shim_peer *peer, uint64_t cookie,
		       uint32_t status);
/* Send the queued control packets, in order, as far as credits allow. */
void opx_rndv_ctl_retry(struct opx_ep *ep);

#endif /* OPX_RNDV_H */
