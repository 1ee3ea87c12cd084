/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_complete.c - the bottom of the data path: an operation is done, and
 * the application hears of it.  A send's completion (opx_ep_tx_report) and
 * a receive's (opx_rx_complete, with FI_MULTI_RECV's buffer release) become
 * a CQ entry or error entry, subject to selective completion, and a
 * counter increment.  Called by matching, rendezvous and the send paths;
 * calls only the CQ and counter objects.
 */
#include <stdlib.h>

#include "opx_addr.h"
#include "opx_ep.h"

void opx_ep_tx_report(struct opx_ep *ep, void *context, uint64_t flags, size_t len, int err)
{
	uint64_t cflags = FI_SEND | (flags & (FI_TAGGED | FI_MSG));

	if (__builtin_expect(flags & OPX_TXF_BOUNCE, 0)) {
		struct opx_bounce *b = context;

		context = b->context;
		free(b);
	}

	if (err) {
		if (ep->tx_cq)
			opx_cq_report_err_locked(ep->tx_cq, context, cflags, len, NULL, 0, 0, 0, err,
						 -err, FI_ADDR_NOTAVAIL);
		opx_cntr_inc_err(ep->send_cntr);
		return;
	}
	if (ep->tx_cq && !(flags & OPX_TX_NO_CQ) && (!ep->tx_selective || (flags & FI_COMPLETION)))
		opx_cq_report_locked(ep->tx_cq, context, cflags, 0, NULL, 0, 0, FI_ADDR_NOTAVAIL);
	opx_cntr_inc(ep->send_cntr);
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
	opx_cq_report_src_err_locked(ep->rx_cq, context, flags, len, buf, data, tag, name, namelen);
	opx_cntr_inc(ep->recv_cntr); /* the data was received */
	return true;
}

static void opx_rx_report(struct opx_ep *ep, void *context, uint64_t flags, size_t len, void *buf,
			  uint64_t data, uint64_t tag, fi_addr_t src, bool want_cq, int err,
			  size_t olen)
{
	/* FI_MSG_PREFIX: the length counts the prefix space before the data */
	if (__builtin_expect(ep->msg_prefix != 0, 0) && (flags & FI_RECV))
		len += ep->msg_prefix;
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
void opx_rx_multi_release(struct opx_ep *ep, struct opx_rx_req *req)
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
		opx_rx_multi_release(ep, req);
	if (!multi || release)
		opx_req_put(ep, req);
}
