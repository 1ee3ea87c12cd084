/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rx.c - receive progress: drain the receive context's header queue,
 * validate each packet, dispatch on its opcode, return credits.
 *
 * Validation happens before any field is used: error bits, opcode range,
 * job key, destination, flags, payload length against the MTU and the
 * eager ring.  A bad packet is dropped and counted, never acted on.
 *
 * A packet that cannot be absorbed now (the unexpected-message memory
 * bound is reached) stays at the head of the queue: its credits are not
 * returned, so senders see -FI_EAGAIN until the application posts
 * receives.  Memory stays bounded and nothing is lost.
 */
#include <stdlib.h>
#include <sys/uio.h>

#include "opx_ep.h"
#include "opx_rma.h"

#define OPX_PROGRESS_BATCH 64

typedef int (*opx_rx_handler)(struct opx_ep *ep, const struct shim_pkt_hdr *h, const uint8_t *pay);

void opx_rx_drop(struct opx_ep *ep, const char *why)
{
	ep->rx_dropped++;
	atomic_fetch_add_explicit(&ep->rx->ctl->rx_dropped, 1, memory_order_relaxed);
	OPX_DBG(FI_LOG_EP_DATA, "dropped packet: %s\n", why);
	(void)why;
}

/* An unexpected message's first packet: describe it and queue it, in
 * arrival order, where receives and peeks look for it. */
static void opx_ux_enqueue(struct opx_ep *ep, struct opx_ux *ux, const struct shim_pkt_hdr *h,
			   fi_addr_t src, const uint8_t *pay)
{
	ux->tag = h->tag;
	ux->data = h->data;
	ux->src = src;
	ux->pflags = h->flags;
	ux->rcvd = h->paylen;
	memcpy(ux->buf, pay, h->paylen);
	opx_list_insert_tail((h->flags & OPX_PF_TAGGED) ? &ep->ux_tag : &ep->ux_msg, &ux->link);
}

static inline int opx_rx_eager(struct opx_ep *ep, const struct shim_pkt_hdr *h, const uint8_t *pay)
{
	bool tagged = h->flags & OPX_PF_TAGGED;
	fi_addr_t src = opx_ep_src(ep, h->slid, h->sctx);
	struct opx_rx_req *req = opx_match_posted(ep, tagged, h->tag, src);
	struct opx_ux *ux;
	size_t cap, off;

	if (req) {
		off = opx_req_claim(ep, req, h->paylen, &cap);
		opx_iov_copy_to(req->iov, req->iov_count, off, pay, h->paylen);
		opx_rx_complete(ep, req, off, cap, h->paylen, h->tag, h->data, h->flags, src, 0);
		return 0;
	}
	ux = opx_ux_get(ep, h->paylen);
	if (!ux)
		return -FI_EAGAIN;
	opx_ux_enqueue(ep, ux, h, src, pay);
	return 0;
}

/* Abandon a reassembly that a new first packet interrupts (a sender that
 * died mid-message); its receive completes in error. */
static void opx_mp_abort(struct opx_ep *ep)
{
	struct opx_mp_state *mp = &ep->mp;

	if (mp->req)
		opx_rx_complete(ep, mp->req, mp->req_off, mp->req_cap, mp->total, mp->tag, mp->data,
				mp->pflags, mp->src, FI_EIO);
	if (mp->ux) {
		if (mp->ux->waiting)
			opx_rx_complete(ep, mp->ux->waiting, mp->ux->waiting_off,
					mp->ux->waiting_cap, mp->total, mp->tag, mp->data,
					mp->pflags, mp->src, FI_EIO);
		opx_list_remove(&mp->ux->link); /* no-op once matched */
		opx_ux_put(ep, mp->ux);
	}
	memset(mp, 0, sizeof(*mp));
}

static int opx_rx_mp_first(struct opx_ep *ep, const struct shim_pkt_hdr *h, const uint8_t *pay)
{
	struct opx_mp_state *mp = &ep->mp;
	uint64_t total = h->p.u64[0];
	bool tagged = h->flags & OPX_PF_TAGGED;
	fi_addr_t src;
	struct opx_rx_req *req;

	if (total <= h->paylen || total > opx_env.max_msg_size || h->paylen != ep->rx->mtu) {
		opx_rx_drop(ep, "bad multi-packet length");
		return 0;
	}
	src = opx_ep_src(ep, h->slid, h->sctx);
	req = opx_match_posted(ep, tagged, h->tag, src);
	if (!req) {
		struct opx_ux *ux = opx_ux_get(ep, total);
		if (!ux)
			return -FI_EAGAIN;
		if (mp->active)
			opx_mp_abort(ep);
		opx_ux_enqueue(ep, ux, h, src, pay);
		mp->ux = ux;
		mp->req = NULL;
	} else {
		if (mp->active)
			opx_mp_abort(ep);
		mp->req = req;
		mp->req_off = opx_req_claim(ep, req, total, &mp->req_cap);
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

static void opx_mp_finish(struct opx_ep *ep)
{
	struct opx_mp_state *mp = &ep->mp;
	struct opx_ux *ux = mp->ux;

	if (mp->req) {
		opx_rx_complete(ep, mp->req, mp->req_off, mp->req_cap, mp->total, mp->tag, mp->data,
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
			opx_rx_complete(ep, req, ux->waiting_off, cap, ux->len, ux->tag, ux->data,
					ux->pflags, ux->src, 0);
			opx_ux_put(ep, ux);
		}
	}
	memset(mp, 0, sizeof(*mp));
}

static int opx_rx_mp_next(struct opx_ep *ep, const struct shim_pkt_hdr *h, const uint8_t *pay)
{
	struct opx_mp_state *mp = &ep->mp;
	uint64_t off = h->p.u64[0];

	if (!mp->active || h->slid != mp->slid || h->sctx != mp->sctx || h->msgid != mp->msgid ||
	    off != mp->off || off + h->paylen > mp->total || !h->paylen) {
		opx_rx_drop(ep, "multi-packet continuation out of sequence");
		return 0;
	}
	if (mp->req) {
		if (off < mp->req_cap) {
			size_t n = mp->req_cap - off;
			opx_iov_copy_to(mp->req->iov, mp->req->iov_count, mp->req_off + off, pay,
					h->paylen < n ? h->paylen : n);
		}
	} else if (mp->ux) {
		/* ux->rcvd stays below ux->len until opx_mp_finish(): that is
		 * what marks the message incomplete for a matching receive */
		memcpy(mp->ux->buf + off, pay, h->paylen);
	}
	mp->off = off + h->paylen;
	if (mp->off == mp->total)
		opx_mp_finish(ep);
	return 0;
}

static bool opx_rts_valid(const struct shim_pkt_hdr *h)
{
	const struct opx_rts_payload *r;

	if (h->paylen != sizeof(*r))
		return false;
	return h->p.u64[0] <= opx_env.max_msg_size;
}

static int opx_rx_rts(struct opx_ep *ep, const struct shim_pkt_hdr *h, const uint8_t *pay)
{
	bool tagged = h->flags & OPX_PF_TAGGED;
	struct opx_rx_req *req;
	struct opx_ux *ux;
	fi_addr_t src;

	if (!opx_rts_valid(h)) {
		opx_rx_drop(ep, "bad rendezvous request");
		return 0;
	}
	ux = opx_ux_get(ep, 0);
	if (!ux)
		return -FI_EAGAIN;
	src = opx_ep_src(ep, h->slid, h->sctx);
	memcpy(&ux->rts, pay, sizeof(ux->rts));
	if (ux->rts.iov_count > OPX_IOV_LIMIT) {
		opx_ux_put(ep, ux);
		opx_rx_drop(ep, "bad rendezvous iov count");
		return 0;
	}
	ux->rndv = true;
	ux->len = h->p.u64[0];
	ux->rcvd = ux->len;
	ux->cookie = h->p.u64[1];
	ux->tag = h->tag;
	ux->data = h->data;
	ux->src = src;
	ux->pflags = h->flags;
	req = opx_match_posted(ep, tagged, h->tag, src);
	if (req) {
		opx_ux_deliver(ep, req, ux);
		return 0;
	}
	opx_list_insert_tail(tagged ? &ep->ux_tag : &ep->ux_msg, &ux->link);
	return 0;
}

static const opx_rx_handler opx_rx_table[OPX_OP_MAX] = {
	[OPX_OP_EAGER] = opx_rx_eager,	  [OPX_OP_MP_FIRST] = opx_rx_mp_first,
	[OPX_OP_MP_NEXT] = opx_rx_mp_next, [OPX_OP_RTS] = opx_rx_rts,
};

/* Returns -FI_EAGAIN when the packet must stay queued. */
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
		opx_rx_drop(ep, "bad header");
		return 0;
	}
	pay = shim_rx_payload(rx, e);
	if (__builtin_expect(!pay, 0)) {
		opx_rx_drop(ep, "payload outside the eager ring");
		return 0;
	}
	if (h->opcode == OPX_OP_EAGER)
		return opx_rx_eager(ep, h, pay);
	if (h->opcode >= OPX_OP_RMA_WRITE)
		return opx_rma_rx_packet(ep, h, pay);
	if (h->opcode >= OPX_OP_DONE)
		return opx_rndv_rx_packet(ep, e, pay);
	return opx_rx_table[h->opcode](ep, h, pay);
}

void opx_ep_progress_locked(struct opx_ep *ep)
{
	struct shim_rx *rx = ep->rx;
	int n;

	if (!ep->enabled)
		return;
	if (__builtin_expect(opx_rndv_pending(ep), 0))
		opx_rndv_progress(ep);
	if (__builtin_expect(ep->rma_busy, 0))
		opx_rma_progress(ep);
	for (n = 0; n < OPX_PROGRESS_BATCH; n++) {
		struct shim_rhq_entry *e = shim_rx_peek(rx);
		if (!e)
			break;
		if (opx_rx_packet(ep, e))
			break;
		shim_rx_release(rx, e);
	}
	/* Idle polling must not starve other ranks sharing a core. */
	if (n) {
		ep->idle = 0;
	} else if (++ep->idle >= (uint32_t)opx_env.spin_count) {
		ep->idle = 0;
		if (ep->rndv_busy || ep->rndv_rx_busy)
			opx_rndv_check_peers(ep);
		sched_yield();
	}
}
