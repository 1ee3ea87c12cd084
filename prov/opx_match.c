/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_match.c - the matching engine: posted and unexpected queues (one
 * pair for tagged, one for msg), peek/claim/discard, cancel, multi-recv.
 *
 * Queues are FIFO lists.  A message matches the first posted receive that
 * accepts it, and a receive matches the oldest unexpected message it
 * accepts, which together give MPI's non-overtaking rule.  The common case
 * (the head matches) is O(1).  Requests come from a free list so the
 * steady state does not allocate; unexpected descriptors and their bound
 * are opx_ux.c's.
 */
#include <stdlib.h>

#include "opx_complete.h"
#include "opx_cq.h"
#include "opx_ep.h"
#include "opx_rndv_api.h"
#include "opx_ux.h"

#define OPX_POSTED_MAX (1u << 20) /* bound on posted receives per endpoint */

struct opx_rx_req *opx_match_req_get(struct opx_ep *ep)
{
	struct opx_rx_req *req;

	if (ep->match.posted_cnt >= OPX_POSTED_MAX)
		return NULL;
	if (!opx_list_empty(&ep->match.req_free)) {
		struct opx_list *n = ep->match.req_free.next;
		opx_list_remove(n);
		req = OPX_CONTAINER_OF(n, struct opx_rx_req, link);
	} else {
		req = malloc(sizeof(*req));
		if (!req)
			return NULL;
	}
	memset(req, 0, offsetof(struct opx_rx_req, iov));
	opx_list_init(&req->link);
	if (++ep->match.posted_cnt > ep->tel.stats.posted_peak)
		ep->tel.stats.posted_peak = ep->match.posted_cnt;
	return req;
}

static inline bool opx_match_one(const struct opx_rx_req *req, bool tagged, uint64_t tag,
				 fi_addr_t src)
{
	if (tagged && ((req->tag ^ tag) & ~req->ignore))
		return false;
	return req->src == FI_ADDR_UNSPEC || req->src == src;
}

struct opx_rx_req *opx_match_posted(struct opx_ep *ep, bool tagged, uint64_t tag, fi_addr_t src)
{
	struct opx_list *q = tagged ? &ep->match.posted_tag : &ep->match.posted_msg;
	struct opx_list *it;

	opx_list_foreach(q, it)
	{
		struct opx_rx_req *req = OPX_CONTAINER_OF(it, struct opx_rx_req, link);
		if (opx_match_one(req, tagged, tag, src)) {
			if (!(req->flags & FI_MULTI_RECV))
				opx_list_remove(&req->link);
			return req;
		}
	}
	return NULL;
}

static struct opx_ux *opx_match_ux(struct opx_ep *ep, bool tagged, uint64_t tag, uint64_t ignore,
				   fi_addr_t src)
{
	struct opx_list *q = tagged ? &ep->match.ux_tag : &ep->match.ux_msg;
	struct opx_list *it;

	opx_list_foreach(q, it)
	{
		struct opx_ux *ux = OPX_CONTAINER_OF(it, struct opx_ux, link);
		if (tagged && ((ux->tag ^ tag) & ~ignore))
			continue;
		if (src != FI_ADDR_UNSPEC && ux->src != src) {
			/* arrived before its sender was inserted: ask again */
			if (!opx_ep_src_is_anon(ux->src) ||
			    opx_av_src_locked(ep->av, (uint16_t)(ux->src >> 16), (uint16_t)ux->src) != src)
				continue;
			ux->src = src;
		}
		return ux;
	}
	return NULL;
}

/* A multi-recv buffer is released once the space left is below the
 * endpoint's FI_OPT_MIN_MULTI_RECV; messages that do not fit the space left
 * are truncated (reported with FI_ETRUNC). */
size_t opx_match_req_claim(struct opx_ep *ep, struct opx_rx_req *req, size_t len, size_t *cap)
{
	size_t off;

	if (!(req->flags & FI_MULTI_RECV)) {
		*cap = req->len;
		return 0;
	}
	off = req->used;
	*cap = req->len - req->used;
	req->used += len < *cap ? len : *cap;
	req->inflight++;
	/* a full buffer is released even with FI_OPT_MIN_MULTI_RECV 0: a
	 * message claiming 0 bytes of it would complete with length 0 */
	if (!req->unlinked &&
	    (req->len - req->used < ep->min_multi_recv || req->used == req->len)) {
		opx_list_remove(&req->link);
		req->unlinked = true;
	}
	return off;
}

void opx_match_ux_deliver(struct opx_ep *ep, struct opx_rx_req *req, struct opx_ux *ux)
{
	size_t cap;
	size_t off = opx_match_req_claim(ep, req, ux->len, &cap);

	if (ux->rndv) {
		if (!opx_rndv_match(ep, req, off, cap, ux))
			opx_ux_put(ep, ux);
		return;
	}
	if (ux->rcvd < ux->len) {
		/* packets still arriving: the reassembly finishes the delivery */
		ux->waiting = req;
		ux->waiting_off = off;
		ux->waiting_cap = cap;
		return;
	}
	opx_iov_copy_to(req->iov, req->iov_count, off, ux->buf, ux->len < cap ? ux->len : cap);
	opx_complete_rx(ep, req, off, cap, ux->len, ux->tag, ux->data, ux->pflags, ux->src, 0);
	if (ux->ack) /* delivery complete: the data is placed now */
		opx_rndv_ack(ep, &ux->rts.src, ux->src, ux->cookie);
	opx_ux_put(ep, ux);
}

/* Drop an unexpected message nobody will receive (FI_DISCARD). */
static void opx_match_ux_discard(struct opx_ep *ep, struct opx_ux *ux)
{
	if (ux->rndv) {
		opx_rndv_discard(ep, ux);
		opx_ux_put(ep, ux);
	} else if (ux->rcvd < ux->len) {
		ux->discard = true; /* freed by the reassembly */
	} else {
		if (ux->ack) /* consumed by the application: the sender completes */
			opx_rndv_ack(ep, &ux->rts.src, ux->src, ux->cookie);
		opx_ux_put(ep, ux);
	}
}

static ssize_t opx_match_recv_peek(struct opx_ep *ep, void *context, uint64_t flags, fi_addr_t src,
				   uint64_t tag, uint64_t ignore, bool tagged)
{
	uint64_t cflags = FI_RECV | (tagged ? FI_TAGGED : FI_MSG);
	struct opx_ux *ux;

	/* the caller progressed first (opx_msg_recv_common) */
	ux = opx_match_ux(ep, tagged, tag, ignore, src);
	if (!ux) {
		if (ep->rx_cq)
			opx_complete_report_err_locked(ep->rx_cq, context, cflags, 0, NULL, 0, tag,
						       0, FI_ENOMSG, 0, FI_ADDR_NOTAVAIL);
		opx_cq_cntr_inc_err(ep->recv_cntr);
		return 0;
	}
	if (ux->pflags & OPX_PF_CQDATA)
		cflags |= FI_REMOTE_CQ_DATA;
	if (ep->rx_cq)
		opx_complete_report_locked(ep->rx_cq, context, cflags, ux->len, NULL,
					   (ux->pflags & OPX_PF_CQDATA) ? ux->data : 0,
					   tagged ? ux->tag : 0, opx_ep_src_public(ux->src));
	if (flags & (FI_CLAIM | FI_DISCARD))
		opx_list_remove(&ux->link);
	if (flags & FI_DISCARD)
		opx_match_ux_discard(ep, ux);
	else if (flags & FI_CLAIM)
		((struct fi_context *)context)->internal[0] = ux;
	return 0;
}

static ssize_t opx_match_recv_claimed(struct opx_ep *ep, struct opx_rx_req *req, uint64_t flags)
{
	struct fi_context *fctx = req->context;
	struct opx_ux *ux = fctx->internal[0];

	fctx->internal[0] = NULL;
	if (flags & FI_DISCARD) {
		uint64_t cflags = FI_RECV | ((ux->pflags & OPX_PF_TAGGED) ? FI_TAGGED : FI_MSG);
		if (ep->rx_cq && (!ep->rx_selective || (flags & FI_COMPLETION)))
			opx_complete_report_locked(ep->rx_cq, req->context, cflags, 0, NULL, 0,
						   (ux->pflags & OPX_PF_TAGGED) ? ux->tag : 0,
						   opx_ep_src_public(ux->src));
		opx_cq_cntr_inc(ep->recv_cntr);
		opx_match_ux_discard(ep, ux);
		opx_ep_req_put(ep, req);
		return 0;
	}
	opx_match_ux_deliver(ep, req, ux);
	return 0;
}

ssize_t opx_match_recv_locked(struct opx_ep *ep, const struct iovec *iov, size_t cnt, fi_addr_t src,
			      uint64_t tag, uint64_t ignore, void *context, uint64_t flags,
			      bool tagged)
{
	OPX_ASSERT_LOCKED(&ep->domain->lock);
	struct opx_rx_req *req;
	struct opx_ux *ux;
	size_t len = 0;

	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	if (ep->sep_role) {
		/* a transmit context receives nothing; a receive context
		 * enabled without a CQ or counter has nowhere to complete */
		if (ep->sep_role == OPX_SEP_TX)
			return -FI_EOPNOTSUPP;
		if (!ep->rx_cq && !ep->recv_cntr)
			return -FI_ENOCQ;
	}
	if (cnt > OPX_IOV_LIMIT || (cnt && !iov))
		return -FI_EINVAL;
	if (!opx_iov_sum(iov, cnt, &len))
		return -FI_EINVAL;
	if (!(ep->caps & FI_DIRECTED_RECV))
		src = FI_ADDR_UNSPEC;
	else if (src != FI_ADDR_UNSPEC) {
		/* a scalable peer sends from any of its contexts as its one
		 * fi_addr_t: a receive directed at one of its receive
		 * contexts (fi_rx_addr) takes what that peer sends */
		src = opx_av_base_locked(ep->av, src);
		if (src == FI_ADDR_NOTAVAIL)
			return -FI_EINVAL;
	}
	if ((flags & FI_MULTI_RECV) && (tagged || !(ep->caps & FI_MULTI_RECV)))
		return -FI_EINVAL;
	/* a receive may complete at once (unexpected message, peek) */
	if (!opx_cq_room_locked(ep->rx_cq, 1))
		return -FI_EAGAIN;
	if (flags & (FI_PEEK | FI_CLAIM)) {
		if ((flags & FI_CLAIM) && !context)
			return -FI_EINVAL;
		if (flags & FI_PEEK)
			return opx_match_recv_peek(ep, context, flags, src, tag, ignore, tagged);
		if (!((struct fi_context *)context)->internal[0])
			return -FI_EINVAL;
	}

	req = opx_match_req_get(ep);
	if (!req)
		return -FI_EAGAIN;
	req->context = context;
	req->flags = flags | (tagged ? FI_TAGGED : FI_MSG);
	req->tag = tag;
	req->ignore = ignore;
	req->src = src;
	req->len = len;
	req->iov_count = cnt;
	opx_iov_copy(req->iov, iov, cnt);
	if (flags & FI_CLAIM)
		return opx_match_recv_claimed(ep, req, flags);

	if (flags & FI_MULTI_RECV) {
		/* the buffer joins the queue first so claims can unlink it */
		opx_list_insert_tail(&ep->match.posted_msg, &req->link);
		req->inflight++; /* hold it while draining the unexpected queue */
		while (!req->unlinked && (ux = opx_match_ux(ep, false, 0, 0, src))) {
			opx_list_remove(&ux->link);
			opx_match_ux_deliver(ep, req, ux);
		}
		req->inflight--;
		if (req->unlinked && !req->inflight) {
			/* fully consumed by unexpected messages already reported */
			opx_complete_multi_release(ep, req);
			opx_ep_req_put(ep, req);
		}
		return 0;
	}
	ux = opx_match_ux(ep, tagged, tag, ignore, src);
	if (ux) {
		opx_list_remove(&ux->link);
		opx_match_ux_deliver(ep, req, ux);
		return 0;
	}
	opx_list_insert_tail(tagged ? &ep->match.posted_tag : &ep->match.posted_msg, &req->link);
	return 0;
}

int opx_match_cancel_locked(struct opx_ep *ep, void *context)
{
	OPX_ASSERT_LOCKED(&ep->domain->lock);
	struct opx_list *qs[2] = {&ep->match.posted_tag, &ep->match.posted_msg};
	struct opx_list *it;

	for (int q = 0; q < 2; q++) {
		opx_list_foreach(qs[q], it)
		{
			struct opx_rx_req *req = OPX_CONTAINER_OF(it, struct opx_rx_req, link);
			uint64_t flags;

			if (req->context != context || req->inflight)
				continue;
			opx_list_remove(&req->link);
			flags = FI_RECV | (req->flags & (FI_TAGGED | FI_MSG | FI_MULTI_RECV));
			if (ep->rx_cq)
				opx_complete_report_err_locked(ep->rx_cq, context, flags, 0, NULL,
							       0, req->tag, 0, FI_ECANCELED, 0,
							       FI_ADDR_NOTAVAIL);
			opx_cq_cntr_inc_err(ep->recv_cntr);
			opx_ep_req_put(ep, req);
			return 0;
		}
	}
	return -FI_ENOENT;
}

static void opx_match_free_list(struct opx_list *l, size_t off)
{
	struct opx_list *it, *tmp;

	opx_list_foreach_safe(l, it, tmp)
	{
		opx_list_remove(it);
		free((char *)it - off);
	}
}

void opx_match_cleanup(struct opx_ep *ep)
{
	struct opx_list *uxq[2] = {&ep->match.ux_tag, &ep->match.ux_msg};
	struct opx_list *it, *tmp;

	for (int q = 0; q < 2; q++) {
		opx_list_foreach_safe(uxq[q], it, tmp)
		{
			struct opx_ux *ux = OPX_CONTAINER_OF(it, struct opx_ux, link);
			opx_list_remove(it);
			if (ux == ep->match.mp.ux)
				ep->match.mp.ux = NULL;
			opx_ux_put(ep, ux);
		}
	}
	if (ep->match.mp.ux)
		opx_ux_put(ep, ep->match.mp.ux);
	ep->match.mp.ux = NULL;
	opx_match_free_list(&ep->match.posted_tag, offsetof(struct opx_rx_req, link));
	opx_match_free_list(&ep->match.posted_msg, offsetof(struct opx_rx_req, link));
	opx_match_free_list(&ep->match.req_free, offsetof(struct opx_rx_req, link));
	opx_match_free_list(&ep->match.ux_free, offsetof(struct opx_ux, link));
	opx_ux_src_fini(ep);
}
