/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_ep.h - the RDM endpoint: wire protocol, its state, protocols; the
 * matching engine's types and calls are in opx_match.h.
 *
 * Protocols by message size (chosen per send, thresholds fixed at init,
 * one set per wire: the peer's wire is known at send time, peer->wire):
 *   len <= SHIM_INLINE_MAX      inject: payload inline in the header entry
 *   len <= mtu                  eager: one packet, payload in the eager ring
 *   len <= eager limit          multi-packet eager: one PIO reservation of
 *                               n consecutive entries + contiguous eager
 *                               space, so the packets of a message are
 *                               never interleaved with another sender's.
 *                               The limit is opx_env.eager_max to a shm
 *                               peer, opx_env.udp_eager_max (and at most
 *                               OPX_UDP_MP_MAX datagrams) to a udp peer,
 *                               lowered to what the receiver advertises
 *                               (opx_msg.c, opx_msg_eager_max)
 *   larger                      rendezvous: RTS (tag, length, CQ data, the
 *                               sender's iovec) -> receiver matches and
 *                               pulls the data once with Cross Memory
 *                               Attach -> DONE back to the sender; from
 *                               opx_env.rndv_split the sender writes half
 *                               the copy; without CMA (and always on the
 *                               udp wire) the SDMA engine pushes into TID
 *                               registrations (opx_rndv.c)
 * Every packet of a sender goes through one ordered queue at the
 * receiver, so messages between two endpoints match in send order
 * whatever their protocol.
 */
#ifndef OPX_EP_H
#define OPX_EP_H

#include <stdlib.h>

#include "opx.h"
#include "opx_av.h"
#include "opx_iov.h"
#include "opx_match.h"
#include "opx_proto.h"
#include "opx_tel.h"
#include "rdma/opx_ext.h"

/* Internal transmit flag (a bit no fi_* op flag uses): set only by the
 * fi_inject family, which never generates a send completion.  FI_INJECT
 * itself only means "the buffer may be reused at once" (fi_msg(3)), so
 * fi_sendmsg(FI_INJECT) and FI_INJECT in tx op_flags still complete. */
#define OPX_TX_NO_CQ (1ULL << 62)

/* Internal op flag: an inject the peer cannot take eagerly went out by
 * rendezvous from a private copy, a struct opx_bounce that stands in as
 * the context; it is freed when the send completes, which reports the
 * caller's own context (fi_sendmsg with FI_INJECT still completes). */
#define OPX_TXF_BOUNCE (1ULL << 42)

struct opx_bounce {
	void *context;
	uint8_t data[];
};

/* The role of an endpoint inside a scalable endpoint (opx_ep.sep_role). */
#define OPX_SEP_TX 1
#define OPX_SEP_RX 2

/* Anonymous peers: senders not in our AV we must answer (DONE). */
#define OPX_ANON_PEERS 128

/* The rendezvous' state of an endpoint (opx_rndv.c, opx_rndv_peer.c);
 * its active sends, struct opx_ep.rndv, stay beside the transmit basics. */
struct opx_ep_rndv {
	struct opx_rndv_tx *rndv_free;
	size_t rndv_busy;
	struct opx_rndv_rx *rndv_rx;
	struct opx_rndv_rx *rndv_rx_free;
	size_t rndv_rx_busy;
	uint32_t rndv_gens[64];  /* random cookie generations (getrandom) ... */
	uint32_t rndv_gen_left;  /* ... not used yet */
	uint64_t rndv_stray;     /* DONE/CTS/CTW/WDONE/DATA from the wrong peer or cookie */
	uint64_t watch_next_ns;  /* next look for dead peers (opx_rndv_check_peers) */
	uint32_t watch_round;    /* its number (never 0) */
	struct shim_sdma *sdma;  /* opened on the first CTS */
	size_t sdma_reqs;        /* submitted, not reaped */
	bool cma_ok;             /* pull with CMA; off: SDMA/TID push */
	bool cma_proven;         /* a pull succeeded: splitting with the sender is safe */
	struct opx_list ctl_pend;  /* control packets waiting for credits */
	struct opx_list sdma_wait; /* sends waiting for SDMA ring space */
	struct opx_list cts_defer; /* matched rendezvous waiting for TIDs */
};

/* The transmit core's counters (opx_msg.c; also opx_rndv.c, opx_rx.c). */
struct opx_ep_msg {
	uint32_t next_msgid;
	uint32_t tx_streak; /* eager sends since a packet arrived: > 1 streams */
};

/* The receive path's state (opx_rx.c, opx_progress.c; last_*: opx_ep_src). */
struct opx_ep_rx {
	/* opx_rx_defer: drains in a row that left an unmatched first packet
	 * in the ring, and whether the coming drain may not (a peek's) */
	uint32_t rx_defers;
	bool rx_no_defer;
	bool rx_csum;            /* FI_OPX_CHECKSUM: eager packets must be sealed */
	uint32_t idle;           /* empty progress calls in a row (opx_progress.c) */
	uint32_t spun;           /* their cost towards a yield, in ring looks (same) */
	uint16_t last_slid;
	uint16_t last_sctx;
	fi_addr_t last_src;
};

/* What the receive side accepts, set at enable (opx_rx.c, opx_rx_advertise). */
struct opx_ep_rx_limits {
	uint32_t rx_eager_max;        /* largest eager message we accept (advertised) */
	uint32_t rx_eager_max_udp;    /* the same from udp peers (in every datagram) */
	uint32_t rx_mp_max;           /* the larger: a multi-packet message above it is dropped */
};

/* Peers opened by the endpoint itself (opx_rndv_peer.c, opx_av_peer.c). */
struct opx_ep_peers {
	struct shim_peer *anon[OPX_ANON_PEERS]; /* opx_rndv_reply_peer's cache */
	/* udp peers of the AV opened through this endpoint's own socket when
	 * the AV's are another endpoint's (opx_ep_peer_locked), by fi_addr */
	struct shim_peer **upeers;
	size_t upeers_n;
	struct shim_peer **usub;      /* the same for av->sub (fi_rx_addr) */
	size_t usub_n;
};

/* The matching engine's queues (opx_match.c) and the unexpected store's
 * bounds (ux_bytes, ux_src, ux_srcs, ux_slack: opx_ux.c). */
struct opx_ep_match {
	struct opx_list posted_tag;
	struct opx_list posted_msg;
	struct opx_list ux_tag;
	struct opx_list ux_msg;
	size_t ux_bytes;
	/* per sender (opx_ux_src_over): NULL until the first unexpected
	 * message; slot OPX_UX_SRC_SLOTS counts the senders beyond the table */
	struct opx_ux_src *ux_src;
	uint32_t ux_srcs;             /* senders with unexpected bytes now */
	size_t ux_slack;              /* what the receive ring can hold (opx_rx_advertise) */
	size_t posted_cnt;
	struct opx_mp_state mp;
	struct opx_list req_free;
	struct opx_list ux_free;
};

/* One-sided communication's per-endpoint state (opx_rma.c); its engine,
 * struct opx_ep.rma, stays beside it. */
struct opx_ep_rma {
	bool rma_busy;              /* chunks or replies wait for credits */
	bool rgn_pub;               /* in domain->rgn_eps: publishes regions (opx_mr.c) */
	struct opx_list rgn_link;
	struct opx_cntr *write_cntr; /* FI_WRITE: RMA writes, non-fetching atomics */
	struct opx_cntr *read_cntr;  /* FI_READ: RMA reads, fetching atomics */
	struct opx_cntr *rwrite_cntr; /* FI_REMOTE_WRITE (FI_RMA_EVENT): target side */
	struct opx_cntr *rread_cntr;  /* FI_REMOTE_READ (FI_RMA_EVENT): target side */
};

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
	size_t msg_prefix;            /* FI_MSG_PREFIX: bytes before the data of every
				       * send and receive buffer, else 0 */
	bool source_err;    /* FI_SOURCE_ERR: unknown sources as error completions */
	bool enabled;
	uint16_t jkey;
	size_t min_multi_recv;
	struct shim_ctx *shim;
	struct shim_rx *rx;
	struct shim_addr addr;
	uint16_t svc_port;  /* service claimed in the shim registry (host order), 0: none */
	uint8_t svc_sep;    /* the sep byte of the name claimed (a scalable endpoint's) */
	uint32_t pid;

	/* transmit */
	struct opx_ep_msg msg_st;
	struct opx_rndv_tx *rndv;
	struct opx_ep_rndv rndv_st;

	/* receive / matching */
	struct opx_ep_match match;
	struct opx_ep_rx rx_st;
	struct opx_ep_peers peers;
	/* a context of a scalable endpoint (opx_sep.c), else NULL */
	struct opx_sep *sep;
	uint8_t sep_role;             /* OPX_SEP_TX or OPX_SEP_RX, with sep */

	/* one-sided (opx_rma.c) */
	struct opx_rma_state *rma;  /* NULL until the first RMA/atomic, either side */
	struct opx_ep_rma rma_st;

	/* telemetry (<rdma/opx_ext.h>, opx_tel.h): plain adds, no atomics */
	struct opx_ep_telemetry tel;

	struct opx_ep_rx_limits rx_lim; /* opx_rx_advertise, at enable */
	bool armed;                   /* the shim context's sleep is armed (opx_wait.c) */

	/* the udp wire's reliability module (opx_rel.c) */
	bool udp;                     /* the context has a udp socket */
	struct opx_rel_stats {
		bool flows;           /* some udp flow exists: poll every time */
		uint32_t polls;
		uint32_t quiet;       /* empty socket polls (the clock every 8th) */
		uint64_t timers_ns;   /* when opx_rel_timers last ran */
		uint64_t drained_ns;  /* when a poll last found the socket empty */
		uint64_t resumed_ns;  /* that poll, after a gap over the peer timeout */
		uint64_t reap_ns;     /* when opx_rel_timers last looked for dead peers */
		uint64_t acks_sent, nacks_sent, retransmits, timeouts;
		uint64_t nacks_rx;     /* NACK datagrams received */
		uint64_t nack_resends; /* packets sent again because a NACK named them */
		uint64_t nack_ignored; /* named again within the round trip: not resent */
		uint64_t rto_resends;  /* packets sent again by a timeout */
		uint64_t dups, stashed, beyond_window, ring_full, peers_dead;
		uint64_t ux_held;     /* packets held: their sender was over its share */
	} rel;
};

/* Put back a receive that opx_match_req_get (opx_match.h) handed out. */
static inline void opx_ep_req_put(struct opx_ep *ep, struct opx_rx_req *req)
{
	ep->match.posted_cnt--;
	opx_list_insert_head(&ep->match.req_free, &req->link);
}

/* Header of a packet this endpoint sends to peer. */
static inline void opx_ep_hdr_init(struct shim_pkt_hdr *h, const struct opx_ep *ep,
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

/* The peer to send to addr through.  The AV opens each peer once for all
 * its endpoints; a udp peer belongs to a socket, the AV's to its first
 * bound endpoint's (av->udp_via): any other endpoint sends through its
 * own, or its packets would leave from another endpoint's port and the
 * acks and replies go there (opx_av_udp_peer). */
static inline int opx_ep_peer_locked(struct opx_ep *ep, fi_addr_t addr, struct shim_peer **peer)
{
	int rc = opx_av_peer_locked(ep->av, addr, peer);

	if (__builtin_expect(rc || (*peer)->wire != SHIM_WIRE_UDP || ep->av->udp_via == ep->shim, 1))
		return rc;
	return opx_av_udp_peer(ep, addr, peer);
}

static inline struct opx_ep *opx_ep_of(struct fid_ep *f)
{
	return OPX_CONTAINER_OF(f, struct opx_ep, ep_fid);
}

/* A source not in the AV travels through matching and delivery as this
 * tag plus (slid, sctx): a directed receive posted after the application
 * inserted the sender still matches it (a message can arrive before the
 * receiver's fi_av_insert: another host's rank finished MPI_Init first),
 * and with FI_SOURCE_ERR the completion reports its address (opx_match.c).
 * It never equals a valid fi_addr_t and is shown to the application as
 * FI_ADDR_NOTAVAIL anywhere else. */
#define OPX_SRC_ANON (1ULL << 62)
#define OPX_SRC_ANON_MAKE(slid, sctx) (OPX_SRC_ANON | ((uint64_t)(slid) << 16) | (sctx))

static inline bool opx_ep_src_is_anon(fi_addr_t src)
{
	return src >= OPX_SRC_ANON && src != FI_ADDR_NOTAVAIL;
}

static inline fi_addr_t opx_ep_src_public(fi_addr_t src)
{
	return opx_ep_src_is_anon(src) ? FI_ADDR_NOTAVAIL : src;
}

static inline fi_addr_t opx_ep_src(struct opx_ep *ep, uint16_t slid, uint16_t sctx)
{
	struct opx_ep_rx *r = &ep->rx_st;

	/* an unknown source (NOTAVAIL or anon) is looked up again: it may
	 * have been inserted since */
	if (slid != r->last_slid || sctx != r->last_sctx || r->last_src >= OPX_SRC_ANON) {
		r->last_slid = slid;
		r->last_sctx = sctx;
		r->last_src = opx_av_src_locked(ep->av, slid, sctx);
		/* keep who it was: a directed receive matches it once the
		 * application has inserted the sender (opx_match_ux) */
		if (__builtin_expect(r->last_src == FI_ADDR_NOTAVAIL, 0))
			r->last_src = OPX_SRC_ANON_MAKE(slid, sctx);
	}
	return r->last_src;
}

extern struct fi_ops_msg opx_ops_msg;
extern struct fi_ops_tagged opx_ops_tagged;

#endif /* OPX_EP_H */
