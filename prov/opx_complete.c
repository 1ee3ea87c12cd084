/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_complete.c - the bottom of the data path: an operation is done, and
 * the application hears of it.  A send's completion (opx_complete_tx) and
 * a receive's (opx_complete_rx, with FI_MULTI_RECV's buffer release) become
 * a CQ entry or error entry, subject to selective completion, and a
 * counter increment.  Called by matching, rendezvous, one-sided and the
 * send paths; it holds the CQ's writer side (the ring grows, a full ring
 * that cannot grow turns completions into FI_EOVERRUN errors) and calls
 * nothing above it.
 */
#include <stdlib.h>
#include <string.h>

#include "opx_addr.h"
#include "opx_complete.h"
#include "opx_cq.h"
#include "opx_ep.h"

/* ---------------------------------------------------------------------
 * The CQ's writer side (hot path): its ring and error list, which the
 * reader side (opx_cq.c, fi_ops_cq) drains.
 */
static __attribute__((noinline)) int opx_complete_grow(struct opx_cq *cq)
{
	size_t old_n = cq->mask + 1;
	size_t new_n = old_n * 2;
	size_t cap = cq->cap;
	struct opx_cq_slot *ring;

	if (cap && new_n > cap)
		return -FI_EAGAIN;
	ring = malloc(new_n * sizeof(*ring));
	if (!ring) {
		OPX_WARN(FI_LOG_CQ, "cannot grow CQ ring to %zu entries\n", new_n);
		return -FI_ENOMEM;
	}
	/* Unwrap: the live entries become ring[0 .. n-1] in order. */
	size_t n = (size_t)(cq->tail - cq->head);
	for (size_t i = 0; i < n; i++)
		ring[i] = cq->ring[(cq->head + i) & cq->mask];
	free(cq->ring);
	cq->ring = ring;
	cq->mask = new_n - 1;
	/* Error positions are absolute, so shift them with the ring. */
	struct opx_list *it;
	opx_list_foreach(&cq->err_list, it)
	{
		struct opx_cq_err_node *en = OPX_CONTAINER_OF(it, struct opx_cq_err_node, err.link);
		en->seq -= cq->head;
	}
	cq->tail -= cq->head;
	cq->head = 0;
	return 0;
}

bool opx_complete_make_room_locked(struct opx_cq *cq, size_t n)
{
	OPX_ASSERT_LOCKED(&cq->domain->lock);
	while (cq->tail - cq->head + n > cq->mask + 1)
		if (opx_complete_grow(cq))
			return false;
	return true;
}

void opx_complete_set_cap(struct opx_cq *cq, size_t max_entries)
{
	size_t cap = 0;

	if (max_entries) {
		cap = 1;
		while (cap < max_entries)
			cap *= 2;
		if (cap < cq->mask + 1)
			cap = cq->mask + 1; /* the ring never shrinks */
	}
	cq->cap = cap;
}

/* The ring is full and cannot grow: keep the completion as an error
 * entry the application reads with fi_cq_readerr (FI_EOVERRUN, the
 * rest of the entry as it would have been). */
static __attribute__((noinline, cold)) int opx_complete_overrun(struct opx_cq *cq, void *op_context,
								uint64_t flags, size_t len,
								void *buf, uint64_t data,
								uint64_t tag, fi_addr_t src)
{
	if (!cq->overruns++)
		OPX_WARN(FI_LOG_CQ, "CQ ring full and cannot grow: completions are reported "
				    "as FI_EOVERRUN errors; read the CQ more often\n");
	return opx_complete_report_err_locked(cq, op_context, flags, len, buf, data, tag, 0,
					      FI_EOVERRUN, 0, src);
}

int opx_complete_report_locked(struct opx_cq *cq, void *op_context, uint64_t flags, size_t len,
			       void *buf, uint64_t data, uint64_t tag, fi_addr_t src)
{
	OPX_ASSERT_LOCKED(&cq->domain->lock);
	if (__builtin_expect(cq->tail - cq->head > cq->mask, 0)) {
		if (opx_complete_grow(cq))
			return opx_complete_overrun(cq, op_context, flags, len, buf, data, tag,
						    src);
	}
	struct opx_cq_slot *s = &cq->ring[cq->tail & cq->mask];

	s->e.op_context = op_context;
	s->e.flags = flags;
	s->e.len = len;
	s->e.buf = buf;
	s->e.data = data;
	s->e.tag = tag;
	s->src = src;
	cq->tail++;
	return 0;
}

/* A new error entry with the fields every completion has, queued after
 * the entries already in the ring; the caller fills in the error. */
static struct opx_cq_err_node *opx_complete_err_queue(struct opx_cq *cq, void *op_context,
						      uint64_t flags, size_t len, void *buf,
						      uint64_t data, uint64_t tag, fi_addr_t src)
{
	struct opx_cq_err_node *en = calloc(1, sizeof(*en));

	if (!en)
		return NULL;
	en->err.e.op_context = op_context;
	en->err.e.flags = flags;
	en->err.e.len = len;
	en->err.e.buf = buf;
	en->err.e.data = data;
	en->err.e.tag = tag;
	en->err.src = src;
	en->seq = cq->tail;
	opx_list_insert_tail(&cq->err_list, &en->err.link);
	return en;
}

int opx_complete_report_err_locked(struct opx_cq *cq, void *op_context, uint64_t flags, size_t len,
				   void *buf, uint64_t data, uint64_t tag, size_t olen, int err,
				   int prov_errno, fi_addr_t src)
{
	OPX_ASSERT_LOCKED(&cq->domain->lock);
	struct opx_cq_err_node *en =
		opx_complete_err_queue(cq, op_context, flags, len, buf, data, tag, src);

	if (!en) {
		OPX_WARN(FI_LOG_CQ, "cannot queue error completion (err %d)\n", err);
		return -FI_ENOMEM;
	}
	/* err is a positive code per fi_cq_err_entry; accept -FI_E* too */
	en->err.e.err = err < 0 ? -err : err;
	en->err.e.olen = olen;
	en->err.e.prov_errno = prov_errno;
	/* No provider data: readerr must then leave the caller's err_data
	 * buffer alone (fi_cq_strerror works from prov_errno). */
	en->err.e.err_data = NULL;
	en->err.e.err_data_size = 0;
	return 0;
}

int opx_complete_report_src_err_locked(struct opx_cq *cq, void *op_context, uint64_t flags,
				       size_t len, void *buf, uint64_t data, uint64_t tag,
				       const void *addr, size_t addrlen)
{
	OPX_ASSERT_LOCKED(&cq->domain->lock);
	struct opx_cq_err_node *en;

	static_assert(sizeof(struct shim_addr) <= OPX_CQ_ERR_DATA_MAX, "an address fits err_data");
	if (addrlen > OPX_CQ_ERR_DATA_MAX)
		return -FI_EINVAL;
	en = opx_complete_err_queue(cq, op_context, flags, len, buf, data, tag, FI_ADDR_NOTAVAIL);
	if (!en) {
		OPX_WARN(FI_LOG_CQ, "cannot queue a source-address error completion\n");
		return -FI_ENOMEM;
	}
	/* fi_cq(3): err_data is the source address, in the domain's
	 * address format, ready for fi_av_insert */
	en->err.e.err = FI_EADDRNOTAVAIL;
	memcpy(en->data, addr, addrlen);
	en->err.e.err_data = en->data;
	en->err.e.err_data_size = addrlen;
	return 0;
}

void opx_complete_tx(struct opx_ep *ep, void *context, uint64_t flags, size_t len, int err)
{
	uint64_t cflags = FI_SEND | (flags & (FI_TAGGED | FI_MSG));

	if (__builtin_expect(flags & OPX_TXF_BOUNCE, 0)) {
		struct opx_bounce *b = context;

		context = b->context;
		free(b);
	}

	if (err) {
		if (ep->tx_cq)
			opx_complete_report_err_locked(ep->tx_cq, context, cflags, len, NULL, 0, 0,
						       0, err, -err, FI_ADDR_NOTAVAIL);
		opx_cq_cntr_inc_err(ep->send_cntr);
		return;
	}
	if (ep->tx_cq && !(flags & OPX_TX_NO_CQ) && (!ep->tx_selective || (flags & FI_COMPLETION)))
		opx_complete_report_locked(ep->tx_cq, context, cflags, 0, NULL, 0, 0,
					   FI_ADDR_NOTAVAIL);
	opx_cq_cntr_inc(ep->send_cntr);
}

/* FI_SOURCE_ERR: a message received whole from a source not in the AV.
 * Its address comes from the shim's record of the sending context; if
 * that is gone already, the completion is an ordinary one from
 * FI_ADDR_NOTAVAIL. */
static __attribute__((noinline)) bool opx_complete_rx_src_err(struct opx_ep *ep, void *context,
							      uint64_t flags, size_t len, void *buf,
							      uint64_t data, uint64_t tag,
							      fi_addr_t src)
{
	uint8_t name[sizeof(struct shim_addr)];
	size_t namelen = sizeof(name);
	struct shim_addr a;

	if (!ep->rx_cq || opx_av_src_addr(ep->domain->fabric->dev, ep->shim, (uint16_t)(src >> 16),
					  (uint16_t)src, &a))
		return false;
	/* in a socket format, only a sender whose socket we know has a name
	 * (a peer of this host on shared memory: its context does not say) */
	if (opx_addr_is_sock(ep->domain->addr_format) && (!a.ipv4 || !a.udp_port))
		return false;
	(void)opx_addr_export(ep->domain->addr_format, &a, name, &namelen);
	opx_complete_report_src_err_locked(ep->rx_cq, context, flags, len, buf, data, tag, name,
					   namelen);
	opx_cq_cntr_inc(ep->recv_cntr); /* the data was received */
	return true;
}

static void opx_complete_rx_report(struct opx_ep *ep, void *context, uint64_t flags, size_t len,
				   void *buf, uint64_t data, uint64_t tag, fi_addr_t src,
				   bool want_cq, int err, size_t olen)
{
	/* FI_MSG_PREFIX: the length counts the prefix space before the data */
	if (__builtin_expect(ep->msg_prefix != 0, 0) && (flags & FI_RECV))
		len += ep->msg_prefix;
	if (__builtin_expect(opx_ep_src_is_anon(src), 0)) {
		if (!err && ep->source_err &&
		    opx_complete_rx_src_err(ep, context, flags, len, buf, data, tag, src))
			return;
		src = FI_ADDR_NOTAVAIL;
	}
	if (err) {
		if (ep->rx_cq)
			opx_complete_report_err_locked(ep->rx_cq, context, flags, len, buf, data,
						       tag, olen, err, -err, src);
		opx_cq_cntr_inc_err(ep->recv_cntr);
		return;
	}
	if (ep->rx_cq && want_cq)
		opx_complete_report_locked(ep->rx_cq, context, flags, len, buf, data, tag, src);
	opx_cq_cntr_inc(ep->recv_cntr);
}

/* The release of a multi-receive buffer reported on its own: fi_cq(3)
 * gives it FI_MULTI_RECV alone (no FI_RECV: it carries no data, and a
 * data completion never has length 0 unless a 0-byte message was sent),
 * buf at the start of the buffer.  Always reported: the application
 * needs it to repost, whatever its selective-completion settings. */
void opx_complete_multi_release(struct opx_ep *ep, struct opx_rx_req *req)
{
	if (ep->rx_cq)
		opx_complete_report_locked(ep->rx_cq, req->context, FI_MULTI_RECV, 0,
					   req->iov_count ? req->iov[0].iov_base : NULL, 0, 0,
					   FI_ADDR_NOTAVAIL);
}

void opx_complete_rx(struct opx_ep *ep, struct opx_rx_req *req, size_t off, size_t cap,
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
	opx_complete_rx_report(ep, req->context, flags, got, buf, data,
			       (pflags & OPX_PF_TAGGED) ? tag : 0, src, want, err,
			       msg_len > got ? msg_len - got : 0);
	if (release_apart)
		opx_complete_multi_release(ep, req);
	if (!multi || release)
		opx_ep_req_put(ep, req);
}
