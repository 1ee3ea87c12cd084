/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rma_target.c - the one-sided engine, target side: executing RMA
 * and atomic requests on this endpoint's memory regions, the CMA request
 * service (a grant, or the copy into the initiator), the refusal of
 * multi-chunk operations, and the replies with their queue.  The wire
 * protocol is described in opx_rma.h; the initiator side is opx_rma.c.
 *
 * Data flow.  Request packets come in from the receive path (opx_rx_ops[]
 * passes them to opx_rma_target_rx_request); each is answered by one
 * reply packet to its initiator, sent at once or queued here and sent
 * from opx_rma_progress (opx_rma_target_flush_replies).  This file calls
 * nothing in opx_rma.c, so what both sides need lives here: the
 * endpoint's state, allocated by whichever side needs it first
 * (opx_rma_target_state), and whether CMA may be used with a peer
 * (opx_rma_target_cma_peer).
 *
 * Target.  Requests are executed by the owner's progress, one at a time,
 * in arrival order.  Key, range and access are checked first
 * (opx_mr_resolve_locked); only then is memory touched.  Each request is
 * answered by one reply; when the initiator's ring has no credits the
 * reply is copied to a small queue and sent from progress, so a target
 * never blocks on an initiator that is itself waiting for it.  The
 * initiator need not be in the target's address vector: the reply goes to
 * the peer the shim knows as that sender (opx_rndv_src_peer); a sender it
 * cannot name is dropped and counted.
 */
#include <stdlib.h>
#include <string.h>

#include "opx_cq.h"
#include "opx_drop.h"
#include "opx_ep.h"
#include "opx_rma.h"
#include "opx_rndv_api.h"

struct opx_rma_state *opx_rma_target_state(struct opx_ep *ep)
{
	struct opx_rma_state *st = ep->rma;

	if (__builtin_expect(st != NULL, 1))
		return st;
	st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->scratch = malloc(SHIM_MTU_MAX);
	if (!st->scratch) {
		free(st);
		return NULL;
	}
	for (size_t i = OPX_RMA_OPS; i-- > 0;) {
		st->ops[i].next_free = st->free;
		st->free = &st->ops[i];
	}
	opx_list_init(&st->queue);
	opx_list_init(&st->replies);
	ep->rma = st;
	return st;
}

/* CMA needs the process the shim verified behind the peer (opx_rndv_cma_peer).
 * A peer on the udp wire has none, on another host or on this one
 * (FI_OPX_WIRE=udp): its pid is not ours to use.  Nor has one in another
 * pid namespace.  With those, large operations go by chunks. */
bool opx_rma_target_cma_peer(const struct shim_peer *peer)
{
	pid_t pid;

	return shim_peer_cma_pid_recorded(peer, &pid) == 0;
}

/* ---------------------------------------------------------------------
 * Target: replies.
 */
static int opx_rma_reply_try(struct opx_ep *ep, struct shim_peer *peer, uint64_t tag,
			     uint64_t status, uint8_t pflags, const struct iovec *src, size_t cnt,
			     uint32_t len)
{
	struct shim_pio_resv r;
	struct shim_rhq_entry *e;
	bool inl = len <= SHIM_INLINE_MAX;
	int rc = shim_pio_reserve(peer, 1, inl ? 0 : len, &r);

	if (rc)
		return rc;
	e = shim_pio_entry(peer, &r, 0);
	opx_ep_hdr_init(&e->hdr, ep, peer, OPX_OP_RMA_RESP, pflags, len, 0, tag, status);
	if (inl) {
		memset(e->hdr.p.inl, 0, sizeof(e->hdr.p.inl));
		opx_iov_gather_at(e->hdr.p.inl, src, cnt, 0, len);
	} else {
		opx_iov_gather_at(r.egr, src, cnt, 0, len);
	}
	shim_pio_publish(peer, &r, 0, inl ? 0 : shim_rhf_egr(peer, &r, 0));
	return 0;
}

static void opx_rma_reply_flags(struct opx_ep *ep, struct opx_rma_state *st,
				struct shim_peer *peer, uint64_t tag, uint64_t status,
				uint8_t pflags, const struct iovec *src, size_t cnt, uint32_t len)
{
	struct opx_rma_reply *q;

	if (opx_list_empty(&st->replies) &&
	    opx_rma_reply_try(ep, peer, tag, status, pflags, src, cnt, len) == 0)
		return;
	q = malloc(sizeof(*q) + len);
	if (!q) {
		/* the initiator's operation stays incomplete: say why */
		OPX_WARN(FI_LOG_EP_DATA, "no memory to queue an RMA reply\n");
		return;
	}
	q->peer = shim_peer_get(peer); /* it may leave the AV or the anonymous cache */
	q->tag = tag;
	q->status = status;
	q->pflags = pflags;
	q->len = len;
	opx_iov_gather_at(q->data, src, cnt, 0, len);
	opx_list_insert_tail(&st->replies, &q->link);
	ep->rma_st.rma_busy = true;
}

static void opx_rma_reply(struct opx_ep *ep, struct opx_rma_state *st, struct shim_peer *peer,
			  uint64_t tag, uint64_t status, const struct iovec *src, size_t cnt,
			  uint32_t len)
{
	opx_rma_reply_flags(ep, st, peer, tag, status, 0, src, cnt, len);
}

void opx_rma_target_flush_replies(struct opx_ep *ep, struct opx_rma_state *st)
{
	while (!opx_list_empty(&st->replies)) {
		struct opx_rma_reply *q = OPX_CONTAINER_OF(st->replies.next, struct opx_rma_reply,
							   link);
		struct iovec v = {.iov_base = q->data, .iov_len = q->len};

		/* a peer that is gone (not merely without credits) loses
		 * its reply rather than hold up everyone else's */
		if (opx_rma_reply_try(ep, q->peer, q->tag, q->status, q->pflags, &v, 1, q->len) ==
			    -EAGAIN &&
		    shim_peer_alive(q->peer))
			break;
		opx_list_remove(&q->link);
		shim_peer_close(q->peer);
		free(q);
	}
}

/* ---------------------------------------------------------------------
 * Target: executing a request.
 */
/* A request executed at the target: remote CQ data and, with
 * FI_RMA_EVENT, the endpoint's and the region's remote counters.  Once
 * per operation (its last chunk). */
static void opx_rma_target_event(struct opx_ep *ep, const struct shim_pkt_hdr *h, uint64_t what,
				  uint64_t dir, size_t len, const struct opx_mr *mr)
{
	if (!(opx_proto_pw(h).rma.op & OPX_RMA_LAST))
		return;
	if ((h->flags & OPX_PF_CQDATA) && ep->rx_cq)
		opx_complete_report_locked(ep->rx_cq, NULL, what | dir | FI_REMOTE_CQ_DATA, len,
					   NULL, h->data, 0, FI_ADDR_NOTAVAIL);
	opx_cq_cntr_inc(dir == FI_REMOTE_WRITE ? ep->rma_st.rwrite_cntr : ep->rma_st.rread_cntr);
	if (mr && mr->cntr && (mr->cntr_flags & dir))
		opx_cq_cntr_inc(mr->cntr);
}

/* A CMA read or write (opx_rma.h): the initiator's buffer is checked to
 * add up to the length, the region is resolved for all of it, then one
 * copy with the process the shim verified for that peer.  A target that
 * may not use CMA, or has no verified process for the initiator (udp
 * wire, another pid namespace: the initiator's view of us may differ),
 * says so (OPX_PF_CMA reply) and touches nothing; the initiator sends
 * the operation again by chunks. */
static void opx_rma_rx_cma(struct opx_ep *ep, struct opx_rma_state *st, struct shim_peer *peer,
			   const struct shim_pkt_hdr *h, const uint8_t *pay)
{
	bool write = h->opcode == OPX_OP_RMA_WRITE;
	bool can = opx_env.rndv_cma && opx_env.rma_cma && opx_rma_target_cma_peer(peer);
	struct iovec loc[OPX_IOV_LIMIT], rem[OPX_IOV_LIMIT];
	struct opx_rma_cma_req q;
	struct opx_mr *mr = NULL;
	size_t nloc = 0;
	uint64_t sum = 0;
	int status = 0;

	if (h->paylen != sizeof(q))
		goto bad;
	memcpy(&q, pay, sizeof(q));
	if (!q.iov_count || q.iov_count > OPX_IOV_LIMIT || q.len > opx_env.max_msg_size)
		goto bad;
	for (uint32_t i = 0; i < q.iov_count; i++) {
		if (q.iov_len[i] > q.len)
			goto bad; /* also keeps the sum from wrapping */
		sum += q.iov_len[i];
		rem[i].iov_base = (void *)(uintptr_t)q.iov_base[i];
		rem[i].iov_len = q.iov_len[i];
	}
	if (sum != q.len)
		goto bad;
	status = opx_mr_resolve_locked(ep->domain, opx_proto_pw(h).rma.key, h->tag, q.len,
				       write ? FI_REMOTE_WRITE : FI_REMOTE_READ, loc, &nloc, &mr);
	if (!status && write && can) {
		/* the initiator writes: tell it where */
		struct opx_rma_grant g = {.iov_count = (uint32_t)nloc};
		struct iovec v = {.iov_base = &g, .iov_len = sizeof(g)};

		for (size_t i = 0; i < nloc; i++) {
			g.iov_base[i] = (uintptr_t)loc[i].iov_base;
			g.iov_len[i] = loc[i].iov_len;
		}
		opx_rma_reply_flags(ep, st, peer, opx_proto_pw(h).rma.op, 0,
				    OPX_PF_CMA | OPX_PF_GRANT, &v, 1, sizeof(g));
		return;
	}
	if (!status) {
		ssize_t n = -EPERM;

		if (can)
			n = opx_rndv_cma_peer(peer, loc, nloc, rem, q.iov_count, q.len, true);
		if (n == -EPERM || n == -ENOSYS) {
			opx_rma_reply_flags(ep, st, peer, opx_proto_pw(h).rma.op, 0, OPX_PF_CMA,
					    NULL, 0, 0);
			return;
		}
		if (n == -ESRCH)
			return; /* nobody to answer */
		if (n != (ssize_t)q.len)
			status = -FI_EIO;
		else
			opx_rma_target_event(ep, h, FI_RMA, FI_REMOTE_READ, q.len, mr);
	}
	opx_rma_reply(ep, st, peer, opx_proto_pw(h).rma.op, (uint64_t)-status, NULL, 0, 0);
	return;
bad:
	opx_drop_proto(ep, "malformed one-sided CMA request");
	opx_rma_reply(ep, st, peer, opx_proto_pw(h).rma.op, FI_EINVAL, NULL, 0, 0);
}

/* The access a request needs of the region. */
static uint64_t opx_rma_need(const struct shim_pkt_hdr *h)
{
	if (h->opcode == OPX_OP_RMA_WRITE)
		return FI_REMOTE_WRITE;
	if (h->opcode == OPX_OP_RMA_READ)
		return FI_REMOTE_READ;
	if ((h->msgid & 0xff) == FI_ATOMIC_READ)
		return FI_REMOTE_READ;
	if (((h->msgid >> 16) & 0xff) == OPX_AK_WRITE)
		return FI_REMOTE_WRITE;
	return FI_REMOTE_WRITE | FI_REMOTE_READ;
}

/* Chunks of one operation: the first of several carries the whole length
 * (hdr.data), and the whole range is checked then, so that a refused
 * operation touches nothing.  Returns 0 or the (positive) error for this
 * chunk.  Chunks of one initiator arrive in posting order, one operation
 * after another: a refusal is remembered for its sender (slid, sctx; the
 * sender need not be in our AV) until that operation's last chunk. */
static struct opx_rma_refusal *opx_rma_refusal(struct opx_rma_state *st, uint32_t from)
{
	for (uint32_t i = 0; i < st->nrefused; i++)
		if (st->refused[i].from == from)
			return &st->refused[i];
	return NULL;
}

static void opx_rma_refusal_drop(struct opx_rma_state *st, struct opx_rma_refusal *r)
{
	*r = st->refused[--st->nrefused];
}

static int opx_rma_chunk_refused(struct opx_ep *ep, struct opx_rma_state *st,
				 const struct shim_pkt_hdr *h)
{
	uint32_t from = (uint32_t)h->slid << 16 | h->sctx;
	uint64_t tag = opx_proto_pw(h).rma.op;
	uint32_t cookie = (uint32_t)tag;
	struct opx_rma_refusal *r;

	if (!(tag & (OPX_RMA_CHUNK_MAX << 32)) && !(tag & OPX_RMA_LAST)) {
		struct iovec loc[OPX_IOV_LIMIT];
		size_t nloc;
		int rc = opx_mr_resolve_locked(ep->domain, opx_proto_pw(h).rma.key, h->tag, h->data,
					       opx_rma_need(h), loc, &nloc, NULL);

		/* an atomic's elements lie in one piece of the region, all
		 * of them as when it is one chunk */
		if (!rc && h->opcode == OPX_OP_ATOMIC && nloc != 1)
			rc = -FI_EINVAL;
		r = opx_rma_refusal(st, from);
		if (!rc) {
			if (r) /* an earlier operation's, whose last chunk never came */
				opx_rma_refusal_drop(st, r);
			return 0;
		}
		if (!r && st->nrefused == st->cap_refused) {
			uint32_t cap = st->cap_refused ? 2 * st->cap_refused : 8;
			void *n = realloc(st->refused, cap * sizeof(*st->refused));

			if (!n) {
				/* its later chunks could not be told from
				 * others': from now on all are refused */
				OPX_WARN(FI_LOG_EP_DATA, "no memory to remember a refused "
					 "one-sided operation\n");
				st->refuse_all = true;
				return -rc;
			}
			st->refused = n;
			st->cap_refused = cap;
		}
		if (!r)
			r = &st->refused[st->nrefused++];
		r->from = from;
		r->cookie = cookie;
		r->err = -rc;
		return -rc;
	}
	if (__builtin_expect(!st->nrefused && !st->refuse_all, 1))
		return 0;
	r = opx_rma_refusal(st, from);
	if (!r || r->cookie != cookie)
		return st->refuse_all ? FI_ENOMEM : 0;
	int err = r->err;
	if (tag & OPX_RMA_LAST)
		opx_rma_refusal_drop(st, r);
	return err;
}

int opx_rma_target_rx_request(struct opx_ep *ep, const struct shim_rhq_entry *e, const uint8_t *pay)
{
	const struct shim_pkt_hdr *h = &e->hdr;
	struct iovec loc[OPX_IOV_LIMIT];
	struct opx_mr *mr = NULL;
	struct opx_rma_state *st;
	struct shim_peer *peer;
	size_t nloc = 0;
	fi_addr_t src = opx_ep_src(ep, h->slid, h->sctx);
	uint64_t tag = opx_proto_pw(h).rma.op;
	int status = 0;

	st = opx_rma_target_state(ep);
	if (!st) {
		opx_drop_proto(ep, "no memory for one-sided state");
		return 0;
	}
	peer = opx_rndv_src_peer(ep, h->slid, h->sctx, h->psn, src);
	if (!peer) {
		opx_drop_proto(ep, "one-sided request from a sender that cannot be answered");
		return 0;
	}

	if ((h->flags & OPX_PF_GRANT) && h->opcode == OPX_OP_RMA_WRITE) {
		/* a CMA write was written: its remote CQ data and counters */
		if (h->paylen || !(opx_proto_pw(h).rma.op & OPX_RMA_LAST) ||
		    opx_mr_resolve_locked(ep->domain, opx_proto_pw(h).rma.key, h->tag, h->msgid,
					  FI_REMOTE_WRITE, loc, &nloc, &mr)) {
			opx_drop_proto(ep, "CMA write notice for no writable region");
			return 0;
		}
		opx_rma_target_event(ep, h, FI_RMA, FI_REMOTE_WRITE, h->msgid, mr);
		return 0;
	}
	if ((h->flags & OPX_PF_CMA) && h->opcode != OPX_OP_ATOMIC) {
		opx_rma_rx_cma(ep, st, peer, h, pay);
		return 0;
	}
	if ((status = opx_rma_chunk_refused(ep, st, h)) != 0) {
		opx_rma_reply(ep, st, peer, tag, (uint64_t)status, NULL, 0, 0);
		return 0;
	}
	if (h->opcode == OPX_OP_RMA_WRITE) {
		status = opx_mr_resolve_locked(ep->domain, opx_proto_pw(h).rma.key, h->tag,
					       h->paylen, FI_REMOTE_WRITE, loc, &nloc, &mr);
		if (!status) {
			const uint8_t *p = pay;
			for (size_t i = 0; i < nloc; i++) {
				memcpy(loc[i].iov_base, p, loc[i].iov_len);
				p += loc[i].iov_len;
			}
			opx_rma_target_event(ep, h, FI_RMA, FI_REMOTE_WRITE, h->msgid, mr);
		}
		opx_rma_reply(ep, st, peer, tag, (uint64_t)-status, NULL, 0, 0);
		return 0;
	}
	if (h->opcode == OPX_OP_RMA_READ) {
		uint32_t len = h->msgid;

		if (len > peer->mtu)
			status = -FI_EINVAL;
		else
			status = opx_mr_resolve_locked(ep->domain, opx_proto_pw(h).rma.key, h->tag,
						       len, FI_REMOTE_READ, loc, &nloc, &mr);
		if (status)
			len = 0;
		else
			opx_rma_target_event(ep, h, FI_RMA, FI_REMOTE_READ, len, mr);
		opx_rma_reply(ep, st, peer, tag, (uint64_t)-status, loc, nloc, len);
		return 0;
	}

	/* atomic */
	enum fi_op op = (enum fi_op)(h->msgid & 0xff);
	enum fi_datatype dt = (enum fi_datatype)((h->msgid >> 8) & 0xff);
	enum opx_atomic_kind kind = (enum opx_atomic_kind)((h->msgid >> 16) & 0xff);
	size_t sz = opx_atomic_dt_size(dt);
	size_t n = 0, bytes = 0;

	if (!opx_atomic_valid(kind, op, dt) || !sz) {
		status = -FI_EOPNOTSUPP;
	} else {
		bytes = kind == OPX_AK_COMPARE ? h->paylen / 2 : h->paylen;
		n = bytes / sz;
		if (!n || n * sz * (kind == OPX_AK_COMPARE ? 2 : 1) != h->paylen ||
		    (kind != OPX_AK_WRITE && bytes > peer->mtu))
			status = -FI_EINVAL;
	}
	if (!status) {
		status = opx_mr_resolve_locked(ep->domain, opx_proto_pw(h).rma.key, h->tag, bytes,
					       opx_rma_need(h), loc, &nloc, &mr);
		if (!status && nloc != 1)
			status = -FI_EINVAL; /* elements must not straddle two iovecs */
	}
	if (!status) {
		status = opx_atomic_apply(op, dt, loc[0].iov_base, pay,
					  kind == OPX_AK_COMPARE ? pay + bytes : NULL,
					  kind != OPX_AK_WRITE ? st->scratch : NULL, n);
		if (!status)
			opx_rma_target_event(ep, h, FI_ATOMIC,
					     op == FI_ATOMIC_READ ? FI_REMOTE_READ : FI_REMOTE_WRITE,
					     bytes, mr);
	}
	{
		struct iovec v = {.iov_base = st->scratch, .iov_len = bytes};
		uint32_t rlen = (!status && kind != OPX_AK_WRITE) ? (uint32_t)bytes : 0;
		opx_rma_reply(ep, st, peer, tag, (uint64_t)-status, &v, 1, rlen);
	}
	return 0;
}
