/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rndv.c - the rendezvous protocol for messages above the eager limit.
 *
 *   sender                                  receiver
 *   RTS {len, tag, data, iovec, cookie} --> match (or queue as unexpected:
 *                                           a header, never the payload)
 *   single copy (Cross Memory Attach):
 *                                           process_vm_readv() straight from
 *                                           the sender's buffers into the
 *                                           receive buffer; complete
 *   complete on DONE                   <--  DONE {cookie, status}
 *
 *   split copy (from FI_OPX_RNDV_SPLIT, once a pull has worked, while
 *   no rendezvous send of the receiver's own is in flight):
 *   write the second half with         <--  CTW {cookie, rx cookie, offset,
 *   process_vm_writev                         the receive buffer's iovec}
 *                                           read the first half meanwhile
 *   complete on DONE                   <--  DONE after its own half
 *   WDONE {rx cookie, status}          -->  complete
 *
 *   fallback (CMA not permitted, or FI_OPX_RNDV_CMA=0):
 *                                           register the receive buffer for
 *                                           expected receive (TID)
 *   submit to the SDMA engine          <--  CTS {cookie, rx cookie, TIDs}
 *   DATA packets (TID, offset)         -->  the shim places each payload at
 *   complete when the engine reports        its offset; complete when all
 *   the last packet published (to a         bytes have landed (and, from a
 *   udp peer: acknowledged, zero copy)      udp peer, ack at once:
 *                                           opx_rel_ack_soon)
 *
 * Send slot (struct opx_rndv_tx, ep->rndv[]).  RELEASE is
 * opx_rndv_tx_release: the completion (or error entry), a new generation,
 * the slot back on ep->rndv_st.rndv_free.
 *
 *   FREE --opx_rndv_send: RTS out ----------------------------> WAIT (dones_left 1)
 *   FREE --opx_rndv_dc_get: EAGER_DC out (opx_msg.c) ---------> WAIT, no iovec: DONE only
 *         (no slot, or no credits for the packet: -FI_EAGAIN and the slot stays
 *         FREE; opx_rndv_dc_put gives back one opx_rndv_dc_get took)
 *   WAIT + DONE (opx_rndv_rx_done)   a status sets err FI_EIO;
 *                               dones_left 1 -----------------> RELEASE(err)
 *                               dones_left 2 -----------------> WAIT, dones_left 1
 *   WAIT + CTW  (opx_rndv_rx_ctw)    part written (CMA) -----------> WAIT, WDONE(0) out
 *                               write refused ----------------> WAIT, dones_left 2,
 *                                                               WDONE(OPX_WDONE_REFUSED) out
 *   WAIT + CTS  (opx_rndv_rx_cts)    no SDMA engine ---------------> RELEASE(FI_EIO)
 *                               no TIDs (nothing wanted) -----> RELEASE(0)
 *                               else cts_ntid set ------------> PUSH
 *   PUSH  opx_rndv_tx_submit: one shim_sdma_submit (DATA packets) per TID range;
 *         ring full: on ep->rndv_st.sdma_wait, resumed by opx_rndv_progress;
 *         other error: err FI_EIO, nothing more submitted
 *   PUSH  opx_rndv_sdma_reap_all: sdma_left-- per reaped request (a status: err FI_EIO);
 *         none in the engine and no range left to submit -----> RELEASE(err)
 *   WAIT or PUSH with nothing in the engine, peer dead
 *         (opx_rndv_check_peers) -----------------------------> RELEASE(FI_ECONNREFUSED)
 *
 * Receive slot (struct opx_rndv_rx, ep->rndv_st.rndv_rx[]), taken only when data is
 * still due from the sender.  An RTS (opx_rx_rts, opx_rx.c) is matched or
 * queued unexpected (opx_match_ux_deliver on a later post); then opx_rndv_match:
 *
 *   cma_ok: opx_rndv_pull    split (len >= FI_OPX_RNDV_SPLIT, cma_proven, a slot free):
 *                              opx_rndv_split: take, CTW out, read the first half,
 *                              DONE out --------------------------------------> SPLIT
 *                            else read it all, complete, DONE(status) out: no slot;
 *                              a read that worked sets cma_proven
 *                            -ESRCH (no verified process): this send by CTS
 *                            -EPERM/-ENOSYS: cma_ok = false, CTS from now on
 *   CTS:    opx_rndv_cts     sender gone: complete FI_EIO, nothing sent
 *                            no slot or TID: the ux waits on ep->rndv_st.cts_defer, retried
 *                              by opx_rndv_progress
 *                            else register TIDs, take, CTS out ---------------> PUSHED
 *                              (nothing to receive: complete, free at once)
 *   PUSHED + DATA (opx_rndv_rx_data)   placed by shim_tid_place, placed += paylen;
 *                                 placed == expect: complete, free
 *   SPLIT + WDONE (opx_rndv_rx_wdone)  OPX_WDONE_REFUSED: pull the sender's part, DONE out
 *                                 (the sender's second); then, whatever the status,
 *                                 complete (FI_EIO if a part failed), free
 *   PUSHED or SPLIT, peer dead (opx_rndv_check_peers): complete FI_EIO, free
 *
 * Free is opx_rndv_rx_free: TIDs released, a new generation.  FI_DISCARD
 * (opx_rndv_discard) and an EAGER_DC once its data is placed
 * (opx_rx_eager_dc, opx_match_ux_deliver) answer DONE(0) without a slot.
 *
 * No rendezvous state has a timeout of its own: a lost packet is the
 * reliability layer's, and a peer that dies (process gone; udp: no answer
 * for FI_OPX_PEER_TIMEOUT, opx_rel.c) is found by opx_rndv_check_peers
 * from the idle path of progress, at most every OPX_WATCH_NS.
 *
 * Cookies are a slot index plus a random generation (getrandom), so a
 * stale or guessed cookie from the wire is rejected instead of followed,
 * and a cookie is only honoured from the peer it was issued to: DONE,
 * CTS and CTW must come from the receiver of the send, WDONE and DATA
 * from the sender of the receive (else dropped and counted in
 * ep->rndv_st.rndv_stray).  The generation changes whenever a slot is freed, so a
 * late packet for a reused slot is stray too.  A packet must also fit the
 * slot's state: DONE not during a push, CTS and CTW not after a CTS or a
 * CTW, WDONE only for a split (no TIDs), DATA only with TID placement.
 * The process that CMA reads from or writes to is the one the shim
 * verified when it mapped that peer (pid and start time, checked again
 * after the copy), never a pid carried in a packet.  Control packets
 * (DONE, CTS, CTW, WDONE) that find no credits wait on ep->rndv_st.ctl_pend, in
 * order, and go out on progress.
 *
 * This file holds the protocol's steps on both sides, the receive
 * handlers of its packets (opx_rndv_rx_*, entries of opx_rx_ops[] in
 * opx_rx.c) and its deferred work (opx_rndv_progress).  The slots' take and
 * release, control packets, the peer to answer, the watch for dead peers
 * and CMA copies are in opx_rndv_peer.c, which this file calls
 * (opx_rndv.h) and which never calls back.
 */
#include <sys/uio.h>

#include "opx_complete.h"
#include "opx_drop.h"
#include "opx_rel.h"
#include "opx_rndv.h"
#include "opx_ux.h"
#include "shim_dma.h"

/* A control or data packet must come from the peer its cookie was given
 * to. */
static inline bool opx_rndv_from(const struct shim_pkt_hdr *h, const struct shim_peer *p)
{
	return p && h->slid == p->lid && h->sctx == p->ctx;
}

static void opx_rndv_stray(struct opx_ep *ep, const char *why)
{
	ep->rndv_st.rndv_stray++;
	opx_drop_proto(ep, why);
}

/* ---------------------------------------------------------------------
 * Initiator.
 */
int opx_rndv_send(struct opx_ep *ep, struct shim_peer *peer, const struct iovec *iov, size_t cnt,
		  size_t len, uint64_t tag, uint64_t data, uint8_t pflags, void *context,
		  uint64_t flags, fi_addr_t dest)
{
	struct opx_rndv_tx *t = ep->rndv_st.rndv_free;
	struct opx_rts_payload *rts;
	struct shim_rhq_entry *e;
	struct shim_pio_resv r = {0};
	int rc;

	if (!t)
		return -EAGAIN;
	rc = shim_pio_reserve(peer, 1, sizeof(*rts), &r);
	if (rc)
		return rc;
	ep->rndv_st.rndv_free = t->next_free;
	ep->rndv_st.rndv_busy++;
	t->busy = true;
	t->context = context;
	t->flags = flags;
	t->len = len;
	t->dest = dest;
	t->peer = shim_peer_get(peer); /* fi_av_remove must not unmap it under us */
	t->iov_count = cnt;
	opx_iov_copy(t->iov, iov, cnt);
	t->sdma_left = 0;
	t->cts_ntid = 0;
	t->cts_next = 0;
	t->err = 0;
	t->dones_left = 1;
	t->ctw_seen = false;

	rts = (struct opx_rts_payload *)r.egr;
	rts->src = ep->addr;
	rts->pid = ep->pid; /* diagnostics only: receivers use the shim's record */
	rts->iov_count = (uint32_t)cnt;
	for (size_t i = 0; i < OPX_IOV_LIMIT; i++) {
		rts->iov_base[i] = i < cnt ? (uint64_t)(uintptr_t)iov[i].iov_base : 0;
		rts->iov_len[i] = i < cnt ? iov[i].iov_len : 0;
	}
	e = shim_pio_entry(peer, &r, 0);
	opx_ep_hdr_init(&e->hdr, ep, peer, OPX_OP_RTS, pflags, sizeof(*rts),
			ep->msg_st.next_msgid++, tag, data);
	opx_proto_pw_set(&e->hdr,
			 &(union opx_proto_pw){.rts = {.len = len,
						       .cookie = opx_rndv_cookie(
							       t->gen, (size_t)(t - ep->rndv))}});
	shim_pio_publish(peer, &r, 0, shim_rhf_egr(peer, &r, 0));
	return 0;
}

static struct opx_rndv_tx *opx_rndv_tx_lookup(struct opx_ep *ep, uint64_t cookie)
{
	uint32_t idx = (uint32_t)cookie;

	if (idx >= OPX_RNDV_SLOTS || !ep->rndv[idx].busy || ep->rndv[idx].gen != (cookie >> 32))
		return NULL;
	return &ep->rndv[idx];
}

int opx_rndv_rx_done(struct opx_ep *ep, const struct shim_rhq_entry *e, const uint8_t *pay)
{
	const struct shim_pkt_hdr *h = &e->hdr;
	union opx_proto_pw w = opx_proto_pw(h);
	struct opx_rndv_tx *t = opx_rndv_tx_lookup(ep, w.done.cookie);

	(void)pay;
	if (!t || t->cts_ntid) {
		opx_rndv_stray(ep, "rendezvous DONE for an unknown send");
		return 0;
	}
	if (!opx_rndv_from(h, t->peer)) {
		opx_rndv_stray(ep, "rendezvous DONE from another peer");
		return 0;
	}
	if (w.done.status)
		t->err = FI_EIO;
	if (t->dones_left > 1) { /* the receiver still pulls our refused part */
		t->dones_left--;
		return 0;
	}
	opx_rndv_tx_release(ep, t, t->err);
	return 0;
}

/* Hand the CTS's TID ranges to the SDMA engine, as far as its ring allows. */
static void opx_rndv_tx_submit(struct opx_ep *ep, struct opx_rndv_tx *t)
{
	size_t sent = 0;

	for (uint32_t i = 0; i < t->cts_next; i++)
		sent += t->tid_len[i];
	while (t->cts_next < t->cts_ntid) {
		struct shim_sdma_req req;
		uint32_t i = t->cts_next;
		int rc;

		memset(&req.tmpl, 0, sizeof(req.tmpl));
		opx_ep_hdr_init(&req.tmpl, ep, t->peer, OPX_OP_DATA, 0, 0, 0, t->rx_cookie, 0);
		req.iovcnt = (uint32_t)opx_iov_slice(t->iov, t->iov_count, sent, t->tid_len[i], req.iov);
		req.tid = t->tid[i];
		req.tid_off = 0;
		req.len = t->tid_len[i];
		req.cookie = opx_rndv_cookie(t->gen, (size_t)(t - ep->rndv));
		rc = shim_sdma_submit(ep->rndv_st.sdma, t->peer, &req);
		if (rc == -EAGAIN) {
			if (opx_list_empty(&t->link))
				opx_list_insert_tail(&ep->rndv_st.sdma_wait, &t->link);
			return;
		}
		if (rc) {
			t->err = FI_EIO;
			t->cts_ntid = t->cts_next; /* nothing more will go */
			break;
		}
		t->sdma_left++;
		ep->rndv_st.sdma_reqs++;
		t->cts_next++;
		sent += t->tid_len[i];
	}
	opx_list_remove(&t->link);
	if (!t->sdma_left)
		opx_rndv_tx_release(ep, t, t->err);
}

int opx_rndv_rx_cts(struct opx_ep *ep, const struct shim_rhq_entry *e, const uint8_t *pay)
{
	const struct shim_pkt_hdr *h = &e->hdr;
	union opx_proto_pw w = opx_proto_pw(h);
	struct opx_rndv_tx *t = opx_rndv_tx_lookup(ep, w.cts.cookie);
	struct opx_cts_payload cts;
	uint64_t sum = 0;

	if (!t || t->cts_ntid || h->paylen != sizeof(cts)) {
		opx_rndv_stray(ep, "CTS for an unknown send");
		return 0;
	}
	if (!opx_rndv_from(h, t->peer) || t->ctw_seen) {
		opx_rndv_stray(ep, "CTS from another peer");
		return 0;
	}
	memcpy(&cts, pay, sizeof(cts));
	if (cts.ntid > OPX_IOV_LIMIT) {
		opx_drop_proto(ep, "CTS with too many TIDs");
		return 0;
	}
	for (uint32_t i = 0; i < cts.ntid; i++)
		sum += cts.len[i];
	if (sum > t->len) {
		opx_drop_proto(ep, "CTS longer than the message");
		return 0;
	}
	if (!ep->rndv_st.sdma && shim_sdma_open(ep->shim, 0, &ep->rndv_st.sdma)) {
		OPX_WARN(FI_LOG_EP_DATA, "no SDMA engine: failing a %zu-byte send\n", t->len);
		opx_rndv_tx_release(ep, t, FI_EIO);
		return 0;
	}
	if (!cts.ntid) { /* the receiver wants nothing (truncated to zero) */
		opx_rndv_tx_release(ep, t, 0);
		return 0;
	}
	t->rx_cookie = w.cts.rx_cookie;
	t->cts_ntid = cts.ntid;
	for (uint32_t i = 0; i < cts.ntid; i++) {
		t->tid[i] = cts.tid[i];
		t->tid_len[i] = cts.len[i];
	}
	opx_rndv_tx_submit(ep, t);
	return 0;
}

static void opx_rndv_sdma_reap_all(struct opx_ep *ep)
{
	uint64_t cookie;
	int status;

	shim_sdma_progress(ep->rndv_st.sdma);
	while (shim_sdma_reap(ep->rndv_st.sdma, &cookie, &status) == 1) {
		struct opx_rndv_tx *t = opx_rndv_tx_lookup(ep, cookie);

		ep->rndv_st.sdma_reqs--;
		if (!t || !t->sdma_left)
			continue;
		if (status)
			t->err = FI_EIO;
		if (--t->sdma_left == 0 && t->cts_next == t->cts_ntid)
			opx_rndv_tx_release(ep, t, t->err);
	}
}

/* ---------------------------------------------------------------------
 * Target.
 */
/* The sender's iovec (from its RTS), bytes [off, off + len). */
static size_t opx_rndv_rts_slice(const struct opx_rts_payload *rts, size_t off, size_t len,
				 struct iovec *out)
{
	struct iovec v[OPX_IOV_LIMIT];

	for (uint32_t i = 0; i < rts->iov_count; i++) {
		v[i].iov_base = (void *)(uintptr_t)rts->iov_base[i];
		v[i].iov_len = rts->iov_len[i];
	}
	return opx_iov_slice(v, rts->iov_count, off, len, out);
}

/* Split copy: the sender writes the second half (CTW) while we read the
 * first, so two cores copy at once.  Only after a plain pull succeeded on
 * this endpoint, so a refused CMA never strands half a message.
 * Returns 0 when started, -FI_EAGAIN when it cannot be (plain pull then). */
static int opx_rndv_split(struct opx_ep *ep, struct opx_rx_req *req, size_t off, size_t cap,
			  struct opx_ux *ux, size_t len, struct shim_peer *peer)
{
	struct opx_rndv_rx *x = ep->rndv_st.rndv_rx_free;
	struct iovec liov[OPX_IOV_LIMIT], riov[OPX_IOV_LIMIT];
	size_t half = (len / 2) & ~(size_t)4095;
	struct opx_ctw_payload w = {0};
	size_t lcnt, rcnt;
	ssize_t n;

	if (!x || !half)
		return -FI_EAGAIN;
	opx_rndv_rx_take(ep, x, req, off, cap, ux, len, peer);
	x->ntid = 0;
	x->rts = ux->rts;
	x->half = half;

	lcnt = opx_iov_slice(req->iov, req->iov_count, off + half, len - half, liov);
	w.pid = ep->pid; /* diagnostics: the sender writes to its verified record of us */
	w.iov_count = (uint32_t)lcnt;
	w.off = half;
	w.len = len - half;
	for (size_t i = 0; i < lcnt; i++) {
		w.iov_base[i] = (uint64_t)(uintptr_t)liov[i].iov_base;
		w.iov_len[i] = liov[i].iov_len;
	}
	opx_rndv_ctl_send(
		ep, peer, OPX_OP_CTW,
		&(union opx_proto_pw){
			.cts = {.cookie = ux->cookie,
				.rx_cookie = opx_rndv_cookie(x->gen, (size_t)(x - ep->rndv_st.rndv_rx))}},
		&w, sizeof(w));

	lcnt = opx_iov_slice(req->iov, req->iov_count, off, half, liov);
	rcnt = opx_rndv_rts_slice(&ux->rts, 0, half, riov);
	n = opx_rndv_cma_peer(peer, liov, lcnt, riov, rcnt, half, false);
	if (n < 0) {
		OPX_WARN(FI_LOG_EP_DATA, "cross memory attach read from lid %u ctx %u failed: %s\n",
			 peer->lid, peer->ctx, strerror((int)-n));
		x->err = FI_EIO;
	}
	/* our half is read: the sender may complete once it wrote its own */
	opx_rndv_ctl_done(ep, peer, ux->cookie, x->err ? FI_EIO : 0);
	x->placed += half;
	return 0;
}

/* 0 done (completed, DONE sent, or split started), -EPERM/-ENOSYS: CMA
 * not permitted here, -ESRCH: no verified process behind the sender's
 * context (gone, or in another pid namespace). */
static int opx_rndv_pull(struct opx_ep *ep, struct opx_rx_req *req, size_t off, size_t cap,
			 struct opx_ux *ux)
{
	struct iovec liov[OPX_IOV_LIMIT], riov[OPX_IOV_LIMIT];
	size_t len = ux->len < cap ? ux->len : cap;
	struct shim_peer *peer = opx_rndv_reply_peer(ep, &ux->rts.src, ux->src);
	uint32_t status = 0;
	pid_t pid;
	int err = 0;

	if (!peer || shim_peer_cma_pid_recorded(peer, &pid))
		return -ESRCH;
	/* Split only with a sender that has CPU to spare: while rendezvous
	 * sends of ours are in flight our peers are pulling them, and a
	 * share of the copy on top slows both directions (osu_bibw-like
	 * 64 KiB: 17.1 GB/s split, 19.1 not). */
	if (opx_env.rndv_split && len >= opx_env.rndv_split && ep->rndv_st.cma_proven && !ep->rndv_st.rndv_busy &&
	    !opx_rndv_split(ep, req, off, cap, ux, len, peer))
		return 0;
	if (len) {
		size_t lcnt = opx_iov_slice(req->iov, req->iov_count, off, len, liov);
		size_t rcnt = opx_rndv_rts_slice(&ux->rts, 0, len, riov);
		ssize_t n = opx_rndv_cma_peer(peer, liov, lcnt, riov, rcnt, len, false);

		if (n == -EPERM || n == -ENOSYS)
			return (int)n;
		if (n < 0) {
			OPX_WARN(FI_LOG_EP_DATA, "cross memory attach read from pid %d failed: %s\n",
				 (int)pid, strerror((int)-n));
			err = FI_EIO;
			status = FI_EIO;
		} else {
			ep->rndv_st.cma_proven = true;
		}
	}
	opx_complete_rx(ep, req, off, cap, ux->len, ux->tag, ux->data, ux->pflags, ux->src, err);
	opx_rndv_ctl_done(ep, peer, ux->cookie, (uint32_t)status);
	return 0;
}

/* Fallback: register the receive buffer and ask the sender to push.
 * -FI_EAGAIN: no slot or TID now (retried from progress). */
static int opx_rndv_cts(struct opx_ep *ep, struct opx_rx_req *req, size_t off, size_t cap,
			struct opx_ux *ux)
{
	struct opx_rndv_rx *x = ep->rndv_st.rndv_rx_free;
	struct opx_cts_payload cts = {0};
	struct iovec liov[OPX_IOV_LIMIT];
	size_t expect = ux->len < cap ? ux->len : cap;
	size_t lcnt = opx_iov_slice(req->iov, req->iov_count, off, expect, liov);
	struct shim_peer *peer = opx_rndv_reply_peer(ep, &ux->rts.src, ux->src);

	if (!peer || !shim_peer_alive(peer)) {
		OPX_WARN(FI_LOG_EP_DATA, "rendezvous sender context gone\n");
		opx_complete_rx(ep, req, off, cap, ux->len, ux->tag, ux->data, ux->pflags, ux->src,
				FI_EIO);
		return 0;
	}
	if (!x)
		return -FI_EAGAIN;
	x->ntid = 0;
	for (size_t i = 0; i < lcnt; i++) {
		if (shim_tid_register(ep->shim, liov[i].iov_base, liov[i].iov_len, &x->tid[i])) {
			while (x->ntid)
				shim_tid_release(ep->shim, x->tid[--x->ntid]);
			return -FI_EAGAIN; /* TID table full of live receives */
		}
		x->ntid++;
		/* only the rendezvous sender's packets may land in it */
		shim_tid_bind(ep->shim, x->tid[i], peer->lid, peer->ctx);
		cts.tid[i] = x->tid[i];
		cts.len[i] = liov[i].iov_len;
	}
	cts.ntid = x->ntid;
	opx_rndv_rx_take(ep, x, req, off, cap, ux, expect, peer);
	opx_rndv_ctl_send(
		ep, peer, OPX_OP_CTS,
		&(union opx_proto_pw){
			.cts = {.cookie = ux->cookie,
				.rx_cookie = opx_rndv_cookie(x->gen, (size_t)(x - ep->rndv_st.rndv_rx))}},
		&cts, sizeof(cts));
	if (!expect) {
		opx_complete_rx(ep, req, off, cap, x->total, x->tag, x->data, x->pflags, x->src, 0);
		opx_rndv_rx_free(ep, x);
	}
	return 0;
}

/* A receive matched a rendezvous message.  Returns 0 when the unexpected
 * descriptor can be freed, -FI_EAGAIN when it waits on ep->rndv_st.cts_defer. */
int opx_rndv_match(struct opx_ep *ep, struct opx_rx_req *req, size_t off, size_t cap,
		   struct opx_ux *ux)
{
	int rc;

	if (ep->rndv_st.cma_ok) {
		rc = opx_rndv_pull(ep, req, off, cap, ux);
		if (!rc)
			return 0;
		if (rc == -ESRCH) {
			/* this sender only: push it (or fail it if it is gone) */
			OPX_INFO(FI_LOG_EP_DATA, "no verified process behind lid %u ctx %u: push\n",
				 ux->rts.src.lid, ux->rts.src.ctx);
		} else {
			OPX_WARN(FI_LOG_EP_DATA,
				 "cross memory attach not permitted (%s): using the SDMA/TID path\n",
				 strerror(-rc));
			ep->rndv_st.cma_ok = false;
		}
	}
	rc = opx_rndv_cts(ep, req, off, cap, ux);
	if (rc) {
		ux->waiting = req;
		ux->waiting_off = off;
		ux->waiting_cap = cap;
		opx_list_insert_tail(&ep->rndv_st.cts_defer, &ux->link);
	}
	return rc;
}

int opx_rndv_rx_data(struct opx_ep *ep, const struct shim_rhq_entry *e, const uint8_t *pay)
{
	const struct shim_pkt_hdr *h = &e->hdr;
	uint32_t idx = (uint32_t)h->tag;
	struct opx_rndv_rx *x;
	bool ours = false;

	(void)pay; /* TID data is placed by the shim */

	if (idx >= OPX_RNDV_SLOTS || !ep->rndv_st.rndv_rx[idx].busy ||
	    ep->rndv_st.rndv_rx[idx].gen != (h->tag >> 32) || !(e->rhf & SHIM_RHF_TID)) {
		opx_rndv_stray(ep, "DATA for an unknown receive");
		return 0;
	}
	x = &ep->rndv_st.rndv_rx[idx];
	if (!opx_rndv_from(h, x->peer)) {
		opx_rndv_stray(ep, "DATA from another peer");
		return 0;
	}
	for (uint32_t i = 0; i < x->ntid; i++)
		ours |= x->tid[i] == opx_proto_pw(h).tid.handle;
	if (!ours || x->placed + h->paylen > x->expect || shim_tid_place(ep->shim, e)) {
		opx_drop_proto(ep, "DATA outside its receive");
		return 0;
	}
	x->placed += h->paylen;
	if (x->placed == x->expect) {
		opx_rel_ack_soon(x->peer); /* the sender's completion waits for it */
		opx_complete_rx(ep, x->req, x->off, x->cap, x->total, x->tag, x->data, x->pflags,
				x->src, 0);
		opx_rndv_rx_free(ep, x);
	}
	return 0;
}

/* Sender: write our part of a split copy into the receiver's buffer.  The
 * only process written to is the receiver of this send as the shim
 * verified it, never a pid from the packet; one CTW per send.  When the
 * write is refused (the receiver is not dumpable, Yama...), WDONE says so
 * and the receiver pulls that part itself; the send then completes on its
 * second DONE. */
int opx_rndv_rx_ctw(struct opx_ep *ep, const struct shim_rhq_entry *e, const uint8_t *pay)
{
	const struct shim_pkt_hdr *h = &e->hdr;
	union opx_proto_pw cw = opx_proto_pw(h);
	struct opx_rndv_tx *t = opx_rndv_tx_lookup(ep, cw.cts.cookie);
	struct iovec liov[OPX_IOV_LIMIT], riov[OPX_IOV_LIMIT];
	struct opx_ctw_payload w;
	uint64_t sum = 0;
	uint32_t status = 0;
	size_t lcnt;

	if (!t || t->cts_ntid || h->paylen != sizeof(w)) {
		opx_rndv_stray(ep, "CTW for an unknown send");
		return 0;
	}
	if (!opx_rndv_from(h, t->peer) || t->ctw_seen) {
		opx_rndv_stray(ep, "CTW from another peer, or repeated");
		return 0;
	}
	memcpy(&w, pay, sizeof(w));
	if (w.iov_count > OPX_IOV_LIMIT || w.off > t->len || w.len > t->len - w.off) {
		opx_drop_proto(ep, "CTW outside the message");
		return 0;
	}
	for (uint32_t i = 0; i < w.iov_count; i++) {
		riov[i].iov_base = (void *)(uintptr_t)w.iov_base[i];
		riov[i].iov_len = w.iov_len[i];
		if (w.iov_len[i] > w.len)
			sum = UINT64_MAX; /* and no wrap below */
		else if (sum != UINT64_MAX)
			sum += w.iov_len[i];
	}
	if (sum != w.len) {
		opx_drop_proto(ep, "CTW with inconsistent lengths");
		return 0;
	}
	t->ctw_seen = true;
	lcnt = opx_iov_slice(t->iov, t->iov_count, w.off, w.len, liov);
	if (w.len) {
		ssize_t n = opx_rndv_cma_peer(t->peer, liov, lcnt, riov, w.iov_count, w.len, true);
		if (n < 0) {
			OPX_INFO(FI_LOG_EP_DATA,
				 "cross memory attach write to lid %u ctx %u refused (%s): the "
				 "receiver pulls it\n",
				 t->peer->lid, t->peer->ctx, strerror((int)-n));
			status = OPX_WDONE_REFUSED;
			t->dones_left = 2;
		}
	}
	opx_rndv_ctl_send(ep, t->peer, OPX_OP_WDONE,
			  &(union opx_proto_pw){.wdone = {.rx_cookie = cw.cts.rx_cookie,
							  .status = (uint32_t)status}},
			  NULL, 0);
	return 0;
}

/* Receiver: the sender's part of a split copy has landed, or the sender
 * could not write it and we pull it ourselves (then a second DONE lets
 * the sender complete). */
int opx_rndv_rx_wdone(struct opx_ep *ep, const struct shim_rhq_entry *e, const uint8_t *pay)
{
	const struct shim_pkt_hdr *h = &e->hdr;
	union opx_proto_pw w = opx_proto_pw(h);
	uint32_t idx = (uint32_t)w.wdone.rx_cookie;
	struct opx_rndv_rx *x;

	(void)pay; /* none */

	if (idx >= OPX_RNDV_SLOTS || !ep->rndv_st.rndv_rx[idx].busy ||
	    ep->rndv_st.rndv_rx[idx].gen != (w.wdone.rx_cookie >> 32) || ep->rndv_st.rndv_rx[idx].ntid) {
		opx_rndv_stray(ep, "WDONE for an unknown receive");
		return 0;
	}
	x = &ep->rndv_st.rndv_rx[idx];
	if (!opx_rndv_from(h, x->peer)) {
		opx_rndv_stray(ep, "WDONE from another peer");
		return 0;
	}
	if (w.wdone.status == OPX_WDONE_REFUSED) {
		struct iovec liov[OPX_IOV_LIMIT], riov[OPX_IOV_LIMIT];
		size_t part = x->expect - x->half;
		size_t lcnt = opx_iov_slice(x->req->iov, x->req->iov_count, x->off + x->half, part,
					    liov);
		size_t rcnt = opx_rndv_rts_slice(&x->rts, x->half, part, riov);
		ssize_t n = opx_rndv_cma_peer(x->peer, liov, lcnt, riov, rcnt, part, false);

		if (n < 0) {
			OPX_WARN(FI_LOG_EP_DATA, "split copy fallback pull failed: %s\n",
				 strerror((int)-n));
			x->err = FI_EIO;
		}
		opx_rndv_ctl_done(ep, x->peer, x->tx_cookie, n < 0 ? FI_EIO : 0);
	} else if (w.wdone.status) {
		x->err = FI_EIO;
	}
	opx_complete_rx(ep, x->req, x->off, x->cap, x->total, x->tag, x->data, x->pflags, x->src,
			x->err);
	opx_rndv_rx_free(ep, x);
	return 0;
}

/* Deferred work: control packets, SDMA, receives waiting for TIDs. */
void opx_rndv_progress(struct opx_ep *ep)
{
	struct opx_list *it, *tmp;

	if (!opx_list_empty(&ep->rndv_st.ctl_pend))
		opx_rndv_ctl_retry(ep);
	if (ep->rndv_st.sdma_reqs)
		opx_rndv_sdma_reap_all(ep);
	opx_list_foreach_safe(&ep->rndv_st.sdma_wait, it, tmp)
	{
		opx_rndv_tx_submit(ep, OPX_CONTAINER_OF(it, struct opx_rndv_tx, link));
	}
	opx_list_foreach_safe(&ep->rndv_st.cts_defer, it, tmp)
	{
		struct opx_ux *ux = OPX_CONTAINER_OF(it, struct opx_ux, link);
		opx_list_remove(&ux->link);
		if (opx_rndv_cts(ep, ux->waiting, ux->waiting_off, ux->waiting_cap, ux)) {
			opx_list_insert_head(&ep->rndv_st.cts_defer, &ux->link);
			break;
		}
		opx_ux_put(ep, ux);
	}
}
