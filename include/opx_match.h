/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_match.h - the matching engine (opx_match.c): a posted receive, an
 * unexpected message, the multi-packet eager reassembly in progress, and
 * matching and delivery.  The endpoint's queues of them are in struct
 * opx_ep (opx_ep.h).
 */
#ifndef OPX_MATCH_H
#define OPX_MATCH_H

#include "opx.h"
#include "opx_proto.h"

struct opx_ep;

/* A posted receive. */
struct opx_rx_req {
	struct opx_list link;
	void *context;
	uint64_t flags;   /* op flags: FI_MULTI_RECV, FI_COMPLETION, FI_TAGGED/FI_MSG */
	uint64_t tag;
	uint64_t ignore;
	fi_addr_t src;
	size_t len;       /* capacity */
	size_t used;      /* multi-recv: bytes consumed */
	int inflight;     /* multi-recv: messages still landing in it */
	bool unlinked;    /* multi-recv: released from the posted queue */
	size_t iov_count;
	struct iovec iov[OPX_IOV_LIMIT];
};

/* An unexpected message. */
struct opx_ux {
	struct opx_list link;
	uint64_t tag;
	uint64_t data;
	fi_addr_t src;
	size_t len;       /* message length */
	size_t rcvd;      /* multi-packet: bytes arrived */
	uint8_t pflags;   /* OPX_PF_* */
	bool rndv;
	bool discard;               /* FI_DISCARD while packets still arrive */
	bool queued;                /* on an unexpected queue (telemetry: queue depth) */
	bool ack;                   /* delivery complete: DONE(cookie) to rts.src once placed */
	struct opx_rx_req *waiting; /* matched before the last packet arrived */
	size_t waiting_off;         /* offset in waiting's buffer (multi-recv) */
	size_t waiting_cap;         /* bytes that fit there */
	uint64_t cookie;            /* rendezvous */
	struct opx_rts_payload rts;
	uint8_t *buf;               /* eager payload (inl or heap) */
	size_t cost;                /* bytes counted against the bounds (opx_ux_get) */
	uint32_t src_key;           /* the sender's slid << 16 | sctx (per-source count) */
	uint8_t src_count;          /* where cost was counted: OPX_UX_SRC_* */
	uint8_t inl[64];
};

/* Multi-packet eager reassembly in progress (at most one: the packets of a
 * message are consecutive in the header queue). */
/* Packets of one multi-packet eager message over the udp wire at most:
 * the receiver's reliability module holds them in its reorder stash until
 * the message is whole and delivers it in one reservation (opx_rel.c), so
 * that no other flow's packet comes between them; senders stay below it
 * (opx_msg.c).  Part of the wire protocol: lowering it breaks peers. */
#define OPX_UDP_MP_MAX 64u

struct opx_mp_state {
	bool active;
	uint16_t slid;
	uint16_t sctx;
	uint32_t msgid;
	size_t total;
	size_t off;               /* next expected offset */
	struct opx_rx_req *req;   /* delivering into a posted receive ... */
	size_t req_off;           /* ... at this offset of it (multi-recv) */
	size_t req_cap;           /* ... where this many bytes fit */
	struct opx_ux *ux;        /* ... or into an unexpected buffer */
	uint64_t tag;
	uint64_t data;
	uint8_t pflags;
	fi_addr_t src;
};

/* opx_match.c: matching engine and delivery.  All with the domain lock held. */
struct opx_rx_req *opx_match_req_get(struct opx_ep *ep);
struct opx_rx_req *opx_match_posted(struct opx_ep *ep, bool tagged, uint64_t tag, fi_addr_t src);
/* Where a message of len bytes lands in req: returns the offset, sets *cap
 * to the bytes that fit (multi-recv buffers hand out consecutive space). */
size_t opx_match_req_claim(struct opx_ep *ep, struct opx_rx_req *req, size_t len, size_t *cap);
/* An unexpected message whose last packet has arrived or that is matched. */
void opx_match_ux_deliver(struct opx_ep *ep, struct opx_rx_req *req, struct opx_ux *ux);
ssize_t opx_match_recv_locked(struct opx_ep *ep, const struct iovec *iov, size_t cnt, fi_addr_t src,
			      uint64_t tag, uint64_t ignore, void *context, uint64_t flags,
			      bool tagged);
int opx_match_cancel_locked(struct opx_ep *ep, void *context);
void opx_match_cleanup(struct opx_ep *ep);

#endif /* OPX_MATCH_H */
