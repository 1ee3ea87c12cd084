/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rel_priv.h - between the two files of the udp wire's reliability
 * module: opx_rel.c (progress, timers, the send side; described there)
 * calls opx_rel_rx.c (what each DATA and NACK datagram does) through what
 * is declared here, and opx_rel_rx.c never calls opx_rel.c.  Both keep
 * the per-flow state below.  What the rest of the provider calls is
 * declared in opx_rel.h.
 */
#ifndef OPX_REL_PRIV_H
#define OPX_REL_PRIV_H

#include "opx_ep.h"

/* out-of-order packets kept per flow: the sender's whole window, so that
 * nothing that arrives past a hole is dropped (a drop there costs a
 * timeout, not a NACK) */
#define OPX_REL_STASH SHIM_UDP_WINDOW

struct opx_rel_slot {
	bool used;
	struct shim_udp_pkt pkt;
	uint8_t *buf;              /* payload copy (mtu bytes, kept for reuse) */
	/* while the slot's psn is a hole: when it was last NACKed (0: not
	 * yet), so that each hole is asked for once per NACK round trip */
	uint32_t nack_psn;
	uint32_t nack_n;           /* times NACKed: a sample only after the first */
	uint64_t nack_ns;
};

struct opx_rel_resent {
	uint32_t psn;
	uint32_t t_us;             /* CLOCK_MONOTONIC in 1024 ns units, wrapping */
};

struct opx_rel_flow {
	uint32_t epoch;            /* the link's udp_epoch this state belongs to */
	bool learned;              /* the AV was told the peer's address */
	uint32_t mtu_logged;       /* the link's payload per datagram, as last logged */
	/* receive */
	uint32_t expected;         /* next psn to deliver */
	bool ack_force;            /* a duplicate came: the sender missed an ack */
	uint64_t ack_due_ns;       /* 0, or when the oldest unacknowledged arrived */
	uint64_t rx_last_ns;       /* when the latest data datagram arrived */
	uint32_t ack_dgrams;       /* data datagrams since the last ack we sent */
	uint64_t ack_bytes;        /* and their payload bytes */
	uint32_t rx_hi;            /* psns below arrived or were NACKed as holes */
	uint64_t nack_scan_ns;     /* when holes were last looked for */
	uint64_t nack_rtt_ns;      /* smoothed NACK to retransmission time, 0: none */
	uint64_t nack_rttvar_ns;
	/* the latest NACK a retransmission answered: the sender answers
	 * NACKs in order, down one path, so a hole NACKed before it and
	 * still missing was lost again (or its NACK was): NACKed again now,
	 * not after a timeout */
	uint64_t nack_answered_ns;
	bool nack_evidence;        /* it moved since the last scan */
	uint32_t stashed;
	bool held;                 /* the next packet is stashed: our ring is full */
	uint64_t held_ack_ns;      /* when an ack last said so (SHIM_UDP_ACK_HELD) */
	/* OPX_REL_STASH slots, allocated when a packet first waits, freed
	 * OPX_REL_STASH_IDLE_NS after the last one left: an idle peer costs
	 * this struct and its link, not the ~100 KB of a stash */
	struct opx_rel_slot *stash;
	uint64_t stash_idle_ns;    /* when the stash last became empty */
	/* send */
	/* per psn % SHIM_UDP_WINDOW, when a NACK last had it sent again:
	 * allocated on the first NACK, freed OPX_REL_STASH_IDLE_NS after
	 * the last */
	struct opx_rel_resent *resent;
	uint64_t nack_rx_ns;       /* when a NACK last came */
	uint32_t acked_seen;       /* ack seen at the last timer check */
	uint64_t progress_ns;      /* ack progress, or the flow became busy */
	uint64_t rto_ns;
	uint64_t timer_ns;         /* next retransmission */
	/* round trip: one sample at a time, from when psn rtt_psn - 1 was
	 * seen sent to the ack that covers it */
	bool rtt_on;
	uint32_t rtt_psn;
	uint64_t rtt_t0;
	uint64_t srtt_ns;          /* 0 until the first sample */
	uint64_t rttvar_ns;
	/* keepalive: the link's send count at the last timer pass, and
	 * when it last moved */
	uint64_t tx_seen;
	uint64_t tx_seen_ns;
};

/* Count a data packet towards the flow's next standalone ack. */
static inline void opx_rel_ack_count(struct opx_rel_flow *f, const struct shim_udp_pkt *pkt)
{
	f->ack_dgrams += pkt->dgram_first;
	if (pkt->e.rhf & SHIM_RHF_EGR)
		f->ack_bytes += pkt->e.hdr.paylen;
}
/* Whether the flow's standalone ack is due, ack_sent being the last psn
 * acked (lock held, f->ack_due_ns set). */
bool opx_rel_ack_due(const struct opx_rel_flow *f, uint32_t ack_sent, uint64_t now);
/* A poll found the socket empty at now: ep->rel's drain times (the
 * first drain, or one after a gap over timeout_ns, restarts every
 * peer's silence count). */
void opx_rel_drained(struct opx_rel_stats *rel, uint64_t now, uint64_t timeout_ns);
/* A DATA packet of flow f: delivered, stashed, its holes NACKed, or dropped. */
void opx_rel_data(struct opx_ep *ep, struct opx_rel_flow *f, const struct shim_udp_pkt *pkt,
		  uint64_t now);
/* A multi-packet message whose packets are pkts[0..] of a batch (avail
 * there), in order: delivered whole from the batch's buffers, not through
 * the stash.  Returns the packets taken, 0 when they are not all there
 * (then opx_rel_data takes them one by one). */
uint32_t opx_rel_data_run(struct opx_ep *ep, struct opx_rel_flow *f,
			  const struct shim_udp_pkt *pkts, uint32_t avail, uint64_t now);
/* A NACK: the psns it names sent again, each at most once per half round trip. */
void opx_rel_nacked(struct opx_ep *ep, struct opx_rel_flow *f, const struct shim_udp_pkt *pkt,
		    uint64_t now);
/* NACK the holes of [lo, hi) not NACKed within min_age. */
void opx_rel_nack(struct opx_ep *ep, struct shim_peer *peer, struct opx_rel_flow *f, uint32_t lo,
		  uint32_t hi, uint64_t now, uint64_t min_age);
/* Deliver what waits in the stash at f->expected, while it comes in order. */
void opx_rel_drain_stash(struct opx_ep *ep, struct opx_rel_flow *f, uint64_t now);

#endif /* OPX_REL_PRIV_H */
