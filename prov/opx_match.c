/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_match.c - the matching engine: posted and unexpected queues (one
 * pair for tagged, one for msg), peek/claim/discard, cancel, multi-recv.
 *
 * Queues are FIFO lists.  A message matches the first posted receive that
 * accepts it, and a receive matches the oldest unexpected message it
 * accepts, which together give MPI's non-overtaking rule.  The common case
 * (the head matches) is O(1).  Requests and unexpected descriptors come
 * from free lists so the steady state does not allocate.
 */
#include <stdlib.h>

#include "opx_ep.h"

#define OPX_POSTED_MAX (1u << 20) /* bound on posted receives per endpoint */

struct opx_rx_req *opx_req_get(struct opx_ep *ep)
{
	struct opx_rx_req *req;

	if (ep->posted_cnt >= OPX_POSTED_MAX)
		return NULL;
	if (!opx_list_empty(&ep->req_free)) {
		struct opx_list *n = ep->req_free.next;
		opx_list_remove(n);
		req = OPX_CONTAINER_OF(n, struct opx_rx_req, link);
	} else {
		req = malloc(sizeof(*req));
		if (!req)
			return NULL;
	}
	memset(req, 0, offsetof(struct opx_rx_req, iov));
	opx_list_init(&req->link);
	if (++ep->posted_cnt > ep->stats.posted_peak)
		ep->stats.posted_peak = ep->posted_cnt;
	return req;
}

void opx_req_put(struct opx_ep *ep, struct opx_rx_req *req)
{
	ep->posted_cnt--;
	opx_list_insert_head(&ep->req_free, &req->link);
}

/* len: payload bytes the descriptor will hold (counted against the bound) */
struct opx_ux *opx_ux_get(struct opx_ep *ep, size_t len)
{
	struct opx_ux *ux;
	size_t cost = sizeof(*ux) + (len > sizeof(ux->inl) ? len : 0);

	if (ep->ux_bytes + cost > opx_env.ux_max_bytes && ep->ux_bytes)
		return NULL; /* bound reached: the caller leaves the packet queued */
	if (!opx_list_empty(&ep->ux_free)) {
		struct opx_list *n = ep->ux_free.next;
		opx_list_remove(n);
		ux = OPX_CONTAINER_OF(n, struct opx_ux, link);
	} else {
		ux = malloc(sizeof(*ux));
		if (!ux)
			return NULL;
	}
	memset(ux, 0, offsetof(struct opx_ux, rts));
	ux->buf = ux->inl;
	if (len > sizeof(ux->inl)) {
		ux->buf = malloc(len);
		if (!ux->buf) {
			opx_list_insert_head(&ep->ux_free, &ux->link);
			return NULL;
		}
	}
	ux->len = len;
	opx_list_init(&ux->link);
	ep->ux_bytes += cost;
	return ux;
}

void opx_ux_put(struct opx_ep *ep, struct opx_ux *ux)
{
	size_t len = ux->rndv ? 0 : ux->len;

	ep->ux_bytes -= sizeof(*ux) + (len > sizeof(ux->inl) ? len : 0);
	if (ux->queued)
		ep->ux_cnt--;
	if (ux->buf != ux->inl)
		free(ux->buf);
	ux->buf = NULL;
	opx_list_insert_head(&ep->ux_free, &ux->link);
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
	struct opx_list *q = tagged ? &ep->posted_tag : &ep->posted_msg;
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
	struct opx_list *q = tagged ? &ep->ux_tag : &ep->ux_msg;
	struct opx_list *it;

	opx_list_foreach(q, it)
	{
		struct opx_ux *ux = OPX_CONTAINER_OF(it, struct opx_ux, link);
		if (tagged && ((ux->tag ^ tag) & ~ignore))
			continue;
		if (src != FI_ADDR_UNSPEC && ux->src != src) {
			/* arrived before its sender was inserted: ask again */
			if (!opx_src_is_anon(ux->src) ||
			    opx_av_src_locked(ep->av, (uint16_t)(ux->src >> 16), (uint16_t)ux->src) != src)
				continue;
			ux->src = src;
		}
		return ux;
	}
	return NULL;
}

size_t opx_iov_copy_to(const struct iovec *iov, size_t cnt, size_t off, const void *src, size_t len)
{
	const uint8_t *s = src;
	size_t done = 0;

	for (size_t i = 0; i < cnt && done < len; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t n = iov[i].iov_len - off;
		if (n > len - done)
			n = len - done;
		memcpy((uint8_t *)iov[i].iov_base + off, s + done, n);
		done += n;
		off = 0;
	}
	return done;
}

/* The part [off, off+len) of an iovec as an iovec (at most cnt entries). */
size_t opx_iov_slice(const struct iovec *iov, size_t cnt, size_t off, size_t len, struct iovec *out)
{
	size_t n = 0;

	for (size_t i = 0; i < cnt && len; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t take = iov[i].iov_len - off;
		if (take > len)
			take = len;
		out[n].iov_base = (uint8_t *)iov[i].iov_base + off;
		out[n].iov_len = take;
		n++;
		len -= take;
		off = 0;
	}
	return n;
}

/* A multi-recv buffer is released once the space left is below the
 * endpoint's FI_OPT_MIN_MULTI_RECV; messages that do not fit the space left
 * are truncated (reported with FI_ETRUNC). */
size_t opx_req_claim(struct opx_ep *ep, struct opx_rx_req *req, size_t len, size_t *cap)
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

/* FI_SOURCE_ERR: a message received whole from a source not in the AV.
 * Its address comes from the shim's record of the sending context; if
 * that is gone already, the completion is an ordinary one from
 * FI_ADDR_NOTAVAIL. */
static __attribute__((noinline)) bool opx_rx_report_src_err(struct opx_ep *ep, void *context,
							     uint64_t flags, size_t len, void *buf,
							     uint64_t data, uint64_t tag,
							     fi_addr_t src)
{
	struct shim_addr a;

	if (!ep->rx_cq || shim_addr_lookup(ep->domain->fabric->dev, (uint16_t)(src >> 16),
					   (uint16_t)src, &a))
		return false;
	opx_cq_report_src_err_locked(ep->rx_cq, context, flags, len, buf, data, tag, &a);
	opx_cntr_inc(ep->recv_cntr); /* the data was received */
	return true;
}

static void opx_rx_report(struct opx_ep *ep, void *context, uint64_t flags, size_t len, void *buf,
			  uint64_t data, uint64_t tag, fi_addr_t src, bool want_cq, int err,
			  size_t olen)
{
	if (__builtin_expect(opx_src_is_anon(src), 0)) {
		if (!err && ep->source_err &&
		    opx_rx_report_src_err(ep, context, flags, len, buf, data, tag, src))
			return;
		src = FI_ADDR_NOTAVAIL;
	}
	if (err) {
		if (ep->rx_cq)
			opx_cq_report_err_locked(ep->rx_cq, context, flags, len, buf, data, tag, olen,
						 err, -err, src);
		opx_cntr_inc_err(ep->recv_cntr);
		return;
	}
	if (ep->rx_cq && want_cq)
		opx_cq_report_locked(ep->rx_cq, context, flags, len, buf, data, tag, src);
	opx_cntr_inc(ep->recv_cntr);
}

/* The release of a multi-receive buffer reported on its own: fi_cq(3)
 * gives it FI_MULTI_RECV alone (no FI_RECV: it carries no data, and a
 * data completion never has length 0 unless a 0-byte message was sent),
 * buf at the start of the buffer.  Always reported: the application
 * needs it to repost, whatever its selective-completion settings. */
static void opx_multi_release(struct opx_ep *ep, struct opx_rx_req *req)
{
	if (ep->rx_cq)
		opx_cq_report_locked(ep->rx_cq, req->context, FI_MULTI_RECV, 0,
				     req->iov_count ? req->iov[0].iov_base : NULL, 0, 0,
				     FI_ADDR_NOTAVAIL);
}

void opx_rx_complete(struct opx_ep *ep, struct opx_rx_req *req, size_t off, size_t cap,
		     size_t msg_len, uint64_t tag, uint64_t data, uint8_t pflags, fi_addr_t src,
		     int err)
{
	uint64_t flags = FI_RECV | ((pflags & OPX_PF_TAGGED) ? FI_TAGGED : FI_MSG);
	size_t got = msg_len < cap ? msg_len : cap;
	bool multi = req->flags & FI_MULTI_RECV;
	bool want = !ep->rx_selective || (req->flags & FI_COMPLETION);
	void *buf = NULL;

	if (pflags & OPX_PF_CQDATA)
		flags |= FI_REMOTE_CQ_DATA;
	else
		data = 0;
	if (multi) {
		buf = req->iov_count ? (uint8_t *)req->iov[0].iov_base + off : NULL;
		req->inflight--;
		if (req->unlinked && !req->inflight)
			flags |= FI_MULTI_RECV;
	}
	if (!err && msg_len > cap)
		err = FI_ETRUNC;
	/* The release rides on this completion unless that one is
	 * suppressed (selective completion) or an error entry: then it is
	 * reported on its own, after it. */
	bool release = flags & FI_MULTI_RECV;
	bool release_apart = release && (err || !want);

	if (release_apart)
		flags &= ~FI_MULTI_RECV;
	opx_rx_report(ep, req->context, flags, got, buf, data, (pflags & OPX_PF_TAGGED) ? tag : 0, src,
		      want, err, msg_len > got ? msg_len - got : 0);
	if (release_apart)
		opx_multi_release(ep, req);
	if (!multi || release)
		opx_req_put(ep, req);
}

void opx_ux_deliver(struct opx_ep *ep, struct opx_rx_req *req, struct opx_ux *ux)
{
	size_t cap;
	size_t off = opx_req_claim(ep, req, ux->len, &cap);

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
	opx_rx_complete(ep, req, off, cap, ux->len, ux->tag, ux->data, ux->pflags, ux->src, 0);
	if (ux->ack) /* delivery complete: the data is placed now */
		opx_rndv_ack(ep, &ux->rts.src, ux->src, ux->cookie);
	opx_ux_put(ep, ux);
}

/* Drop an unexpected message nobody will receive (FI_DISCARD). */
static void opx_ux_discard(struct opx_ep *ep, struct opx_ux *ux)
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

static ssize_t opx_recv_peek(struct opx_ep *ep, void *context, uint64_t flags, fi_addr_t src,
			     uint64_t tag, uint64_t ignore, bool tagged)
{
	uint64_t cflags = FI_RECV | (tagged ? FI_TAGGED : FI_MSG);
	struct opx_ux *ux;

	opx_ep_progress_locked(ep);
	ux = opx_match_ux(ep, tagged, tag, ignore, src);
	if (!ux) {
		if (ep->rx_cq)
			opx_cq_report_err_locked(ep->rx_cq, context, cflags, 0, NULL, 0, tag, 0,
						 FI_ENOMSG, 0, FI_ADDR_NOTAVAIL);
		opx_cntr_inc_err(ep->recv_cntr);
		return 0;
	}
	if (ux->pflags & OPX_PF_CQDATA)
		cflags |= FI_REMOTE_CQ_DATA;
	if (ep->rx_cq)
		opx_cq_report_locked(ep->rx_cq, context, cflags, ux->len, NULL,
				     (ux->pflags & OPX_PF_CQDATA) ? ux->data : 0, tagged ? ux->tag : 0,
				     opx_src_public(ux->src));
	if (flags & (FI_CLAIM | FI_DISCARD))
		opx_list_remove(&ux->link);
	if (flags & FI_DISCARD)
		opx_ux_discard(ep, ux);
	else if (flags & FI_CLAIM)
		((struct fi_context *)context)->internal[0] = ux;
	return 0;
}

static ssize_t opx_recv_claimed(struct opx_ep *ep, struct opx_rx_req *req, uint64_t flags)
{
	struct fi_context *fctx = req->context;
	struct opx_ux *ux = fctx->internal[0];

	fctx->internal[0] = NULL;
	if (flags & FI_DISCARD) {
		uint64_t cflags = FI_RECV | ((ux->pflags & OPX_PF_TAGGED) ? FI_TAGGED : FI_MSG);
		if (ep->rx_cq && (!ep->rx_selective || (flags & FI_COMPLETION)))
			opx_cq_report_locked(ep->rx_cq, req->context, cflags, 0, NULL, 0,
					     (ux->pflags & OPX_PF_TAGGED) ? ux->tag : 0,
					     opx_src_public(ux->src));
		opx_cntr_inc(ep->recv_cntr);
		opx_ux_discard(ep, ux);
		opx_req_put(ep, req);
		return 0;
	}
	opx_ux_deliver(ep, req, ux);
	return 0;
}

ssize_t opx_ep_recv_locked(struct opx_ep *ep, const struct iovec *iov, size_t cnt, fi_addr_t src,
			   uint64_t tag, uint64_t ignore, void *context, uint64_t flags,
			   bool tagged)
{
	struct opx_rx_req *req;
	struct opx_ux *ux;
	size_t len = 0;

	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	if (cnt > OPX_IOV_LIMIT || (cnt && !iov))
		return -FI_EINVAL;
	for (size_t i = 0; i < cnt; i++) {
		/* a length sum that wraps size_t is no length at all */
		if ((!iov[i].iov_base && iov[i].iov_len) || iov[i].iov_len > SIZE_MAX - len)
			return -FI_EINVAL;
		len += iov[i].iov_len;
	}
	if (!(ep->caps & FI_DIRECTED_RECV))
		src = FI_ADDR_UNSPEC;
	else if (src != FI_ADDR_UNSPEC && (src >= ep->av->count || !ep->av->table[src].valid))
		return -FI_EINVAL;
	if ((flags & FI_MULTI_RECV) && (tagged || !(ep->caps & FI_MULTI_RECV)))
		return -FI_EINVAL;
	/* a receive may complete at once (unexpected message, peek) */
	if (!opx_cq_room_locked(ep->rx_cq, 1))
		return -FI_EAGAIN;
	if (flags & (FI_PEEK | FI_CLAIM)) {
		if ((flags & FI_CLAIM) && !context)
			return -FI_EINVAL;
		if (flags & FI_PEEK)
			return opx_recv_peek(ep, context, flags, src, tag, ignore, tagged);
		if (!((struct fi_context *)context)->internal[0])
			return -FI_EINVAL;
	}

	req = opx_req_get(ep);
	if (!req)
		return -FI_EAGAIN;
	req->context = context;
	req->flags = flags | (tagged ? FI_TAGGED : FI_MSG);
	req->tag = tag;
	req->ignore = ignore;
	req->src = src;
	req->len = len;
	req->iov_count = cnt;
	for (size_t i = 0; i < cnt; i++)
		req->iov[i] = iov[i];
	if (flags & FI_CLAIM)
		return opx_recv_claimed(ep, req, flags);

	if (flags & FI_MULTI_RECV) {
		/* the buffer joins the queue first so claims can unlink it */
		opx_list_insert_tail(&ep->posted_msg, &req->link);
		req->inflight++; /* hold it while draining the unexpected queue */
		while (!req->unlinked && (ux = opx_match_ux(ep, false, 0, 0, src))) {
			opx_list_remove(&ux->link);
			opx_ux_deliver(ep, req, ux);
		}
		req->inflight--;
		if (req->unlinked && !req->inflight) {
			/* fully consumed by unexpected messages already reported */
			opx_multi_release(ep, req);
			opx_req_put(ep, req);
		}
		return 0;
	}
	ux = opx_match_ux(ep, tagged, tag, ignore, src);
	if (ux) {
		opx_list_remove(&ux->link);
		opx_ux_deliver(ep, req, ux);
		return 0;
	}
	opx_list_insert_tail(tagged ? &ep->posted_tag : &ep->posted_msg, &req->link);
	return 0;
}

int opx_ep_cancel_locked(struct opx_ep *ep, void *context)
{
	struct opx_list *qs[2] = {&ep->posted_tag, &ep->posted_msg};
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
				opx_cq_report_err_locked(ep->rx_cq, context, flags, 0, NULL, 0,
							 req->tag, 0, FI_ECANCELED, 0,
							 FI_ADDR_NOTAVAIL);
			opx_cntr_inc_err(ep->recv_cntr);
			opx_req_put(ep, req);
			return 0;
		}
	}
	return -FI_ENOENT;
}

static void opx_free_list(struct opx_list *l, size_t off)
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
	struct opx_list *uxq[2] = {&ep->ux_tag, &ep->ux_msg};
	struct opx_list *it, *tmp;

	for (int q = 0; q < 2; q++) {
		opx_list_foreach_safe(uxq[q], it, tmp)
		{
			struct opx_ux *ux = OPX_CONTAINER_OF(it, struct opx_ux, link);
			opx_list_remove(it);
			if (ux == ep->mp.ux)
				ep->mp.ux = NULL;
			opx_ux_put(ep, ux);
		}
	}
	if (ep->mp.ux)
		opx_ux_put(ep, ep->mp.ux);
	ep->mp.ux = NULL;
	opx_free_list(&ep->posted_tag, offsetof(struct opx_rx_req, link));
	opx_free_list(&ep->posted_msg, offsetof(struct opx_rx_req, link));
	opx_free_list(&ep->req_free, offsetof(struct opx_rx_req, link));
	opx_free_list(&ep->ux_free, offsetof(struct opx_ux, link));
}
