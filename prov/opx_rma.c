/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rma.c - the one-sided engine, initiator side: RMA writes and reads,
 * and the transport of atomics (whose kernels are in opx_atomic.c).  It
 * holds the descriptors, posting, the direct path, pushing chunks and CMA
 * requests, the "written" packets, handling responses and grants, and
 * completion.  The wire protocol is described in opx_rma.h; the target
 * side, which executes requests and answers them, is opx_rma_target.c.
 *
 * Data flow.  Calls come in from opx_rma_api.c (opx_rma_post), reply
 * packets from the receive path (opx_rx_ops[]: opx_rma_rx_reply) and work
 * from the endpoint's progress (opx_rma_progress).  Requests leave here as
 * packets to the target, whose receive path hands them to
 * opx_rma_target_rx_request; its responses and grants come back through
 * opx_rma_rx_reply.  Calls between the two files go from this
 * one to opx_rma_target.c only, never back (scripts/callgraph.sh).  The
 * endpoint's state, struct opx_rma_state (opx_rma.h), serves both sides.
 *
 * Initiator.  A call takes a descriptor from a fixed pool (allocated on
 * the endpoint's first one-sided operation) and is split into chunks of at
 * most one MTU, or, from FI_OPX_RMA_CMA bytes and only to a peer with a
 * verified process (not over the udp wire), sent as one request that the
 * target serves with one Cross Memory Attach copy (opx_rma.h).  Atomics
 * are cut at element boundaries.  An inject of several chunks, or by
 * CMA, is sent from a copy: its buffer is the caller's again at once.
 * Descriptors are pushed in posting order through one FIFO:
 * while the head cannot send (no credits, or OPX_RMA_WINDOW chunks already
 * unanswered) later ones wait behind it, so operations to one target are
 * executed in posting order whatever their size.  The window also bounds
 * the replies a target may have to hold for us.  A descriptor completes
 * when every chunk has been answered; errors from the target complete it
 * in error.  fi_inject_write / fi_inject_atomic never wait: if they cannot
 * go at once they return -FI_EAGAIN.  FI_FENCE: a fenced operation is
 * refused with -FI_EAGAIN while earlier one-sided operations of the
 * endpoint are outstanding (the application progresses and retries).
 */
#include <stdlib.h>
#include <string.h>

#include "opx_cq.h"
#include "opx_drop.h"
#include "opx_ep.h"
#include "opx_rma.h"
#include "opx_rndv_api.h"

void opx_rma_fini(struct opx_ep *ep)
{
	struct opx_rma_state *st = ep->rma;

	if (!st)
		return;
	while (!opx_list_empty(&st->replies)) {
		struct opx_rma_reply *q = OPX_CONTAINER_OF(st->replies.next, struct opx_rma_reply,
							   link);
		opx_list_remove(&q->link);
		shim_peer_close(q->peer);
		free(q);
	}
	for (; st->wr_head != st->wr_tail; st->wr_head++)
		shim_peer_close(st->written[st->wr_head & (OPX_RMA_WRITTEN - 1)].peer);
	for (size_t i = 0; i < OPX_RMA_OPS; i++)
		free(st->ops[i].inj);
	free(st->scratch);
	free(st->refused);
	free(st);
	ep->rma = NULL;
	ep->rma_st.rma_busy = false;
}

bool opx_rma_outstanding(const struct opx_ep *ep)
{
	return ep->rma && ep->rma->busy_ops;
}

static void opx_rma_update_busy(struct opx_ep *ep, struct opx_rma_state *st)
{
	ep->rma_st.rma_busy = !opx_list_empty(&st->queue) || !opx_list_empty(&st->replies) ||
		       st->wr_head != st->wr_tail;
}

static inline uint32_t opx_rma_cookie(const struct opx_rma_state *st, const struct opx_rma_op *op)
{
	return (uint32_t)(op - st->ops) | (op->gen << OPX_RMA_IDX_BITS);
}

/* Gather len bytes at offset off of an iovec into dst. */
/* ---------------------------------------------------------------------
 * Initiator: completion.
 */
/* Give a descriptor back: completed, or refused before it started. */
static void opx_rma_op_put(struct opx_rma_state *st, struct opx_rma_op *op)
{
	free(op->inj);
	op->inj = NULL;
	op->busy = false;
	op->next_free = st->free;
	st->free = op;
	st->busy_ops--;
}

/* The initiator's side of a finished one-sided operation: an error
 * entry, or an entry unless injected or left out by FI_SELECTIVE_COMPLETION;
 * and its counter (read for FI_READ in cflags, else write). */
static void opx_rma_report(struct opx_ep *ep, void *context, uint64_t cflags, uint64_t flags,
			   int err)
{
	struct opx_cntr *cntr = (cflags & FI_READ) ? ep->rma_st.read_cntr : ep->rma_st.write_cntr;

	if (err) {
		if (ep->tx_cq)
			opx_complete_report_err_locked(ep->tx_cq, context, cflags, 0, NULL, 0, 0, 0,
						       err, -err, FI_ADDR_NOTAVAIL);
		opx_cq_cntr_inc_err(cntr);
		return;
	}
	if (ep->tx_cq && !(flags & FI_INJECT) && (!ep->tx_selective || (flags & FI_COMPLETION)))
		opx_complete_report_locked(ep->tx_cq, context, cflags, 0, NULL, 0, 0,
					   FI_ADDR_NOTAVAIL);
	opx_cq_cntr_inc(cntr);
}

static void opx_rma_complete(struct opx_ep *ep, struct opx_rma_state *st, struct opx_rma_op *op)
{
	opx_rma_report(ep, op->context, op->cflags, op->flags, op->err);
	op->gen = (op->gen + 1) & ((1u << (32 - OPX_RMA_IDX_BITS)) - 1);
	opx_rma_op_put(st, op);
}

/* The address's entry, for what we learnt about CMA with it; NULL once
 * removed from the address vector. */
static struct opx_av_entry *opx_rma_entry(struct opx_ep *ep, fi_addr_t dest)
{
	bool sub;

	return opx_av_entry_locked(ep->av, dest, &sub);
}

/* ---------------------------------------------------------------------
 * Initiator: the direct path.  A read or write the initiator copies by
 * itself into or out of a region the target published (shim_rgn.c), and
 * completes at once: no packet, no target progress, and the data is in
 * place when it completes (delivery complete).  Only while no other
 * one-sided operation of the endpoint is outstanding, so it overtakes
 * none of them (msg_order, FI_FENCE); and never with remote CQ data, which
 * only the target's progress can raise.  Anything the copy cannot do
 * (no such published region, access, range, a region being closed, no
 * verified process) goes the ordinary way, whose target gives the verdict.
 */
static bool opx_rma_direct(struct opx_ep *ep, const struct opx_rma_args *a,
			   struct shim_peer *peer, size_t len)
{
	size_t min = a->type == OPX_RT_READ ? opx_env.rma_direct_read : opx_env.rma_direct_write;
	struct opx_av_entry *ent;
	ssize_t n;

	if (!min || !len || a->type == OPX_RT_ATOMIC || (a->flags & FI_REMOTE_CQ_DATA) ||
	    opx_rma_outstanding(ep))
		return false;
	/* Below the threshold the ring is faster, but only with a target
	 * that polls: one that computes (or sleeps) would leave the request
	 * waiting for its next call into libfabric. */
	if (len < min && (!opx_env.rma_direct_idle_ms ||
			  shim_rgn_owner_polling(peer, (uint32_t)opx_env.rma_direct_idle_ms)))
		return false;
	ent = opx_rma_entry(ep, a->dest);
	if (!ent || ent->rma_no_direct)
		return false;
	n = shim_rgn_peer_copy(peer, a->key, a->addr, a->iov, a->cnt, len, a->type == OPX_RT_WRITE);
	if (n != (ssize_t)len) {
		/* a target we may not ptrace (Yama, not dumpable) stays so:
		 * do not pay a refused system call on every operation */
		if (n == -EPERM)
			ent->rma_no_direct = true;
		return false;
	}
	opx_rma_report(ep, a->context, FI_RMA | (a->type == OPX_RT_READ ? FI_READ : FI_WRITE),
		       a->flags, 0);
	return true;
}

/* The header of a one-sided request.  hdr.psn, which only checksummed
 * message packets use, carries our context's nonce: the target answers
 * requests through a cache of peers by (lid, ctx), and a request whose
 * nonce is the cached peer's comes from that very context, so the target
 * need not ask the kernel whether the cached one is still alive (a
 * system call per request, opx_rndv_src_peer). */
static inline void opx_rma_hdr_init(struct shim_pkt_hdr *h, const struct opx_ep *ep,
				    const struct shim_peer *peer, uint8_t op, uint8_t pflags,
				    uint32_t paylen, uint32_t msgid, uint64_t tag, uint64_t data)
{
	opx_ep_hdr_init(h, ep, peer, op, pflags, paylen, msgid, tag, data);
	h->psn = ep->addr.nonce;
}

/* Send the one request of a CMA operation (opx_rma.h).  While no CMA
 * operation to that address has worked yet, it is a probe: later
 * operations wait for its answer, which may send it back to chunks; a
 * write that is not pipelined holds them until it is written, a
 * pipelined one (op->piped) only counts as a grant due. */
static int opx_rma_push_cma(struct opx_ep *ep, struct opx_rma_state *st, struct opx_rma_op *op)
{
	struct shim_peer *peer = op->peer;
	struct opx_rma_cma_req *q;
	struct opx_av_entry *ent;
	struct shim_pio_resv r;
	struct shim_rhq_entry *e;
	uint8_t pflags = OPX_PF_CMA;
	int rc;

	if (st->inflight >= OPX_RMA_WINDOW)
		return -EAGAIN;
	rc = shim_pio_reserve(peer, 1, sizeof(*q), &r);
	if (rc)
		return rc;
	q = (struct opx_rma_cma_req *)r.egr;
	memset(q, 0, sizeof(*q));
	q->len = op->len;
	q->iov_count = (uint32_t)op->cnt;
	for (size_t i = 0; i < op->cnt; i++) {
		q->iov_base[i] = (uintptr_t)op->iov[i].iov_base;
		q->iov_len[i] = op->iov[i].iov_len;
	}
	if (op->flags & FI_REMOTE_CQ_DATA)
		pflags |= OPX_PF_CQDATA;
	e = shim_pio_entry(peer, &r, 0);
	opx_rma_hdr_init(&e->hdr, ep, peer,
			 op->type == OPX_RT_WRITE ? OPX_OP_RMA_WRITE : OPX_OP_RMA_READ, pflags,
			 sizeof(*q), (uint32_t)op->len, op->addr, op->data);
	opx_proto_pw_set(&e->hdr, &(union opx_proto_pw){
					  .rma = {.key = op->key,
						  .op = opx_rma_cookie(st, op) | OPX_RMA_LAST}});
	shim_pio_publish(peer, &r, 0, shim_rhf_egr(peer, &r, 0));
	op->sent = 1;
	st->inflight++;
	if (op->piped)
		st->grants_due++;
	else if (!(ent = opx_rma_entry(ep, op->dest)) || ent->rma_cma <= 0 ||
		 op->type == OPX_RT_WRITE)
		st->cma_hold = op;
	return 0;
}

/* The "written" packets of CMA writes (opx_rma.h), in order: 0 when all
 * are out, or -EAGAIN. */
static int opx_rma_written_try(struct opx_ep *ep, struct opx_rma_state *st)
{
	while (st->wr_head != st->wr_tail) {
		const struct opx_rma_written *w = &st->written[st->wr_head & (OPX_RMA_WRITTEN - 1)];
		struct shim_pio_resv r;
		struct shim_rhq_entry *e;
		int rc = shim_pio_reserve(w->peer, 1, 0, &r);

		if (rc == -EAGAIN)
			return rc;
		if (!rc) { /* else the target is gone: nobody to tell, nothing to hold */
			e = shim_pio_entry(w->peer, &r, 0);
			opx_rma_hdr_init(&e->hdr, ep, w->peer, OPX_OP_RMA_WRITE, w->pflags, 0,
					 w->len, w->addr, w->data);
			opx_proto_pw_set(&e->hdr, &(union opx_proto_pw){
							  .rma = {.key = w->key, .op = w->cookie}});
			shim_pio_publish(w->peer, &r, 0, 0);
		}
		shim_peer_close(w->peer);
		st->wr_head++;
	}
	return 0;
}

/* A CMA write that need not hold the rest: to an address where CMA has
 * worked, with room for its "written" packet, no fall-back under way. */
static bool opx_rma_can_pipe(struct opx_ep *ep, struct opx_rma_state *st, struct opx_rma_op *op)
{
	struct opx_av_entry *ent;

	if (!op->cma || op->type != OPX_RT_WRITE || st->requeued ||
	    st->wr_tail - st->wr_head + st->grants_due >= OPX_RMA_WRITTEN)
		return false;
	ent = opx_rma_entry(ep, op->dest);
	return ent && ent->rma_cma > 0;
}

/* ---------------------------------------------------------------------
 * Initiator: sending chunks.  Returns 0 when every chunk of op is sent,
 * -EAGAIN when it must wait for credits or for the window.
 */
static int opx_rma_push(struct opx_ep *ep, struct opx_rma_state *st, struct opx_rma_op *op)
{
	static const uint8_t opcode[] = {
		[OPX_RT_WRITE] = OPX_OP_RMA_WRITE,
		[OPX_RT_READ] = OPX_OP_RMA_READ,
		[OPX_RT_ATOMIC] = OPX_OP_ATOMIC,
	};
	struct shim_peer *peer = op->peer;

	if (st->cma_hold)
		return -EAGAIN;
	if (op->sent == 0 && opx_rma_can_pipe(ep, st, op)) {
		op->piped = true;
		return opx_rma_push_cma(ep, st, op);
	}
	if (st->grants_due || st->wr_head != st->wr_tail)
		return -EAGAIN;
	op->piped = false;
	if (op->cma)
		return opx_rma_push_cma(ep, st, op);
	while (op->sent < op->nchunks) {
		size_t off = (size_t)op->sent * op->chunk;
		size_t clen = op->len - off < op->chunk ? op->len - off : op->chunk;
		bool last = op->sent + 1 == op->nchunks;
		uint32_t paylen = 0, msgid = 0;
		uint8_t pflags = 0;
		struct shim_pio_resv r;
		struct shim_rhq_entry *e;
		int rc;

		if (st->inflight >= OPX_RMA_WINDOW)
			return -EAGAIN;
		switch (op->type) {
		case OPX_RT_WRITE:
			paylen = (uint32_t)clen;
			msgid = last ? (uint32_t)op->len : 0;
			break;
		case OPX_RT_READ:
			msgid = (uint32_t)clen;
			break;
		default:
			paylen = (uint32_t)(op->kind == OPX_AK_COMPARE ? 2 * clen : clen);
			msgid = op->op | (uint32_t)op->dt << 8 | (uint32_t)op->kind << 16;
			break;
		}
		rc = shim_pio_reserve(peer, 1, paylen, &r);
		if (rc)
			return rc == -EAGAIN ? -EAGAIN : rc;
		if (op->type == OPX_RT_WRITE) {
			opx_iov_gather_at(r.egr, op->iov, op->cnt, off, clen);
		} else if (op->type == OPX_RT_ATOMIC) {
			if (op->op == FI_ATOMIC_READ || !op->cnt)
				memset(r.egr, 0, clen);
			else
				opx_iov_gather_at(r.egr, op->iov, op->cnt, off, clen);
			if (op->kind == OPX_AK_COMPARE)
				opx_iov_gather_at(r.egr + clen, op->cmp, op->cmp_cnt, off, clen);
		}
		if (last && (op->flags & FI_REMOTE_CQ_DATA))
			pflags |= OPX_PF_CQDATA;
		e = shim_pio_entry(peer, &r, 0);
		/* the first of several chunks carries the whole length, so the
		 * target checks the whole range before any chunk lands */
		opx_rma_hdr_init(&e->hdr, ep, peer, opcode[op->type], pflags, paylen, msgid,
				 op->addr + off, op->sent == 0 && !last ? op->len : op->data);
		opx_proto_pw_set(&e->hdr,
				 &(union opx_proto_pw){.rma = {.key = op->key,
							       .op = opx_rma_cookie(st, op) |
								     ((uint64_t)op->sent << 32) |
								     (last ? OPX_RMA_LAST : 0)}});
		shim_pio_publish(peer, &r, 0, paylen ? shim_rhf_egr(peer, &r, 0) : 0);
		op->sent++;
		st->inflight++;
	}
	return 0;
}

/* Push queued operations in order; stops at the first that must wait. */
static void opx_rma_push_queue(struct opx_ep *ep, struct opx_rma_state *st)
{
	while (!opx_list_empty(&st->queue)) {
		struct opx_rma_op *op = OPX_CONTAINER_OF(st->queue.next, struct opx_rma_op, link);
		int rc = opx_rma_push(ep, st, op);

		if (rc == -EAGAIN)
			break;
		opx_list_remove(&op->link);
		if (rc) {
			/* a shim error other than credits: fail what was not sent */
			op->err = -opx_init_err_from_shim(rc);
			op->nchunks = op->sent;
			if (op->acked == op->nchunks)
				opx_rma_complete(ep, st, op);
		}
	}
}

/* ---------------------------------------------------------------------
 * Initiator: posting.
 */
ssize_t opx_rma_post_locked(struct opx_ep *ep, const struct opx_rma_args *a)
{
	OPX_ASSERT_LOCKED(&ep->domain->lock);
	struct opx_rma_state *st;
	struct opx_rma_op *op;
	struct shim_peer *peer;
	size_t len, chunk, nchunks;
	int rc;

	if (__builtin_expect(!ep->enabled, 0))
		return -FI_EOPBADSTATE;
	if (a->cnt > OPX_IOV_LIMIT || a->cmp_cnt > OPX_IOV_LIMIT || a->res_cnt > OPX_IOV_LIMIT ||
	    (a->cnt && !a->iov))
		return -FI_EINVAL;
	len = opx_iov_total(a->iov, a->cnt);
	for (size_t i = 0; i < a->cnt; i++)
		if (!a->iov[i].iov_base && a->iov[i].iov_len &&
		    !(a->type == OPX_RT_ATOMIC && a->op == FI_ATOMIC_READ))
			return -FI_EINVAL;
	if (a->type == OPX_RT_ATOMIC) {
		size_t sz = opx_atomic_dt_size(a->dt);
		size_t rlen = opx_iov_total(a->res, a->res_cnt);

		if (!opx_atomic_valid(a->kind, a->op, a->dt))
			return -FI_EOPNOTSUPP;
		if (a->op == FI_ATOMIC_READ && !len)
			len = rlen;
		if (!len || len % sz)
			return -FI_EINVAL;
		if (a->kind != OPX_AK_WRITE && rlen != len)
			return -FI_EINVAL;
		if (a->kind == OPX_AK_COMPARE && opx_iov_total(a->cmp, a->cmp_cnt) != len)
			return -FI_EINVAL;
		if ((a->kind == OPX_AK_COMPARE ? 2 * len : len) > opx_env.mtu)
			return -FI_EINVAL;
		if ((a->flags & FI_INJECT) && len > opx_env.inject_size)
			return -FI_EINVAL;
	} else {
		if (len > opx_env.max_msg_size)
			return -FI_EMSGSIZE;
		if (a->flags & FI_INJECT) {
			if (a->type == OPX_RT_READ)
				return -FI_EINVAL;
			if (len > opx_env.inject_size)
				return -FI_EMSGSIZE;
		}
	}
	rc = opx_ep_peer_locked(ep, a->dest, &peer);
	if (rc)
		return rc;
	if (opx_rma_direct(ep, a, peer, len))
		return 0;
	st = opx_rma_target_state(ep);
	if (!st)
		return -FI_ENOMEM;
	if (((a->flags & FI_FENCE) && st->busy_ops) || !st->free)
		return -FI_EAGAIN; /* opx_rma_post progresses and tries again */
	chunk = peer->mtu < ep->rx->mtu ? peer->mtu : ep->rx->mtu;
	if (a->type == OPX_RT_ATOMIC) {
		/* Whole elements per chunk, with their compare values in the
		 * same packet and their fetched values in one reply.  A call
		 * may carry up to the provider's MTU (fi_atomicvalid's count),
		 * more than one datagram of a udp path; atomicity is per
		 * element (fi_atomic(3)), so it may take several chunks. */
		size_t sz = opx_atomic_dt_size(a->dt);

		chunk = chunk / (a->kind == OPX_AK_COMPARE ? 2 * sz : sz) * sz;
	}
	nchunks = len ? (len + chunk - 1) / chunk : 1;
	/* a peer without a verified process is not even probed: the probe
	 * would only hold the operations behind it for a refusal */
	bool cma = a->type != OPX_RT_ATOMIC && opx_env.rma_cma && len >= opx_env.rma_cma &&
		   len > chunk && opx_rma_entry(ep, a->dest) &&
		   opx_rma_entry(ep, a->dest)->rma_cma >= 0 && opx_rma_target_cma_peer(peer);
	if (cma)
		nchunks = 1;
	if (nchunks > OPX_RMA_CHUNK_MAX)
		return -FI_EMSGSIZE;

	op = st->free;
	st->free = op->next_free;
	op->busy = true;
	op->context = a->context;
	op->flags = a->flags;
	op->peer = peer;
	op->dest = a->dest;
	op->cma = cma;
	op->addr = a->addr;
	op->key = a->key;
	op->data = a->data;
	op->len = len;
	op->chunk = chunk;
	op->nchunks = (uint32_t)nchunks;
	op->sent = 0;
	op->acked = 0;
	op->err = 0;
	op->type = (uint8_t)a->type;
	op->kind = (uint8_t)a->kind;
	op->op = (uint8_t)a->op;
	op->dt = (uint8_t)a->dt;
	op->cnt = a->cnt;
	op->cmp_cnt = a->cmp_cnt;
	op->res_cnt = a->res_cnt;
	memcpy(op->iov, a->iov, a->cnt * sizeof(*a->iov));
	if (a->cmp_cnt)
		memcpy(op->cmp, a->cmp, a->cmp_cnt * sizeof(*a->cmp));
	if (a->res_cnt)
		memcpy(op->res, a->res, a->res_cnt * sizeof(*a->res));
	switch (a->type) {
	case OPX_RT_WRITE: op->cflags = FI_RMA | FI_WRITE; break;
	case OPX_RT_READ: op->cflags = FI_RMA | FI_READ; break;
	default:
		op->cflags = FI_ATOMIC | (a->kind == OPX_AK_WRITE ? FI_WRITE : FI_READ);
		break;
	}
	st->busy_ops++;
	if ((op->flags & FI_INJECT) && (op->nchunks > 1 || op->cma)) {
		/* The caller may reuse an inject's buffer as soon as the call
		 * returns, but only a single chunk is sure to leave now or not
		 * at all: more of them (a udp path's MTU is below inject_size)
		 * may wait for the window or for credits, and a CMA write is
		 * copied when its grant comes back.  Those go from a copy. */
		op->inj = malloc(len);
		if (!op->inj) {
			opx_rma_op_put(st, op);
			return -FI_ENOMEM;
		}
		opx_iov_gather_at(op->inj, a->iov, a->cnt, 0, len);
		op->iov[0] = (struct iovec){.iov_base = op->inj, .iov_len = len};
		op->cnt = 1;
	}

	rc = opx_list_empty(&st->queue) ? opx_rma_push(ep, st, op) : -EAGAIN;
	if (rc == -EAGAIN && (op->flags & FI_INJECT) && op->sent == 0) {
		/* inject never waits: the caller progresses and retries */
		opx_rma_op_put(st, op);
		return -FI_EAGAIN;
	}
	if (rc == -EAGAIN) {
		opx_list_insert_tail(&st->queue, &op->link);
		ep->rma_st.rma_busy = true;
		return 0;
	}
	if (rc) {
		opx_rma_op_put(st, op);
		return opx_init_err_from_shim(rc);
	}
	return 0;
}

/* ---------------------------------------------------------------------
 * Initiator: a reply.
 */
/* A CMA write was granted: check the region's pieces add up to the
 * length, write into them, and tell the target.  Returns 0, a positive
 * FI_E* for the completion, or -EPERM when the kernel refused CMA (the
 * operation goes back to chunks). */
static int opx_rma_write_granted(struct opx_ep *ep, struct opx_rma_state *st,
				 struct opx_rma_op *op, const struct shim_pkt_hdr *h,
				 const uint8_t *pay)
{
	struct iovec loc[OPX_IOV_LIMIT], rem[OPX_IOV_LIMIT];
	struct opx_rma_grant g;
	uint64_t sum = 0;
	ssize_t n;

	if (op->type != OPX_RT_WRITE || h->paylen != sizeof(g))
		return FI_EIO;
	memcpy(&g, pay, sizeof(g));
	if (!g.iov_count || g.iov_count > OPX_IOV_LIMIT)
		return FI_EIO;
	for (uint32_t i = 0; i < g.iov_count; i++) {
		if (g.iov_len[i] > op->len)
			return FI_EIO;
		sum += g.iov_len[i];
		rem[i].iov_base = (void *)(uintptr_t)g.iov_base[i];
		rem[i].iov_len = g.iov_len[i];
	}
	if (sum != op->len)
		return FI_EIO;
	memcpy(loc, op->iov, op->cnt * sizeof(loc[0]));
	n = opx_rndv_cma_peer(op->peer, loc, op->cnt, rem, g.iov_count, op->len, true);
	if (n == -EPERM || n == -ENOSYS)
		return -EPERM;
	if (n != (ssize_t)op->len)
		return FI_EIO;
	/* a slot is free: a pipelined write is pushed only with room for
	 * its record (opx_rma_can_pipe), any other only with none queued */
	struct opx_rma_written *w = &st->written[st->wr_tail++ & (OPX_RMA_WRITTEN - 1)];

	w->peer = shim_peer_get(op->peer); /* the op completes before it is sent */
	w->addr = op->addr;
	w->key = op->key;
	w->data = op->data;
	w->len = (uint32_t)op->len;
	w->cookie = opx_rma_cookie(st, op) | OPX_RMA_LAST;
	w->pflags = OPX_PF_CMA | OPX_PF_GRANT |
		    ((op->flags & FI_REMOTE_CQ_DATA) ? OPX_PF_CQDATA : 0);
	if (opx_rma_written_try(ep, st))
		ep->rma_st.rma_busy = true; /* sent from progress; the rest waits for it */
	return 0;
}
int opx_rma_rx_reply(struct opx_ep *ep, const struct shim_rhq_entry *e, const uint8_t *pay)
{
	const struct shim_pkt_hdr *h = &e->hdr;
	struct opx_rma_state *st = ep->rma;
	uint32_t cookie = (uint32_t)h->tag;
	uint32_t chunk = (uint32_t)((h->tag >> 32) & OPX_RMA_CHUNK_MAX);
	struct opx_rma_op *op;
	int status = (int)h->data;

	if (!st) {
		opx_drop_proto(ep, "one-sided reply without a request");
		return 0;
	}
	op = &st->ops[cookie & (OPX_RMA_OPS - 1)];
	if (!op->busy || op->gen != cookie >> OPX_RMA_IDX_BITS || chunk >= op->sent ||
	    h->data > FI_ERRNO_MAX) {
		opx_drop_proto(ep, "stale or bad one-sided reply");
		return 0;
	}
	if (op->cma) {
		struct opx_av_entry *ent = opx_rma_entry(ep, op->dest);

		if (st->cma_hold == op)
			st->cma_hold = NULL;
		if (op->piped)
			st->grants_due--;
		if (!opx_list_empty(&st->queue) || st->wr_head != st->wr_tail)
			ep->rma_st.rma_busy = true;
		if ((h->flags & OPX_PF_GRANT) && !status)
			/* after a pipelined write before it fell back, writing
			 * this one would overtake that one's chunks */
			status = op->piped && st->requeued
					 ? -EPERM
					 : opx_rma_write_granted(ep, st, op, h, pay);
		if (status == -EPERM || (h->flags & (OPX_PF_CMA | OPX_PF_GRANT)) == OPX_PF_CMA) {
			/* the target may not use CMA with us: chunks, first in
			 * line (after the pipelined ones that fell back before) */
			if (ent)
				ent->rma_cma = -1;
			st->inflight--;
			op->cma = false;
			op->sent = 0;
			op->acked = 0;
			op->nchunks = (uint32_t)((op->len + op->chunk - 1) / op->chunk);
			if (op->piped && st->requeued)
				opx_list_insert_head(&st->requeued->link, &op->link);
			else
				opx_list_insert_head(&st->queue, &op->link);
			if (op->piped)
				st->requeued = st->grants_due ? op : NULL;
			op->piped = false;
			ep->rma_st.rma_busy = true;
			return 0;
		}
		if (op->piped && !st->grants_due)
			st->requeued = NULL;
		if (ent && !status)
			ent->rma_cma = 1;
	} else if (!status && (op->type == OPX_RT_READ ||
			       (op->type == OPX_RT_ATOMIC && op->kind != OPX_AK_WRITE))) {
		/* read data, or fetched values, of this chunk */
		size_t off = (size_t)chunk * op->chunk;
		size_t clen = op->len - off < op->chunk ? op->len - off : op->chunk;

		if (h->paylen != clen)
			status = FI_EIO;
		else if (op->type == OPX_RT_READ)
			opx_iov_copy_to(op->iov, op->cnt, off, pay, clen);
		else
			opx_iov_copy_to(op->res, op->res_cnt, off, pay, clen);
	}
	if (status && !op->err)
		op->err = status;
	op->acked++;
	st->inflight--;
	if (op->acked == op->nchunks)
		opx_rma_complete(ep, st, op);
	/* the window opened: the queue may move */
	if (!opx_list_empty(&st->queue))
		ep->rma_st.rma_busy = true;
	return 0;
}

void opx_rma_progress(struct opx_ep *ep)
{
	struct opx_rma_state *st = ep->rma;

	if (!st) {
		ep->rma_st.rma_busy = false;
		return;
	}
	opx_rma_target_flush_replies(ep, st);
	(void)opx_rma_written_try(ep, st);
	opx_rma_push_queue(ep, st);
	opx_rma_update_busy(ep, st);
}
