/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_peer.c - peers that die or go away: senders killed mid-packet
 * (driver-shim/shim_claim.c and the provider's receive), a receiver
 * that died (prov/opx_rndv_peer.c, opx_av_peer.c), and an AV entry
 * removed under a rendezvous in flight.
 *
 *  - a sender killed between reserving header entries and publishing them
 *    (shim level and through the provider): the hole is skipped within
 *    bounded time, other senders' packets arrive intact and in order, the
 *    credits come back, and a live but slow sender is never skipped;
 *  - claim slots of dead senders taken over, more senders than slots;
 *  - sends to, and directed receives from, a receiver that died;
 *  - fi_av_remove while a rendezvous with that peer is in flight;
 *  - a one-sided target's cached peer of a sender that went away, and its
 *    context number taken again: answered by the nonce the request
 *    carries, never through the gone one.
 * Peers that lie (forged rendezvous packets, the split copy refused) are
 * in test_peer_forged.c, the split copy's other choices in
 * test_peer_split.c; what they share is peer_fixture.c.
 *
 * Shim-level tests use unit SHIM_MAX_UNITS - 2 with tiny rings, so that
 * test_shim (last unit) and the provider suites (unit 0) running at the
 * same time are not disturbed.  Every wait is bounded in time.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peer_fixture.h"

#include "../../driver-shim/shim_internal.h"
#include "opx_ep.h"
#include "opx_rndv_api.h"

#define TP_MTU 1024u
#define TP_HDRQ 64u
#define TP_EGR (16u * 1024u)
#define TP_UNIT ((int)SHIM_MAX_UNITS - 2)
#define TP_JKEY 0x5150

/* ---------------------------------------------------------------------
 * Shim level: a receive context in this process, senders in others.
 */
static struct shim_dev *tp_dev_open(void)
{
	struct shim_dev_params p = {
		.num_units = (int)SHIM_MAX_UNITS,
		.force_unit = -1,
		.mtu = TP_MTU,
		.hdrq_cnt = TP_HDRQ,
		.egr_bytes = TP_EGR,
		.jkey = TP_JKEY,
	};
	struct shim_dev *dev = NULL;

	assert_int_equal(shim_dev_open(&p, &dev), 0);
	return dev;
}

/* One packet of source src, number seq: len bytes of pattern, inline
 * when it fits.  0, -EAGAIN; no cmocka asserts (children use it). */
static int tp_send(struct shim_peer *p, uint32_t src, uint32_t seq, uint32_t len)
{
	struct shim_pio_resv r = {0};
	struct shim_rhq_entry *e;
	uint8_t *dst;
	int ret = shim_pio_reserve(p, 1, len <= SHIM_INLINE_MAX ? 0 : len, &r);

	if (ret)
		return ret;
	e = shim_pio_entry(p, &r, 0);
	memset(&e->hdr, 0, sizeof(e->hdr));
	e->hdr.opcode = 1;
	e->hdr.jkey = p->jkey;
	e->hdr.dlid = p->lid;
	e->hdr.dctx = p->ctx;
	e->hdr.paylen = len;
	e->hdr.psn = seq;
	e->hdr.tag = src;
	dst = len <= SHIM_INLINE_MAX ? e->hdr.p.inl : r.egr;
	tp_fill(dst, len, src * 1000u + seq);
	shim_pio_publish(p, &r, 0, len <= SHIM_INLINE_MAX ? 0 : shim_rhf_egr(p, &r, 0));
	return 0;
}

/* A child that maps addr, reserves npkts entries and nbytes of eager space,
 * publishes the first npub of them (garbage-free: valid lengths), tells
 * the parent through the pipe and waits to be killed.  Returns its pid. */
static pid_t tp_reserver(const struct shim_addr *addr, uint32_t npkts, uint32_t nbytes,
			 uint32_t npub)
{
	int up[2];
	pid_t pid;
	char c;

	assert_int_equal(pipe(up), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct shim_dev_params p = {.force_unit = -1};
		struct shim_pio_resv r = {0};
		struct shim_dev *dev;
		struct shim_peer *peer;

		close(up[0]);
		if (shim_dev_open(&p, &dev) || shim_peer_open(dev, addr, &peer))
			_exit(2);
		if (shim_pio_reserve(peer, npkts, nbytes, &r))
			_exit(3);
		for (uint32_t i = 0; i < npub; i++) {
			struct shim_rhq_entry *e = shim_pio_entry(peer, &r, i);

			memset(&e->hdr, 0, sizeof(e->hdr));
			e->hdr.opcode = 1;
			e->hdr.jkey = peer->jkey;
			e->hdr.dlid = peer->lid;
			e->hdr.dctx = peer->ctx;
			e->hdr.tag = 0xdead;
			shim_pio_publish(peer, &r, i, 0);
		}
		c = 'r';
		if (write(up[1], &c, 1) != 1)
			_exit(4);
		for (int i = 0; i < 600; i++)
			sleep(1); /* killed long before */
		_exit(5);
	}
	close(up[1]);
	assert_int_equal(read(up[0], &c, 1), 1);
	close(up[0]);
	return pid;
}


/* Drain: returns the number of entries consumed within ms, checking each
 * live packet (source src, in order from *next) and counting dead ones. */
static uint32_t tp_drain(struct shim_ctx *ctx, uint32_t src, uint32_t *next, uint32_t want,
			 uint32_t *dead, unsigned ms)
{
	struct shim_rx *rx = shim_ctx_rx(ctx);
	uint64_t end = fx_now_ms() + ms;
	uint32_t got = 0;

	while (got < want && fx_now_ms() < end) {
		struct shim_rhq_entry *e = shim_rx_peek(rx);

		if (!e) {
			shim_claim_rx_recover(ctx);
			sched_yield();
			continue;
		}
		if ((e->rhf & SHIM_RHF_ERR_DEAD) || e->hdr.tag == 0xdead) {
			(*dead)++; /* filled by the shim, or published before death */
		} else {
			const uint8_t *pl = shim_rx_payload(rx, e);

			assert_non_null(pl);
			assert_int_equal(e->hdr.tag, src);
			assert_int_equal(e->hdr.psn, *next);
			assert_true(tp_intact(pl, e->hdr.paylen, src * 1000u + *next));
			(*next)++;
		}
		shim_rx_release(rx, e);
		got++;
	}
	return got;
}

/* A sender killed with entries reserved, some published and some not:
 * the hole is skipped within bounded time, the live sender's packets all
 * arrive intact and in order, and every credit comes back. */
static void test_hole_dead_sender(void **state)
{
	struct shim_dev *dev = tp_dev_open();
	struct shim_ctx *ctx;
	struct shim_rx *rx;
	struct shim_addr addr;
	struct shim_peer *live;
	uint32_t next = 0, dead = 0, sent = 0;
	uint64_t t0;
	pid_t pid;

	(void)state;
	assert_int_equal(shim_ctx_open(dev, TP_UNIT, &ctx, NULL, NULL), 0);
	rx = shim_ctx_rx(ctx);
	shim_ctx_addr(ctx, &addr);
	assert_int_equal(shim_peer_open(dev, &addr, &live), 0);

	/* two packets of the live sender before the hole */
	for (; sent < 2; sent++)
		assert_int_equal(tp_send(live, 7, sent, 100), 0);
	/* 3 entries + 2.5 KiB eager reserved, the first published, then killed */
	pid = tp_reserver(&addr, 3, 2560, 1);
	tp_kill(pid);
	/* packets behind the hole: more than the ring holds in total, so the
	 * live sender can only finish if the hole's credits come back */
	t0 = fx_now_ms();
	while (sent < 3 * TP_HDRQ && fx_now_ms() < t0 + TP_WAIT_MS) {
		if (tp_send(live, 7, sent, (sent * 37u) % (TP_MTU + 1)) == 0)
			sent++;
		else
			tp_drain(ctx, 7, &next, 1, &dead, 1);
	}
	assert_int_equal(sent, 3 * TP_HDRQ);
	while (next < sent && fx_now_ms() < t0 + TP_WAIT_MS)
		tp_drain(ctx, 7, &next, sent - next, &dead, 10);
	assert_int_equal(next, sent);
	/* the first entry of the dead reservation arrives as published, the
	 * two unpublished ones as filled by the shim */
	assert_int_equal(dead, 3);
	assert_true(fx_now_ms() - t0 < TP_WAIT_MS);
	assert_int_equal(atomic_load(&rx->ctl->holes_skipped), 2);
	/* all credits returned: heads equal the tail */
	uint64_t tail = atomic_load(&rx->ctl->tail);
	assert_int_equal(atomic_load(&rx->ctl->hdr_head), (uint32_t)tail);
	assert_int_equal(atomic_load(&rx->ctl->egr_head), (uint32_t)(tail >> 32));
	assert_int_equal(rx->head, (uint32_t)tail);

	shim_peer_close(live);
	shim_ctx_close(ctx);
	shim_dev_close(dev);
}

/* A live sender that holds a reservation for longer than the grace period
 * is never skipped: its packet arrives intact once published. */
static void test_hole_live_sender_waits(void **state)
{
	struct shim_dev *dev = tp_dev_open();
	struct shim_ctx *ctx;
	struct shim_rx *rx;
	struct shim_addr addr;
	struct shim_peer *slow, *other;
	struct shim_pio_resv r = {0};
	struct shim_rhq_entry *e;
	uint64_t end;

	(void)state;
	assert_int_equal(shim_ctx_open(dev, TP_UNIT, &ctx, NULL, NULL), 0);
	rx = shim_ctx_rx(ctx);
	shim_ctx_addr(ctx, &addr);
	assert_int_equal(shim_peer_open(dev, &addr, &slow), 0);
	assert_int_equal(shim_peer_open(dev, &addr, &other), 0);

	assert_int_equal(shim_pio_reserve(slow, 1, 200, &r), 0);
	assert_int_equal(tp_send(other, 9, 0, 50), 0);
	end = fx_now_ms() + 4 * SHIM_HOLE_GRACE_NS / 1000000u + 50;
	while (fx_now_ms() < end) {
		assert_int_equal(shim_claim_rx_recover(ctx), 0);
		assert_null(shim_rx_peek(rx));
		usleep(2000);
	}
	assert_true(ctx->hole.waits > 0);
	e = shim_pio_entry(slow, &r, 0);
	memset(&e->hdr, 0, sizeof(e->hdr));
	e->hdr.tag = 8;
	e->hdr.paylen = 200;
	tp_fill(r.egr, 200, 8000);
	shim_pio_publish(slow, &r, 0, shim_rhf_egr(slow, &r, 0));
	e = shim_rx_peek(rx);
	assert_non_null(e);
	assert_int_equal(e->rhf & SHIM_RHF_ERR_DEAD, 0);
	assert_int_equal(e->hdr.tag, 8);
	assert_true(tp_intact(shim_rx_payload(rx, e), 200, 8000));
	shim_rx_release(rx, e);
	uint32_t next = 0, dead = 0;
	assert_int_equal(tp_drain(ctx, 9, &next, 1, &dead, TP_WAIT_MS), 1);
	assert_int_equal(dead, 0);
	assert_int_equal(atomic_load(&rx->ctl->holes_skipped), 0);

	shim_peer_close(slow);
	shim_peer_close(other);
	shim_ctx_close(ctx);
	shim_dev_close(dev);
}

/* Claim slots: every open peer holds one, closing frees it, a dead
 * holder's slot is taken over once its reservation is behind the head,
 * and more senders than slots get -EUSERS rather than an unguarded slot. */
static void test_claim_slots(void **state)
{
	struct shim_dev *dev = tp_dev_open();
	struct shim_peer **peers = calloc(SHIM_CLAIM_SLOTS, sizeof(*peers));
	struct shim_ctx *ctx;
	struct shim_addr addr;
	struct shim_peer *extra;
	uint32_t next = 0, dead = 0;
	pid_t pid;

	(void)state;
	assert_non_null(peers);
	/* every open peer keeps one descriptor (its claim lock) */
	struct rlimit rl;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < SHIM_CLAIM_SLOTS + 256 && rl.rlim_max >= SHIM_CLAIM_SLOTS + 256) {
		rl.rlim_cur = SHIM_CLAIM_SLOTS + 256;
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	if (rl.rlim_cur < SHIM_CLAIM_SLOTS + 256)
		skip();
	assert_int_equal(shim_ctx_open(dev, TP_UNIT, &ctx, NULL, NULL), 0);
	shim_ctx_addr(ctx, &addr);
	/* a dead holder with a published (resolved) reservation */
	pid = tp_reserver(&addr, 1, 0, 1);
	tp_kill(pid);
	assert_int_equal(tp_drain(ctx, 0, &next, 1, &dead, TP_WAIT_MS), 1);
	assert_int_equal(dead, 1);
	/* all slots, the dead holder's included */
	for (uint32_t i = 0; i < SHIM_CLAIM_SLOTS; i++)
		assert_int_equal(shim_peer_open(dev, &addr, &peers[i]), 0);
	assert_int_equal(shim_peer_open(dev, &addr, &extra), -EUSERS);
	shim_peer_close(peers[5]);
	assert_int_equal(shim_peer_open(dev, &addr, &peers[5]), 0);
	/* get/put: the mapping outlives the first close */
	assert_ptr_equal(shim_peer_get(peers[6]), peers[6]);
	shim_peer_close(peers[6]);
	assert_int_equal(tp_send(peers[6], 6, 0, 0), 0);
	assert_int_equal(shim_peer_open(dev, &addr, &extra), -EUSERS);
	for (uint32_t i = 0; i < SHIM_CLAIM_SLOTS; i++)
		shim_peer_close(peers[i]);
	assert_int_equal(shim_peer_open(dev, &addr, &extra), 0);
	shim_peer_close(extra);
	free(peers);
	shim_ctx_close(ctx);
	shim_dev_close(dev);
}

/* ---------------------------------------------------------------------
 * Provider level.
 */

/* Through the provider: a process killed in the middle of a multi-packet
 * message (first packet published, the rest reserved) must not make the
 * endpoint deaf.  The receive it had matched completes in error; later
 * messages from a live sender (eager and rendezvous) arrive intact. */
static void test_hole_provider(void **state)
{
	struct tp_env *t = *state;
	struct shim_addr ra = tp_name(t->fx.ep);
	size_t big = 300 * 1024, mtu = 8192;
	uint8_t *ra_buf = calloc(1, 3 * mtu), *b_buf = calloc(1, 100), *c_buf = calloc(1, big);
	uint8_t *b_src = malloc(100), *c_src = malloc(big);
	struct fx_comp c;
	int up[2];
	pid_t pid;
	char ch;

	assert_true(ra_buf && b_buf && c_buf && b_src && c_src);
	tp_open_ep(t, &t->ep2, &t->a2);
	tp_fill(b_src, 100, 2);
	tp_fill(c_src, big, 3);
	assert_int_equal(fi_trecv(t->fx.ep, ra_buf, 3 * mtu, NULL, FI_ADDR_UNSPEC, 0xd0, 0, &ra_buf),
			 0);
	assert_int_equal(fi_trecv(t->fx.ep, b_buf, 100, NULL, FI_ADDR_UNSPEC, 0xb0, 0, &b_buf), 0);
	assert_int_equal(fi_trecv(t->fx.ep, c_buf, big, NULL, FI_ADDR_UNSPEC, 0xc0, 0, &c_buf), 0);

	assert_int_equal(pipe(up), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct shim_dev_params p = {.force_unit = -1};
		struct shim_pio_resv r = {0};
		struct shim_rhq_entry *e;
		struct shim_dev *dev;
		struct shim_peer *peer;

		if (shim_dev_open(&p, &dev) || shim_peer_open(dev, &ra, &peer))
			_exit(2);
		if (shim_pio_reserve(peer, 3, (uint32_t)(3 * peer->mtu), &r))
			_exit(3);
		e = shim_pio_entry(peer, &r, 0);
		memset(&e->hdr, 0, sizeof(e->hdr));
		e->hdr.opcode = OPX_OP_MP_FIRST;
		e->hdr.flags = OPX_PF_TAGGED;
		e->hdr.jkey = peer->jkey;
		e->hdr.slid = ra.lid;
		e->hdr.sctx = (uint16_t)(SHIM_MAX_CTXTS - 1);
		e->hdr.dlid = peer->lid;
		e->hdr.dctx = peer->ctx;
		e->hdr.paylen = peer->mtu;
		e->hdr.msgid = 77;
		e->hdr.tag = 0xd0;
		opx_proto_pw_set(&e->hdr,
				 &(union opx_proto_pw){.mp_first = {.total = 3ull * peer->mtu}});
		memset(r.egr, 0x5a, peer->mtu);
		shim_pio_publish(peer, &r, 0, shim_rhf_egr(peer, &r, 0));
		ch = 'r';
		if (write(up[1], &ch, 1) != 1)
			_exit(4);
		for (int i = 0; i < 600; i++)
			sleep(1);
		_exit(5);
	}
	close(up[1]);
	assert_int_equal(read(up[0], &ch, 1), 1);
	close(up[0]);
	tp_kill(pid);

	tp_tsend(t, t->ep2, b_src, 100, t->fx.self, 0xb0, b_src);
	tp_tsend(t, t->ep2, c_src, big, t->fx.self, 0xc0, c_src);
	assert_int_equal(tp_wait(t, &ra_buf, &c, TP_WAIT_MS), 0);
	assert_int_equal(c.err, FI_EIO);
	assert_int_equal(tp_wait(t, &b_buf, &c, TP_WAIT_MS), 0);
	assert_int_equal(c.err, 0);
	assert_int_equal(c.e.len, 100);
	assert_true(tp_intact(b_buf, 100, 2));
	assert_int_equal(tp_wait(t, &c_buf, &c, TP_WAIT_MS), 0);
	assert_int_equal(c.err, 0);
	assert_int_equal(c.e.len, big);
	assert_true(tp_intact(c_buf, big, 3));
	assert_int_equal(tp_wait(t, b_src, &c, TP_WAIT_MS), 0);
	assert_int_equal(tp_wait(t, c_src, &c, TP_WAIT_MS), 0);
	assert_int_equal(c.err, 0);
	free(ra_buf);
	free(b_buf);
	free(c_buf);
	free(b_src);
	free(c_src);
}

/* fi_av_remove of both ends of a rendezvous in flight (item 6): the
 * split copy's CTW reaches the sender after its AV entry for the receiver
 * is gone, and the sender answers through the peer its send holds.  Must
 * not crash (run under ASan too) and the data must arrive intact. */
static void test_av_remove_inflight(void **state)
{
	struct tp_env *t = *state;
	size_t big = 1 << 20;
	uint8_t *src = malloc(big), *dst = calloc(1, big);
	fi_addr_t both[2];
	struct fx_comp c;

	assert_true(src && dst);
	tp_open_ep(t, &t->ep2, &t->a2);
	/* one plain pull first: the split copy is only tried once CMA worked */
	tp_fill(src, big, 11);
	assert_int_equal(fi_trecv(t->fx.ep, dst, big, NULL, FI_ADDR_UNSPEC, 0x61, 0, dst), 0);
	tp_tsend(t, t->ep2, src, big, t->fx.self, 0x61, src);
	assert_int_equal(tp_wait(t, dst, &c, TP_WAIT_MS), 0);
	assert_int_equal(c.err, 0);
	assert_true(tp_intact(dst, big, 11));
	assert_int_equal(tp_wait(t, src, &c, TP_WAIT_MS), 0);

	memset(dst, 0, big);
	tp_fill(src, big, 12);
	assert_int_equal(fi_trecv(t->fx.ep, dst, big, NULL, FI_ADDR_UNSPEC, 0x62, 0, dst), 0);
	tp_tsend(t, t->ep2, src, big, t->fx.self, 0x62, src);
	both[0] = t->fx.self;
	both[1] = t->a2;
	assert_int_equal(fi_av_remove(t->fx.av, both, 2, 0), 0);
	assert_int_equal(tp_wait(t, dst, &c, TP_WAIT_MS), 0);
	assert_int_equal(c.err, 0);
	assert_int_equal(c.e.len, big);
	assert_true(tp_intact(dst, big, 12));
	assert_int_equal(tp_wait(t, src, &c, TP_WAIT_MS), 0);
	assert_int_equal(c.err, 0);
	free(src);
	free(dst);
}

/* ---------------------------------------------------------------------
 * Whom a one-sided target answers (opx_rndv_src_peer).
 */

static struct shim_peer *tp_src_peer(struct tp_env *t, const struct shim_addr *a, uint32_t nonce)
{
	struct opx_ep *ep = opx_ep_of(t->fx.ep);
	struct shim_peer *p;

	opx_lock_acquire(&ep->domain->lock);
	p = opx_rndv_src_peer(ep, a->lid, a->ctx, nonce, FI_ADDR_NOTAVAIL);
	opx_lock_release(&ep->domain->lock);
	return p;
}

/* An initiator the target's AV does not have is answered through the
 * target's cache of peers by (lid, ctx).  A request carrying the cached
 * peer's nonce (in hdr.psn) comes from that very context: it is answered
 * through the cache without asking the kernel whether the peer lives,
 * even once it is gone (the answer is merely lost, as it would be a
 * moment later).  A request without a nonce, or with another one (the
 * context number taken again by a new endpoint), never gets the cached
 * peer of a context that is gone: the new owner's, or none. */
static void test_src_peer_nonce(void **state)
{
	struct tp_env *t = *state;
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
	struct hfi1_ctxt_info ci;
	struct hfi1_base_info bi;
	struct shim_ctx *c;
	struct fid_ep *b;
	struct fid_cq *cq;
	struct shim_addr ab, ac;
	struct shim_peer *p, *q;

	assert_int_equal(fi_cq_open(t->fx.domain, &ca, &cq, NULL), 0);
	tp_ep_on(t, cq, &b); /* not inserted in the target's AV */
	ab = tp_name(b);
	assert_int_not_equal(ab.nonce, 0);

	p = tp_src_peer(t, &ab, ab.nonce);
	assert_non_null(p);
	assert_int_equal(p->addr.nonce, ab.nonce);
	assert_ptr_equal(tp_src_peer(t, &ab, ab.nonce), p); /* cached */
	assert_ptr_equal(tp_src_peer(t, &ab, 0), p);        /* alive */

	assert_int_equal(fi_close(&b->fid), 0);
	assert_ptr_equal(tp_src_peer(t, &ab, ab.nonce), p); /* the sender itself */
	q = tp_src_peer(t, &ab, 0);
	assert_true(q != p);
	assert_true(q == NULL || q->addr.nonce != ab.nonce);
	q = tp_src_peer(t, &ab, ab.nonce + 1);
	assert_true(q == NULL || q->addr.nonce != ab.nonce);

	/* the context number taken again, by a new context (another nonce) */
	assert_int_equal(shim_ctx_open_at(opx_ep_of(t->fx.ep)->domain->fabric->dev, ab.unit, ab.ctx,
					  0, &c, &ci, &bi),
			 0);
	shim_ctx_addr(c, &ac);
	assert_int_equal(ac.ctx, ab.ctx);
	assert_int_not_equal(ac.nonce, ab.nonce);
	q = tp_src_peer(t, &ac, ac.nonce);
	assert_non_null(q);
	assert_true(q != p);
	assert_int_equal(q->addr.nonce, ac.nonce);
	assert_ptr_equal(tp_src_peer(t, &ac, ac.nonce), q); /* cached now */
	assert_ptr_equal(tp_src_peer(t, &ac, 0), q);
	shim_ctx_close(c);
	assert_int_equal(fi_close(&cq->fid), 0);
}

/* ---------------------------------------------------------------------
 * A receiver that died (item 2).
 */


/* Sends to a receiver that died stop saying -FI_EAGAIN: once it is found
 * dead they fail with -FI_ECONNREFUSED, a rendezvous send pending towards
 * it completes in error, and so does a receive directed at it; a
 * wildcard receive keeps waiting. */
static void test_dead_receiver(void **state)
{
	struct tp_env *t = *state;
	struct shim_addr ra = tp_name(t->fx.ep), da;
	const size_t big = 128 * 1024;
	uint8_t *rbig = malloc(big), msg[4096], rbuf[64], wbuf[64];
	fi_addr_t dead;
	struct fx_comp c;
	uint64_t t0, end;
	ssize_t rc = 0;
	size_t sends = 0;
	pid_t pid;

	assert_non_null(rbig);
	pid = tp_live_ctx(ra.unit, &da);
	assert_int_equal(fi_av_insert(t->fx.av, &da, 1, &dead, 0, NULL), 1);
	/* a rendezvous send waiting for an answer that will never come */
	assert_int_equal(fi_tsend(t->fx.ep, rbig, big, NULL, dead, 0x91, rbig), 0);
	tp_kill(pid);

	t0 = fx_now_ms();
	end = t0 + TP_WAIT_MS;
	memset(msg, 0x3c, sizeof(msg));
	while (fx_now_ms() < end) {
		rc = fi_tsend(t->fx.ep, msg, sizeof(msg), NULL, dead, 0x92, NULL);
		if (rc == 0) {
			sends++;
			continue;
		}
		if (rc != -FI_EAGAIN)
			break;
		tp_poll(t);
	}
	assert_int_equal(rc, -FI_ECONNREFUSED);
	print_message("dead receiver: %zu sends taken, refused after %llu ms\n", sends,
		      (unsigned long long)(fx_now_ms() - t0));
	/* from now on at once, also for rendezvous sizes */
	assert_int_equal(fi_tsend(t->fx.ep, msg, 8, NULL, dead, 0x92, NULL), -FI_ECONNREFUSED);
	assert_int_equal(fi_tsend(t->fx.ep, rbig, big, NULL, dead, 0x92, NULL), -FI_ECONNREFUSED);
	assert_int_equal(tp_wait(t, rbig, &c, TP_WAIT_MS), 0);
	assert_int_equal(c.err, FI_ECONNREFUSED);

	assert_int_equal(fi_trecv(t->fx.ep, rbuf, sizeof(rbuf), NULL, dead, 0x93, 0, rbuf), 0);
	assert_int_equal(fi_trecv(t->fx.ep, wbuf, sizeof(wbuf), NULL, FI_ADDR_UNSPEC, 0x94, 0, wbuf),
			 0);
	assert_int_equal(tp_wait(t, rbuf, &c, TP_WAIT_MS), 0);
	assert_int_equal(c.err, FI_ECONNREFUSED);
	assert_int_equal(tp_wait(t, wbuf, &c, 200), -FI_ETIMEDOUT);
	assert_int_equal(fi_cancel(&t->fx.ep->fid, wbuf), 0);
	assert_int_equal(tp_wait(t, wbuf, &c, TP_WAIT_MS), 0);
	assert_int_equal(c.err, FI_ECANCELED);
	/* the endpoint still works */
	assert_int_equal(fi_trecv(t->fx.ep, rbuf, sizeof(rbuf), NULL, t->fx.self, 0x95, 0, rbuf), 0);
	tp_fill(msg, 64, 6);
	tp_tsend(t, t->fx.ep, msg, 64, t->fx.self, 0x95, msg);
	assert_int_equal(tp_wait(t, rbuf, &c, TP_WAIT_MS), 0);
	assert_int_equal(c.err, 0);
	assert_true(tp_intact(rbuf, 64, 6));
	free(rbig);
}

int main(void)
{
	/* test_hole_provider's dead sender cuts a 3-packet eager message
	 * short: the receiver must accept that much eagerly (it advertises
	 * its limit, and drops a first packet announcing more). */
	setenv("FI_OPX_EAGER_MAX", "32768", 0);

	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hole_dead_sender),
		cmocka_unit_test(test_hole_live_sender_waits),
		cmocka_unit_test(test_claim_slots),
		cmocka_unit_test_setup_teardown(test_hole_provider, tp_setup, tp_teardown),
		cmocka_unit_test_setup_teardown(test_av_remove_inflight, tp_setup, tp_teardown),
		cmocka_unit_test_setup_teardown(test_dead_receiver, tp_setup, tp_teardown),
		cmocka_unit_test_setup_teardown(test_src_peer_nonce, tp_setup, tp_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
