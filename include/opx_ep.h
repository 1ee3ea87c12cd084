/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_ep.h - the RDM endpoint: wire protocol, matching engine, protocols.
 *
 * Protocols by message size (chosen per send, thresholds fixed at init):
 *   len <= SHIM_INLINE_MAX      inject: payload inline in the header entry
 *   len <= mtu                  eager: one packet, payload in the eager ring
 *   len <= opx_env.eager_max    multi-packet eager: one PIO reservation of
 *                               n consecutive entries + contiguous eager
 *                               space, so the packets of a message are
 *                               never interleaved with another sender's
 *   larger                      rendezvous: RTS (tag, length, CQ data, the
 *                               sender's iovec) -> receiver matches and
 *                               pulls the data once with Cross Memory
 *                               Attach -> DONE back to the sender; from
 *                               opx_env.rndv_split the sender writes half
 *                               the copy; without CMA the SDMA engine
 *                               pushes into TID registrations (opx_rndv.c)
 * Every packet of a sender goes through one ordered queue at the
 * receiver, so messages between two endpoints match in send order
 * whatever their protocol.
 */
#ifndef OPX_EP_H
#define OPX_EP_H

#include "opx.h"

/* Provider opcodes (shim_pkt_hdr.opcode). */
enum opx_opcode {
	OPX_OP_EAGER = 1,   /* whole message in this packet */
	OPX_OP_MP_FIRST,    /* multi-packet eager, first: p.u64[0] = total length */
	OPX_OP_MP_NEXT,     /* multi-packet eager, next: p.u64[0] = offset */
	OPX_OP_RTS,         /* rendezvous: p.u64[0] = length, p.u64[1] = cookie */
	/* rendezvous control and data: handled in opx_rndv.c */
	OPX_OP_DONE,        /* receiver pulled: p.u64[0] = cookie, p.u32[2] = status */
	OPX_OP_CTS,         /* receiver wants a push: p.u64[0] = cookie, p.u64[1] = rx cookie */
	OPX_OP_DATA,        /* pushed data (SDMA, TID placed): tag = rx cookie */
	OPX_OP_CTW,         /* receiver asks the sender to write a part with CMA:
			       p.u64[0] = cookie, p.u64[1] = rx cookie */
	OPX_OP_WDONE,       /* sender wrote it: p.u64[0] = rx cookie, p.u32[2] = status */
	/* one-sided: handled in opx_rma.c, layout in opx_rma.h */
	OPX_OP_RMA_WRITE,
	OPX_OP_RMA_READ,
	OPX_OP_ATOMIC,
	OPX_OP_RMA_RESP,
	OPX_OP_MAX
};

/* shim_pkt_hdr.flags */
#define OPX_PF_TAGGED 0x01u
#define OPX_PF_CQDATA 0x02u
#define OPX_PF_MASK (OPX_PF_TAGGED | OPX_PF_CQDATA)

/* Rendezvous request payload (eager ring), what the receiver needs to pull. */
struct opx_rts_payload {
	struct shim_addr src; /* to reply DONE even if the sender is not in our AV */
	uint32_t pid;
	uint32_t iov_count;
	uint64_t iov_base[OPX_IOV_LIMIT];
	uint64_t iov_len[OPX_IOV_LIMIT];
};
static_assert(sizeof(struct opx_rts_payload) == 104, "rts payload layout");

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
	struct opx_rx_req *waiting; /* matched before the last packet arrived */
	size_t waiting_off;         /* offset in waiting's buffer (multi-recv) */
	size_t waiting_cap;         /* bytes that fit there */
	uint64_t cookie;            /* rendezvous */
	struct opx_rts_payload rts;
	uint8_t *buf;               /* eager payload (inl or heap) */
	uint8_t inl[64];
};

/* Rendezvous send waiting for DONE (pull) or for its SDMA pushes (CTS). */
struct opx_rndv_tx {
	struct opx_list link; /* ep->sdma_wait while the engine's ring is full */
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
	uint32_t tid[OPX_IOV_LIMIT];
	uint32_t ntid;
	uint32_t gen;
	uint8_t pflags;
	bool busy;
	struct opx_rndv_rx *next_free;
};

/* Multi-packet eager reassembly in progress (at most one: the packets of a
 * message are consecutive in the header queue). */
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

/* Anonymous peers: senders not in our AV we must answer (DONE). */
#define OPX_ANON_PEERS 16

#define OPX_RNDV_SLOTS 1024

struct opx_ep {
	struct fid_ep ep_fid;
	/* read-mostly after enable */
	struct opx_domain *domain;
	struct opx_av *av;
	struct opx_cq *tx_cq;
	struct opx_cq *rx_cq;
	struct opx_cntr *send_cntr;
	struct opx_cntr *recv_cntr;
	struct fid_eq *eq;
	uint64_t caps;
	uint64_t tx_op_flags;
	uint64_t rx_op_flags;
	bool tx_selective;
	bool rx_selective;
	bool enabled;
	uint16_t jkey;
	size_t min_multi_recv;
	struct shim_ctx *shim;
	struct shim_rx *rx;
	struct shim_addr addr;
	uint32_t pid;

	/* transmit */
	uint32_t next_msgid;
	struct opx_rndv_tx *rndv;
	struct opx_rndv_tx *rndv_free;
	size_t rndv_busy;
	struct opx_rndv_rx *rndv_rx;
	struct opx_rndv_rx *rndv_rx_free;
	size_t rndv_rx_busy;
	struct shim_sdma *sdma;  /* opened on the first CTS */
	size_t sdma_reqs;        /* submitted, not reaped */
	bool cma_ok;             /* pull with CMA; off: SDMA/TID push */
	bool cma_proven;         /* a pull succeeded: splitting with the sender is safe */
	struct opx_list ctl_pend;  /* control packets waiting for credits */
	struct opx_list sdma_wait; /* sends waiting for SDMA ring space */
	struct opx_list cts_defer; /* matched rendezvous waiting for TIDs */

	/* receive / matching */
	struct opx_list posted_tag;
	struct opx_list posted_msg;
	struct opx_list ux_tag;
	struct opx_list ux_msg;
	size_t ux_bytes;
	size_t posted_cnt;
	struct opx_mp_state mp;
	struct opx_list req_free;
	struct opx_list ux_free;
	uint32_t idle;
	uint16_t last_slid;
	uint16_t last_sctx;
	fi_addr_t last_src;
	const struct opx_av *last_av;
	struct shim_peer *anon[OPX_ANON_PEERS];
	size_t anon_next;

	/* one-sided (opx_rma.c) */
	struct opx_rma_state *rma;  /* NULL until the first RMA/atomic, either side */
	bool rma_busy;              /* chunks or replies wait for credits */
	struct opx_cntr *write_cntr; /* FI_WRITE: RMA writes, non-fetching atomics */
	struct opx_cntr *read_cntr;  /* FI_READ: RMA reads, fetching atomics */
	struct opx_cntr *rwrite_cntr; /* FI_REMOTE_WRITE (FI_RMA_EVENT): target side */
	struct opx_cntr *rread_cntr;  /* FI_REMOTE_READ (FI_RMA_EVENT): target side */

	/* stats */
	uint64_t rx_dropped;
	bool armed;
};

/* opx_match.c: matching engine and delivery.  All with the domain lock held. */
struct opx_rx_req *opx_req_get(struct opx_ep *ep);
void opx_req_put(struct opx_ep *ep, struct opx_rx_req *req);
struct opx_ux *opx_ux_get(struct opx_ep *ep, size_t len);
void opx_ux_put(struct opx_ep *ep, struct opx_ux *ux);
struct opx_rx_req *opx_match_posted(struct opx_ep *ep, bool tagged, uint64_t tag, fi_addr_t src);
size_t opx_iov_copy_to(const struct iovec *iov, size_t cnt, size_t off, const void *src, size_t len);
size_t opx_iov_slice(const struct iovec *iov, size_t cnt, size_t off, size_t len,
		     struct iovec *out);
/* Where a message of len bytes lands in req: returns the offset, sets *cap
 * to the bytes that fit (multi-recv buffers hand out consecutive space). */
size_t opx_req_claim(struct opx_ep *ep, struct opx_rx_req *req, size_t len, size_t *cap);
/* Completion of a message delivered into req at off (cap bytes fit). */
void opx_rx_complete(struct opx_ep *ep, struct opx_rx_req *req, size_t off, size_t cap,
		     size_t msg_len, uint64_t tag, uint64_t data, uint8_t pflags, fi_addr_t src,
		     int err);
/* An unexpected message whose last packet has arrived or that is matched. */
void opx_ux_deliver(struct opx_ep *ep, struct opx_rx_req *req, struct opx_ux *ux);
ssize_t opx_ep_recv_locked(struct opx_ep *ep, const struct iovec *iov, size_t cnt, fi_addr_t src,
			   uint64_t tag, uint64_t ignore, void *context, uint64_t flags,
			   bool tagged);
int opx_ep_cancel_locked(struct opx_ep *ep, void *context);
void opx_match_cleanup(struct opx_ep *ep);

/* opx_rx.c: progress */
void opx_rx_drop(struct opx_ep *ep, const char *why);

/* opx_msg.c: transmit core */
ssize_t opx_ep_send_locked(struct opx_ep *ep, const struct iovec *iov, size_t cnt, fi_addr_t dest,
			   uint64_t tag, uint64_t data, void *context, uint64_t flags,
			   bool tagged);
void opx_ep_tx_report(struct opx_ep *ep, void *context, uint64_t flags, size_t len, int err);

/* opx_rndv.c: rendezvous, both sides */
int opx_rndv_init(struct opx_ep *ep);
void opx_rndv_fini(struct opx_ep *ep);
int opx_rndv_send(struct opx_ep *ep, struct shim_peer *peer, const struct iovec *iov, size_t cnt,
		  size_t len, uint64_t tag, uint64_t data, uint8_t pflags, void *context,
		  uint64_t flags, fi_addr_t dest);
int opx_rndv_match(struct opx_ep *ep, struct opx_rx_req *req, size_t off, size_t cap,
		   struct opx_ux *ux);
void opx_rndv_discard(struct opx_ep *ep, struct opx_ux *ux);
int opx_rndv_rx_packet(struct opx_ep *ep, const struct shim_rhq_entry *e, const uint8_t *pay);
void opx_rndv_progress(struct opx_ep *ep);
void opx_rndv_check_peers(struct opx_ep *ep);

static inline bool opx_rndv_pending(const struct opx_ep *ep)
{
	return ep->sdma_reqs || !opx_list_empty(&ep->ctl_pend) ||
	       !opx_list_empty(&ep->sdma_wait) || !opx_list_empty(&ep->cts_defer);
}

/* Header of a packet this endpoint sends to peer. */
static inline void opx_hdr_init(struct shim_pkt_hdr *h, const struct opx_ep *ep,
				const struct shim_peer *peer, uint8_t op, uint8_t pflags,
				uint32_t paylen, uint32_t msgid, uint64_t tag, uint64_t data)
{
	h->opcode = op;
	h->flags = pflags;
	h->jkey = ep->jkey;
	h->slid = ep->addr.lid;
	h->sctx = ep->addr.ctx;
	h->dlid = peer->lid;
	h->dctx = peer->ctx;
	h->paylen = paylen;
	h->psn = 0;
	h->msgid = msgid;
	h->tag = tag;
	h->data = data;
}

static inline struct opx_ep *opx_ep_of(struct fid_ep *f)
{
	return OPX_CONTAINER_OF(f, struct opx_ep, ep_fid);
}

static inline fi_addr_t opx_ep_src(struct opx_ep *ep, uint16_t slid, uint16_t sctx)
{
	if (slid != ep->last_slid || sctx != ep->last_sctx || ep->last_src == FI_ADDR_NOTAVAIL) {
		ep->last_slid = slid;
		ep->last_sctx = sctx;
		ep->last_src = opx_av_src_locked(ep->av, slid, sctx);
	}
	return ep->last_src;
}

extern struct fi_ops_msg opx_ops_msg;
extern struct fi_ops_tagged opx_ops_tagged;

#endif /* OPX_EP_H */
