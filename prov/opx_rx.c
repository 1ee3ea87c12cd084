/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rx.c - receive progress: drain the receive context's header queue,
 * validate each packet, dispatch it through opx_rx_ops[] (one handler per
 * opcode: eager and multi-packet eager and the RTS here, rendezvous in
 * opx_rndv.c, one-sided in opx_rma.c and opx_rma_target.c), return
 * credits.
 *
 * Every sender of the host can write our header queue and eager ring, so
 * nothing is read from shared memory twice: the 64-byte header entry is
 * copied to the stack once, right after the acquire load of its
 * generation word, and only the copy is validated and used (a sender
 * rewriting paylen between two reads once overflowed a heap buffer).
 * Validation happens before any field is used: error bits, opcode range,
 * job key, destination, flags, payload length against the MTU and the
 * eager ring, the checksum when there is one.  A bad packet is dropped
 * and counted by reason (opx_drop_count), never acted on.
 *
 * A message's first packet that no posted receive matches may wait at the
 * head for a few drains, until its receive is posted (opx_rx_defer).
 *
 * A packet that cannot be absorbed now (the unexpected-message memory
 * bound is reached) stays at the head of the queue: its credits are not
 * returned, so senders see -FI_EAGAIN until the application posts
 * receives.  Memory stays bounded and nothing is lost.  A packet that
 * could never be absorbed (a multi-packet message larger than what we
 * advertise as our eager limit) is dropped instead, or it would wedge
 * the queue for ever.
 */
#include <stdlib.h>
#include <sys/uio.h>

#include "opx_complete.h"
#include "opx_csum.h"
#include "opx_drop.h"
#include "opx_ep.h"
#include "opx_rma.h"
#include "opx_rndv_api.h"
#include "opx_rx.h"
#include "opx_stats.h"
#include "opx_ux.h"

/* The largest eager message we take when a sender's limit is want:
 * bounded by the unexpected-message bound and by the sender's share of
 * our rings (a quarter, as for our own sends), so that what is
 * advertised can always be buffered. */
static uint32_t opx_rx_eager_limit(const struct shim_rx *rx, size_t want)
{
	size_t lim = want;
	size_t ux_room = opx_env.ux_max_bytes > sizeof(struct opx_ux)
				 ? opx_env.ux_max_bytes - sizeof(struct opx_ux)
				 : 0;
	size_t egr = (size_t)(rx->egr_mask + 1) * SHIM_BLOCK / 4;
	size_t hdrq = (size_t)(rx->hdrq_mask + 1) / 4 * rx->mtu;

	if (lim > ux_room)
		lim = ux_room;
	if (lim > egr)
		lim = egr;
	if (lim > hdrq)
		lim = hdrq;
	if (lim < SHIM_INLINE_MAX) /* inline messages cost no payload buffer */
		lim = SHIM_INLINE_MAX;
	if (lim > UINT32_MAX)
		lim = UINT32_MAX;
	return (uint32_t)lim;
}

/* One limit per wire: shm senders read theirs from our control block,
 * udp senders from every datagram we send them (shim_udp_advertise).
 * Both come out of the same receive rings and unexpected bound, so
 * whichever wire a packet came by, a multi-packet message within the
 * larger one can be buffered (rx_mp_max). */
void opx_rx_advertise(struct opx_ep *ep)
{
	struct shim_rx *rx = ep->rx;
	uint32_t lim = opx_rx_eager_limit(rx, opx_env.eager_max);
	uint32_t udp = opx_rx_eager_limit(rx, opx_env.udp_eager_max);

	ep->rx_lim.rx_eager_max = lim;
	ep->rx_lim.rx_eager_max_udp = udp;
	ep->rx_lim.rx_mp_max = lim > udp ? lim : udp;
	/* what the receive ring can hold as unexpected descriptors: taken
	 * beyond the bound, so that the ring never stops for its contents */
	ep->match.ux_slack = (size_t)(rx->egr_mask + 1) * SHIM_BLOCK +
		       (size_t)(rx->hdrq_mask + 1) * sizeof(struct opx_ux) + ep->rx_lim.rx_mp_max;
	ep->rx_st.rx_csum = opx_env.checksum;
	rx->ctl->rx_eager_max = lim;
	rx->ctl->rx_flags = opx_env.checksum ? SHIM_RXF_CSUM : 0;
	shim_udp_advertise(ep->shim, udp); /* the socket, if any, opens later */
}

/* How many drains in a row may leave a first packet that no posted
 * receive matches waiting in the ring (opx_rx_defer). */
#define OPX_RX_DEFER_MAX 4

/* Whether a first packet that no posted receive matches should wait in
 * the ring a little rather than become an unexpected message now.  A
 * receiver lagging a streaming sender (a broadcast root running ahead)
 * finds its next message already queued: taken at once it is copied into
 * an unexpected descriptor and copied again when the receive comes, and
 * under a backlog the descriptors grow cold.  Left in the ring for the
 * few progress calls until the application posts that receive, it goes
 * straight into the receive buffer.
 *
 * It must not hold back anything queued behind it that the application
 * waits for, so it waits only while nothing can be: no receive posted
 * (a message behind it could match one), no rendezvous send or receive
 * in flight, no multi-packet message half arrived, no one-sided operation
 * of ours unanswered.
 * (Recursive doubling at 4 ranks on 2 cores got twice as slow when a
 * next-round message waited in front of this round's.)  And only for
 * OPX_RX_DEFER_MAX drains in a row; then packets are taken as unexpected
 * until one matches a posted receive again, so a peer's request behind
 * it waits little.  A peek never waits: it answers from what arrived. */
static inline bool opx_rx_defer(struct opx_ep *ep)
{
	if (ep->rx_st.rx_no_defer || ep->rx_st.rx_defers >= OPX_RX_DEFER_MAX ||
	    !opx_list_empty(&ep->match.posted_tag) || !opx_list_empty(&ep->match.posted_msg) ||
	    ep->rndv_st.rndv_busy || ep->rndv_st.rndv_rx_busy || ep->match.mp.active || opx_rma_outstanding(ep))
		return false;
	ep->rx_st.rx_defers++;
	return true;
}

/* The posted receive a first packet matches; a match re-arms deferral. */
static inline struct opx_rx_req *opx_rx_match(struct opx_ep *ep, bool tagged, uint64_t tag,
					      fi_addr_t src)
{
	struct opx_rx_req *req = opx_match_posted(ep, tagged, tag, src);

	if (req)
		ep->rx_st.rx_defers = 0;
	return req;
}

/* An unexpected message's first packet: describe it and queue it, in
 * arrival order, where receives and peeks look for it. */
static void opx_rx_ux_enqueue(struct opx_ep *ep, struct opx_ux *ux, const struct shim_pkt_hdr *h,
			      fi_addr_t src, const uint8_t *pay)
{
	ux->tag = h->tag;
	ux->data = h->data;
	ux->src = src;
	ux->pflags = h->flags;
	ux->rcvd = h->paylen;
	memcpy(ux->buf, pay, h->paylen);
	opx_ux_queue(ep, h->flags & OPX_PF_TAGGED, ux);
}

static inline int opx_rx_eager(struct opx_ep *ep, const struct shim_pkt_hdr *h, const uint8_t *pay)
{
	bool tagged = h->flags & OPX_PF_TAGGED;
	fi_addr_t src = opx_ep_src(ep, h->slid, h->sctx);
	struct opx_rx_req *req = opx_rx_match(ep, tagged, h->tag, src);
	struct opx_ux *ux;
	size_t cap, off;

	if (req) {
		off = opx_match_req_claim(ep, req, h->paylen, &cap);
		opx_iov_copy_to(req->iov, req->iov_count, off, pay, h->paylen);
		opx_complete_rx(ep, req, off, cap, h->paylen, h->tag, h->data, h->flags, src, 0);
		return 0;
	}
	if (opx_rx_defer(ep))
		return -FI_EAGAIN;
	ux = opx_ux_get(ep, h->slid, h->sctx, h->paylen);
	if (!ux)
		return -FI_EAGAIN;
	opx_rx_ux_enqueue(ep, ux, h, src, pay);
	return 0;
}

/* Abandon a reassembly that a new first packet interrupts (a sender that
 * died mid-message); its receive completes in error. */
static void opx_rx_mp_abort(struct opx_ep *ep)
{
	struct opx_mp_state *mp = &ep->match.mp;

	if (mp->req)
		opx_complete_rx(ep, mp->req, mp->req_off, mp->req_cap, mp->total, mp->tag, mp->data,
				mp->pflags, mp->src, FI_EIO);
	if (mp->ux) {
		if (mp->ux->waiting)
			opx_complete_rx(ep, mp->ux->waiting, mp->ux->waiting_off,
					mp->ux->waiting_cap, mp->total, mp->tag, mp->data,
					mp->pflags, mp->src, FI_EIO);
		opx_list_remove(&mp->ux->link); /* no-op once matched */
		opx_ux_put(ep, mp->ux);
	}
	memset(mp, 0, sizeof(*mp));
}

static int opx_rx_mp_first(struct opx_ep *ep, const struct shim_pkt_hdr *h, const uint8_t *pay)
{
	struct opx_mp_state *mp = &ep->match.mp;
	uint64_t total = opx_proto_pw(h).mp_first.total;
	bool tagged = h->flags & OPX_PF_TAGGED;
	fi_addr_t src;
	struct opx_rx_req *req;

	/* packets of the sender's path MTU: the link's on the udp wire */
	if (total <= h->paylen || total > opx_env.max_msg_size || !h->paylen ||
	    h->paylen > ep->rx->mtu || h->paylen % SHIM_BLOCK) {
		opx_drop_note(ep, OPX_DROP_MP_LEN);
		return 0;
	}
	/* Senders keep multi-packet messages within the limit we advertise;
	 * one above it could never be buffered, and leaving it queued would
	 * wedge the context for ever. */
	if (total > ep->rx_lim.rx_mp_max) {
		opx_drop_note(ep, OPX_DROP_MP_BOUND);
		return 0;
	}
	src = opx_ep_src(ep, h->slid, h->sctx);
	req = opx_rx_match(ep, tagged, h->tag, src);
	if (!req) {
		struct opx_ux *ux;

		if (opx_rx_defer(ep))
			return -FI_EAGAIN;
		ux = opx_ux_get(ep, h->slid, h->sctx, total);
		if (!ux)
			return -FI_EAGAIN;
		if (mp->active)
			opx_rx_mp_abort(ep);
		opx_rx_ux_enqueue(ep, ux, h, src, pay);
		mp->ux = ux;
		mp->req = NULL;
	} else {
		if (mp->active)
			opx_rx_mp_abort(ep);
		mp->req = req;
		mp->req_off = opx_match_req_claim(ep, req, total, &mp->req_cap);
		opx_iov_copy_to(req->iov, req->iov_count, mp->req_off, pay,
				h->paylen < mp->req_cap ? h->paylen : mp->req_cap);
		mp->ux = NULL;
	}
	mp->active = true;
	mp->slid = h->slid;
	mp->sctx = h->sctx;
	mp->msgid = h->msgid;
	mp->total = total;
	mp->off = h->paylen;
	mp->tag = h->tag;
	mp->data = h->data;
	mp->pflags = h->flags;
	mp->src = src;
	return 0;
}

static void opx_rx_mp_finish(struct opx_ep *ep)
{
	struct opx_mp_state *mp = &ep->match.mp;
	struct opx_ux *ux = mp->ux;

	if (mp->req) {
		opx_complete_rx(ep, mp->req, mp->req_off, mp->req_cap, mp->total, mp->tag, mp->data,
				mp->pflags, mp->src, 0);
	} else if (ux) {
		ux->rcvd = ux->len;
		if (ux->discard) {
			opx_ux_put(ep, ux);
		} else if (ux->waiting) {
			struct opx_rx_req *req = ux->waiting;
			size_t cap = ux->waiting_cap;
			opx_iov_copy_to(req->iov, req->iov_count, ux->waiting_off, ux->buf,
					ux->len < cap ? ux->len : cap);
			opx_complete_rx(ep, req, ux->waiting_off, cap, ux->len, ux->tag, ux->data,
					ux->pflags, ux->src, 0);
			opx_ux_put(ep, ux);
		}
	}
	memset(mp, 0, sizeof(*mp));
}

static int opx_rx_op_mp_next(struct opx_ep *ep, const struct shim_rhq_entry *e,
			     const uint8_t *pay)
{
	const struct shim_pkt_hdr *h = &e->hdr;
	struct opx_mp_state *mp = &ep->match.mp;
	uint64_t off = opx_proto_pw(h).mp_next.offset;

	if (!mp->active || h->slid != mp->slid || h->sctx != mp->sctx || h->msgid != mp->msgid ||
	    off != mp->off || off + h->paylen > mp->total || !h->paylen) {
		opx_drop_note(ep, OPX_DROP_MP_SEQ);
		return 0;
	}
	if (mp->req) {
		if (off < mp->req_cap) {
			size_t n = mp->req_cap - off;
			opx_iov_copy_to(mp->req->iov, mp->req->iov_count, mp->req_off + off, pay,
					h->paylen < n ? h->paylen : n);
		}
	} else if (mp->ux) {
		/* ux->rcvd stays below ux->len until opx_rx_mp_finish(): that is
		 * what marks the message incomplete for a matching receive */
		memcpy(mp->ux->buf + off, pay, h->paylen);
	}
	mp->off = off + h->paylen;
	if (mp->off == mp->total)
		opx_rx_mp_finish(ep);
	return 0;
}

static bool opx_rx_rts_valid(const struct shim_pkt_hdr *h)
{
	const struct opx_rts_payload *r;

	if (h->paylen != sizeof(*r))
		return false;
	return opx_proto_pw(h).rts.len <= opx_env.max_msg_size;
}

static int opx_rx_rts(struct opx_ep *ep, const struct shim_pkt_hdr *h, const uint8_t *pay)
{
	bool tagged = h->flags & OPX_PF_TAGGED;
	struct opx_rx_req *req;
	struct opx_ux *ux;
	fi_addr_t src;

	if (!opx_rx_rts_valid(h)) {
		opx_drop_note(ep, OPX_DROP_RTS);
		return 0;
	}
	ux = opx_ux_get(ep, h->slid, h->sctx, 0);
	if (!ux)
		return -FI_EAGAIN;
	src = opx_ep_src(ep, h->slid, h->sctx);
	memcpy(&ux->rts, pay, sizeof(ux->rts));
	if (!opx_rndv_rts_ok(h, &ux->rts)) {
		opx_ux_put(ep, ux);
		opx_drop_note(ep, OPX_DROP_RTS);
		return 0;
	}
	ux->rndv = true;
	ux->len = opx_proto_pw(h).rts.len;
	ux->rcvd = ux->len;
	ux->cookie = opx_proto_pw(h).rts.cookie;
	ux->tag = h->tag;
	ux->data = h->data;
	ux->src = src;
	ux->pflags = h->flags;
	req = opx_rx_match(ep, tagged, h->tag, src);
	if (req) {
		opx_match_ux_deliver(ep, req, ux);
		return 0;
	}
	if (opx_rx_defer(ep)) {
		opx_ux_put(ep, ux);
		return -FI_EAGAIN;
	}
	opx_ux_queue(ep, tagged, ux);
	return 0;
}

/* Receive side: deliver like an eager packet, then acknowledge once the
 * data is in a receive buffer (at once, or when an unexpected copy is
 * matched later: opx_match_ux_deliver / FI_DISCARD send the DONE then). */
static int opx_rx_eager_dc(struct opx_ep *ep, const struct shim_pkt_hdr *h, const uint8_t *pay)
{
	bool tagged = h->flags & OPX_PF_TAGGED;
	struct shim_addr from;
	struct opx_rx_req *req;
	struct opx_ux *ux;
	fi_addr_t src;
	size_t len, cap, off;

	if (h->paylen < sizeof(from)) {
		opx_drop_proto(ep, "delivery-complete packet without a sender address");
		return 0;
	}
	memcpy(&from, pay, sizeof(from));
	if (from.lid != h->slid || from.ctx != h->sctx) {
		opx_drop_proto(ep, "delivery-complete sender address does not match the header");
		return 0;
	}
	pay += sizeof(from);
	len = h->paylen - sizeof(from);
	src = opx_ep_src(ep, h->slid, h->sctx);
	req = opx_rx_match(ep, tagged, h->tag, src);
	if (req) {
		off = opx_match_req_claim(ep, req, len, &cap);
		opx_iov_copy_to(req->iov, req->iov_count, off, pay, len < cap ? len : cap);
		opx_complete_rx(ep, req, off, cap, len, h->tag, h->data, h->flags, src, 0);
		opx_rndv_ack(ep, &from, src, opx_proto_pw(h).dc.cookie);
		return 0;
	}
	if (opx_rx_defer(ep))
		return -FI_EAGAIN;
	ux = opx_ux_get(ep, h->slid, h->sctx, len);
	if (!ux)
		return -FI_EAGAIN;
	ux->tag = h->tag;
	ux->data = h->data;
	ux->src = src;
	ux->pflags = h->flags;
	ux->rcvd = len;
	memcpy(ux->buf, pay, len);
	ux->ack = true;
	ux->rts.src = from;
	ux->cookie = opx_proto_pw(h).dc.cookie;
	opx_ux_queue(ep, tagged, ux);
	return 0;
}


/* Which check a bad header failed, for the drop counters (cold path). */
static __attribute__((noinline, cold)) void opx_rx_bad_header(struct opx_ep *ep,
							      const struct shim_rhq_entry *e)
{
	const struct shim_pkt_hdr *h = &e->hdr;
	enum opx_drop_reason why = OPX_DROP_PAYLEN;

	if (e->rhf & (SHIM_RHF_ERR_MASK << SHIM_RHF_ERR_SHIFT))
		why = OPX_DROP_RHF_ERR;
	else if (h->opcode == 0 || h->opcode >= OPX_OP_MAX)
		why = OPX_DROP_OPCODE;
	else if (h->jkey != ep->jkey)
		why = OPX_DROP_JKEY;
	else if (h->dlid != ep->rx->lid || h->dctx != ep->rx->ctx)
		why = OPX_DROP_DEST;
	else if (h->flags & ~OPX_PF_MASK)
		why = OPX_DROP_FLAGS;
	opx_drop_note(ep, why);
}

/* Checksum policy: a sealed packet is verified; with FI_OPX_CHECKSUM on,
 * the eager protocols (whose payload sits in our ring) must be sealed.
 * Rendezvous control packets are not sealed yet (see the README). */
static __attribute__((noinline)) bool opx_rx_csum_ok(const struct opx_ep *ep,
						     const struct shim_rhq_entry *e,
						     const uint8_t *pay)
{
	const struct shim_pkt_hdr *h = &e->hdr;

	if (!(h->flags & OPX_PF_CSUM))
		return !(ep->rx_st.rx_csum && h->opcode <= OPX_OP_MP_NEXT);
	return opx_csum_pkt(h, (e->rhf & SHIM_RHF_EGR) ? pay : NULL) == h->psn;
}

/* Whether an RTS came from another host (the udp wire: a push, never
 * CMA), as its payload says; for the statistics only. */
static bool opx_rx_rts_udp(const struct opx_ep *ep, const struct shim_pkt_hdr *h,
			   const uint8_t *pay)
{
	uint64_t host;

	if (opx_env.wire == SHIM_WIRE_UDP)
		return true;
	if (h->paylen < sizeof(struct opx_rts_payload))
		return false;
	memcpy(&host, pay + offsetof(struct opx_rts_payload, src.host_id), sizeof(host));
	return host != ep->addr.host_id;
}

/* The handlers of opx_rx_ops[] that count what they take: each packet
 * type with its statistics (a multi-packet message's continuations count
 * nothing; the first packet counts the message once it is taken). */
static inline int opx_rx_op_eager(struct opx_ep *ep, const struct shim_rhq_entry *e,
				  const uint8_t *pay)
{
	int rc = opx_rx_eager(ep, &e->hdr, pay);

	if (__builtin_expect(!rc, 1))
		opx_stats_rx(ep, e->rhf & SHIM_RHF_EGR ? OPX_PROTO_EAGER : OPX_PROTO_INJECT,
			     e->hdr.paylen);
	return rc;
}

static int opx_rx_op_mp_first(struct opx_ep *ep, const struct shim_rhq_entry *e,
			      const uint8_t *pay)
{
	int rc = opx_rx_mp_first(ep, &e->hdr, pay);

	if (!rc)
		opx_stats_rx(ep, OPX_PROTO_MP_EAGER, opx_proto_pw(&e->hdr).mp_first.total);
	return rc;
}

static int opx_rx_op_rts(struct opx_ep *ep, const struct shim_rhq_entry *e, const uint8_t *pay)
{
	const struct shim_pkt_hdr *h = &e->hdr;
	int rc = opx_rx_rts(ep, h, pay);

	if (!rc)
		opx_stats_rx(ep,
			     opx_stats_rndv_proto(opx_proto_pw(h).rts.len, opx_rx_rts_udp(ep, h, pay)),
			     opx_proto_pw(h).rts.len);
	return rc;
}

/* a delivery-complete eager message: sender address + data */
static int opx_rx_op_eager_dc(struct opx_ep *ep, const struct shim_rhq_entry *e,
			      const uint8_t *pay)
{
	int rc = opx_rx_eager_dc(ep, &e->hdr, pay);

	if (!rc && e->hdr.paylen >= sizeof(struct shim_addr))
		opx_stats_rx(ep, OPX_PROTO_EAGER, e->hdr.paylen - sizeof(struct shim_addr));
	return rc;
}

/* Every opcode's receive handler: the one dispatch of a validated packet
 * (opcode 0 and >= OPX_OP_MAX never get here; test_rx checks that every
 * opcode in between has a handler). */
const opx_rx_op opx_rx_ops[OPX_OP_MAX] = {
	[OPX_OP_EAGER] = opx_rx_op_eager,
	[OPX_OP_MP_FIRST] = opx_rx_op_mp_first,
	[OPX_OP_MP_NEXT] = opx_rx_op_mp_next,
	[OPX_OP_RTS] = opx_rx_op_rts,
	[OPX_OP_DONE] = opx_rndv_rx_done,
	[OPX_OP_CTS] = opx_rndv_rx_cts,
	[OPX_OP_DATA] = opx_rndv_rx_data,
	[OPX_OP_CTW] = opx_rndv_rx_ctw,
	[OPX_OP_WDONE] = opx_rndv_rx_wdone,
	[OPX_OP_EAGER_DC] = opx_rx_op_eager_dc,
	[OPX_OP_RMA_WRITE] = opx_rma_target_rx_request,
	[OPX_OP_RMA_READ] = opx_rma_target_rx_request,
	[OPX_OP_ATOMIC] = opx_rma_target_rx_request,
	[OPX_OP_RMA_RESP] = opx_rma_rx_reply,
};

/* e is the endpoint's private copy of the entry.  Returns -FI_EAGAIN
 * when the packet must stay queued. */
static inline int opx_rx_packet(struct opx_ep *ep, const struct shim_rhq_entry *e)
{
	const struct shim_pkt_hdr *h = &e->hdr;
	struct shim_rx *rx = ep->rx;
	const uint8_t *pay;

	if (__builtin_expect((e->rhf & (SHIM_RHF_ERR_MASK << SHIM_RHF_ERR_SHIFT)) ||
				     h->opcode == 0 || h->opcode >= OPX_OP_MAX ||
				     h->jkey != ep->jkey || h->dlid != rx->lid ||
				     h->dctx != rx->ctx || (h->flags & ~OPX_PF_MASK) ||
				     h->paylen > rx->mtu,
			     0)) {
		/* a dead sender's hole, filled by the shim: a multi-packet
		 * message in progress was its, and will never finish */
		if ((e->rhf & SHIM_RHF_ERR_DEAD) && ep->match.mp.active)
			opx_rx_mp_abort(ep);
		opx_rx_bad_header(ep, e);
		return 0;
	}
	pay = shim_rx_payload(rx, e);
	/* expected-receive data the udp wire placed already */
	if (__builtin_expect(!pay && (e->rhf & SHIM_RHF_PLACED) && h->opcode == OPX_OP_DATA, 0))
		return opx_rndv_rx_data(ep, e, NULL);
	if (__builtin_expect(!pay, 0)) {
		opx_drop_note(ep, OPX_DROP_PAYLOAD);
		return 0;
	}
	if (__builtin_expect((h->flags & OPX_PF_CSUM) || ep->rx_st.rx_csum, 0) &&
	    !opx_rx_csum_ok(ep, e, pay)) {
		opx_drop_note(ep, OPX_DROP_CSUM);
		return 0;
	}
	/* the table's commonest entry, called directly so it inlines */
	if (__builtin_expect(h->opcode == OPX_OP_EAGER, 1))
		return opx_rx_op_eager(ep, e, pay);
	return opx_rx_ops[h->opcode](ep, e, pay);
}

/* Replies of a drain sent together at most this many packets' worth:
 * a whole drain's (64) held at once stalled an initiator whose window is
 * 64 chunks (fi_write 128 KiB across hosts: 750 -> 430-490 MB/s), 16
 * keep its pipeline full. */
#define OPX_RX_CORK_RUN 16

static void opx_rx_cork(struct opx_ep *ep, struct shim_ctx *via)
{
	shim_udp_cork(ep->shim);
	if (via && via != ep->shim)
		shim_udp_cork(via);
}

static void opx_rx_uncork(struct opx_ep *ep, struct shim_ctx *via)
{
	shim_udp_uncork(ep->shim);
	if (via && via != ep->shim)
		shim_udp_uncork(via);
}

/* Take up to budget packets off the receive queue, each validated and
 * dispatched, its credits returned once it is absorbed.  Returns how many
 * were taken; stops early at an empty queue or a packet that must stay
 * queued (-FI_EAGAIN from its handler). */
int opx_rx_drain(struct opx_ep *ep, int budget)
{
	struct shim_rx *rx = ep->rx;
	struct shim_ctx *via = ep->av ? ep->av->udp_via : NULL;
	/* what the packets make us send to udp peers (RMA and atomic
	 * replies, rendezvous) leaves together, every OPX_RX_CORK_RUN
	 * packets and after the drain; only once the endpoint has udp flows
	 * (a job on one host opens its socket too, and its shm drains must
	 * not pay for this) */
	bool cork = __builtin_expect(ep->udp && ep->rel.flows, 0);
	int n;

	if (cork)
		opx_rx_cork(ep, via);
	for (n = 0; n < budget; n++) {
		struct shim_rhq_entry *e = shim_rx_peek(rx);
		struct shim_rhq_entry copy;

		if (!e)
			break;
		/* One fetch, after the acquire load of e->seq: from here on
		 * only the copy is read, so a sender cannot change a length
		 * between its check and its use. */
		memcpy(&copy, e, sizeof(copy));
		shim_rx_prefetch_payload(rx, &copy);
		/* A packet of at most one block takes less than the miss on a
		 * header entry: overlap the next ones.  A bigger one's copy
		 * takes longer, and there the sender, writing as many bytes, is
		 * the slower side, whose lines a prefetch would take
		 * (opx_msgrate 1 KiB: 6 % slower with it). */
		if (copy.hdr.paylen <= SHIM_BLOCK)
			shim_rx_prefetch_ahead(rx, n);
		if (opx_rx_packet(ep, &copy))
			break;
		shim_rx_consume(rx, &copy);
		if (cork && n % OPX_RX_CORK_RUN == OPX_RX_CORK_RUN - 1) {
			opx_rx_uncork(ep, via);
			opx_rx_cork(ep, via);
		}
	}
	if (cork)
		opx_rx_uncork(ep, via);
	if (n) {
		shim_rx_credit_flush(rx);
		ep->msg_st.tx_streak = 0;
	} else {
		shim_rx_prefetch_next(rx); /* nothing yet: what comes next */
	}
	return n;
}
