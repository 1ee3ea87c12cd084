/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_peer.c - peers that die, lie or go away (issue 6, items 1-4, 6).
 *
 *  - a sender killed between reserving header entries and publishing them
 *    (shim level and through the provider): the hole is skipped within
 *    bounded time, other senders' packets arrive intact and in order, the
 *    credits come back, and a live but slow sender is never skipped;
 *  - sends to, and directed receives from, a receiver that died;
 *  - forged rendezvous packets (RTS naming another process, DONE / CTS /
 *    CTW from a stranger);
 *  - the split copy when the receiver refuses CMA writes;
 *  - fi_av_remove while a rendezvous with that peer is in flight.
 * The split copy's other choices are in test_peer_split.c; what both
 * share is peer_fixture.c.
 *
 * Shim-level tests use unit SHIM_MAX_UNITS - 2 with tiny rings, so that
 * test_shim (last unit) and the provider suites (unit 0) running at the
 * same time are not disturbed.  Every wait is bounded in time.
 */
#include <errno.h>
#include <linux/capability.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peer_fixture.h"

#include "../../driver-shim/shim_internal.h"
#include "opx_ep.h"

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

static void tp_kill(pid_t pid)
{
	int st = 0;

	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st));
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
			shim_rx_recover(ctx);
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
		assert_int_equal(shim_rx_recover(ctx), 0);
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
static struct shim_addr tp_name(struct fid_ep *ep)
{
	struct shim_addr a;
	size_t len = sizeof(a);

	assert_int_equal(fi_getname(&ep->fid, &a, &len), 0);
	assert_int_equal(len, sizeof(a));
	return a;
}

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
		opx_pw_set(&e->hdr, &(union opx_pw){.mp_first = {.total = 3ull * peer->mtu}});
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
 * A receiver that died (item 2).
 */

/* A process with a bare receive context on unit, alive until tp_kill. */
static pid_t tp_live_ctx(int unit, struct shim_addr *a)
{
	int up[2];
	pid_t pid;

	assert_int_equal(pipe(up), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct shim_dev_params p = {.force_unit = -1};
		struct shim_dev *dev;
		struct shim_ctx *c;

		memset(a, 0, sizeof(*a));
		if (shim_dev_open(&p, &dev) == 0 && shim_ctx_open(dev, unit, &c, NULL, NULL) == 0)
			shim_ctx_addr(c, a);
		if (write(up[1], a, sizeof(*a)) != (ssize_t)sizeof(*a))
			_exit(2);
		for (int i = 0; i < 600; i++)
			sleep(1);
		_exit(3);
	}
	close(up[1]);
	assert_int_equal(read(up[0], a, sizeof(*a)), (ssize_t)sizeof(*a));
	close(up[0]);
	assert_int_not_equal(a->lid, 0);
	return pid;
}

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

/* ---------------------------------------------------------------------
 * Forged rendezvous packets (item 3).
 */

/* The CTW payload as opx_rndv.c lays it out (wire format). */
struct tp_ctw {
	uint32_t pid;
	uint32_t iov_count;
	uint64_t off;
	uint64_t len;
	uint64_t rsvd;
	uint64_t iov_base[OPX_IOV_LIMIT];
	uint64_t iov_len[OPX_IOV_LIMIT];
};
static_assert(sizeof(struct tp_ctw) == 96, "ctw payload layout");

/* A process holding len bytes of pattern seed at buf (the same address as
 * in this process, where the bytes differ).  It lives until *fd is
 * closed, then exits 0 if its bytes are untouched, 1 if someone wrote. */
static pid_t tp_victim(uint8_t *buf, size_t len, unsigned seed, int *fd)
{
	int up[2], down[2];
	pid_t pid;
	char c;

	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		tp_fill(buf, len, seed);
		c = 'r';
		if (write(up[1], &c, 1) != 1)
			_exit(2);
		struct pollfd pfd = {.fd = down[0], .events = POLLIN};
		poll(&pfd, 1, 60000);
		_exit(tp_intact(buf, len, seed) ? 0 : 1);
	}
	close(up[1]);
	close(down[0]);
	assert_int_equal(read(up[0], &c, 1), 1);
	close(up[0]);
	*fd = down[1];
	return pid;
}

static int tp_victim_end(pid_t pid, int fd)
{
	int st = 0;

	close(fd);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* A process that opens a receive context on unit and dies (SIGKILL) with
 * it: the segment stays, valid-looking, its owner gone. */
static struct shim_addr tp_dead_ctx(int unit)
{
	struct shim_addr a;
	int up[2];
	pid_t pid;

	assert_int_equal(pipe(up), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct shim_dev_params p = {.force_unit = -1};
		struct shim_dev *dev;
		struct shim_ctx *c;

		memset(&a, 0, sizeof(a));
		if (shim_dev_open(&p, &dev) == 0 && shim_ctx_open(dev, unit, &c, NULL, NULL) == 0)
			shim_ctx_addr(c, &a);
		if (write(up[1], &a, sizeof(a)) != (ssize_t)sizeof(a))
			_exit(2);
		for (int i = 0; i < 600; i++)
			sleep(1);
		_exit(3);
	}
	close(up[1]);
	assert_int_equal(read(up[0], &a, sizeof(a)), (ssize_t)sizeof(a));
	close(up[0]);
	assert_int_not_equal(a.lid, 0);
	tp_kill(pid);
	return a;
}

/* Write one packet into the context fp maps, claiming to come from
 * (slid, sctx). */
static void tp_forge(struct shim_peer *fp, uint8_t op, uint16_t slid, uint16_t sctx, uint64_t tag,
		     uint64_t p0, uint64_t p1, const void *pay, uint32_t paylen)
{
	struct shim_pio_resv r = {0};
	struct shim_rhq_entry *e;

	assert_int_equal(shim_pio_reserve(fp, 1, paylen, &r), 0);
	if (paylen)
		memcpy(r.egr, pay, paylen);
	e = shim_pio_entry(fp, &r, 0);
	memset(&e->hdr, 0, sizeof(e->hdr));
	e->hdr.opcode = op;
	e->hdr.flags = OPX_PF_TAGGED;
	e->hdr.jkey = fp->jkey;
	e->hdr.slid = slid;
	e->hdr.sctx = sctx;
	e->hdr.dlid = fp->lid;
	e->hdr.dctx = fp->ctx;
	e->hdr.paylen = paylen;
	e->hdr.tag = tag;
	e->hdr.p.u64[0] = p0;
	e->hdr.p.u64[1] = p1;
	shim_pio_publish(fp, &r, 0, paylen ? shim_rhf_egr(fp, &r, 0) : 0);
}

static struct opx_rts_payload tp_rts(const struct shim_addr *src, uint32_t pid, void *buf,
				     uint64_t len)
{
	struct opx_rts_payload rts;

	memset(&rts, 0, sizeof(rts));
	rts.src = *src;
	rts.pid = pid;
	rts.iov_count = 1;
	rts.iov_base[0] = (uint64_t)(uintptr_t)buf;
	rts.iov_len[0] = len;
	return rts;
}

/* An RTS whose pid names another process must never make us read that
 * process: the pid comes from the shim's record of the context the RTS
 * comes from, and a context whose owner died is not read at all (a
 * recycled pid would belong to a stranger). */
static void test_forged_rts(void **state)
{
	struct tp_env *t = *state;
	const size_t len = 64 * 1024;
	uint8_t *buf = malloc(len), *r1 = calloc(1, len), *r2 = calloc(1, len), *r3 = calloc(1, len);
	struct shim_dev_params dp = {.force_unit = -1};
	struct shim_addr ra = tp_name(t->fx.ep), a2, dead;
	struct opx_rts_payload rts;
	struct shim_dev *dev;
	struct shim_peer *fp;
	struct fx_comp c;
	int vfd;
	pid_t v;

	assert_true(buf && r1 && r2 && r3);
	tp_open_ep(t, &t->ep2, &t->a2);
	a2 = tp_name(t->ep2);
	tp_fill(buf, len, 21);
	v = tp_victim(buf, len, 99, &vfd); /* the secret: seed 99 at the same address */
	dead = tp_dead_ctx(ra.unit);
	assert_int_equal(shim_dev_open(&dp, &dev), 0);
	assert_int_equal(shim_peer_open(dev, &ra, &fp), 0);

	/* 1: from ep2's context, naming the victim's pid */
	assert_int_equal(fi_trecv(t->fx.ep, r1, len, NULL, FI_ADDR_UNSPEC, 0x71, 0, r1), 0);
	rts = tp_rts(&a2, (uint32_t)v, buf, len);
	tp_forge(fp, OPX_OP_RTS, a2.lid, a2.ctx, 0x71, len, 0x1234, &rts, sizeof(rts));
	assert_int_equal(tp_wait(t, r1, &c, TP_WAIT_MS), 0);
	assert_false(tp_intact(r1, len, 99)); /* never the victim's bytes */
	assert_int_equal(c.err, 0);
	assert_true(tp_intact(r1, len, 21)); /* ep2's owner is this process */

	/* 2: from a context whose owner died, naming the victim's pid */
	assert_int_equal(fi_trecv(t->fx.ep, r2, len, NULL, FI_ADDR_UNSPEC, 0x72, 0, r2), 0);
	rts = tp_rts(&dead, (uint32_t)v, buf, len);
	tp_forge(fp, OPX_OP_RTS, dead.lid, dead.ctx, 0x72, len, 0x1235, &rts, sizeof(rts));
	assert_int_equal(tp_wait(t, r2, &c, TP_WAIT_MS), 0);
	assert_false(tp_intact(r2, len, 99));
	assert_int_equal(c.err, FI_EIO);

	/* 3: iovec shorter than the message, and a source that is not the
	 * sender: both dropped, the receive stays posted */
	assert_int_equal(fi_trecv(t->fx.ep, r3, len, NULL, FI_ADDR_UNSPEC, 0x73, 0, r3), 0);
	rts = tp_rts(&a2, (uint32_t)v, buf, len / 2);
	tp_forge(fp, OPX_OP_RTS, a2.lid, a2.ctx, 0x73, len, 0x1236, &rts, sizeof(rts));
	rts = tp_rts(&a2, (uint32_t)v, buf, len);
	tp_forge(fp, OPX_OP_RTS, dead.lid, dead.ctx, 0x73, len, 0x1237, &rts, sizeof(rts));
	assert_int_equal(tp_wait(t, r3, &c, 300), -FI_ETIMEDOUT);
	assert_int_equal(fi_cancel(&t->fx.ep->fid, r3), 0);
	assert_int_equal(tp_wait(t, r3, &c, TP_WAIT_MS), 0);
	assert_int_equal(c.err, FI_ECANCELED);

	shim_peer_close(fp);
	shim_dev_close(dev);
	assert_int_equal(tp_victim_end(v, vfd), 0);
	free(buf);
	free(r1);
	free(r2);
	free(r3);
}

/* DONE, CTW from a stranger (with the right cookie) and from the right
 * peer with guessed cookies are dropped and counted; the rendezvous then
 * completes normally, once; the victim the forged CTW names is never
 * written. */
static void test_forged_ctl(void **state)
{
	struct tp_env *t = *state;
	const size_t len = 256 * 1024, vlen = 64 * 1024;
	uint8_t *src = malloc(len), *dst = calloc(1, len), *vbuf = malloc(vlen);
	struct shim_dev_params dp = {.force_unit = -1};
	struct shim_addr ra = tp_name(t->fx.ep), a2;
	struct tp_ctw w;
	struct shim_dev *dev;
	struct shim_peer *to_rx, *to_tx;
	uint64_t cookie = 0, stray0;
	uint16_t stranger;
	struct fx_comp c;
	int vfd;
	pid_t v;

	assert_true(src && dst && vbuf);
	tp_open_ep(t, &t->ep2, &t->a2);
	a2 = tp_name(t->ep2);
	tp_fill(vbuf, vlen, 5);
	v = tp_victim(vbuf, vlen, 77, &vfd);
	assert_int_equal(shim_dev_open(&dp, &dev), 0);
	assert_int_equal(shim_peer_open(dev, &ra, &to_rx), 0);
	assert_int_equal(shim_peer_open(dev, &a2, &to_tx), 0);
	stranger = (uint16_t)((ra.ctx + 100) % SHIM_MAX_CTXTS);

	tp_fill(src, len, 31);
	tp_tsend(t, t->ep2, src, len, t->fx.self, 0x81, src);
	/* the cookie, read from the RTS in the receiver's ring */
	uint32_t tail = (uint32_t)atomic_load(&to_rx->ctl->tail);
	bool found = false;
	for (uint32_t k = 1; k <= to_rx->hdrq_cnt && !found; k++) {
		const struct shim_rhq_entry *e = &to_rx->hdrq[(tail - k) & to_rx->hdrq_mask];

		if (e->hdr.opcode == OPX_OP_RTS && e->hdr.tag == 0x81) {
			cookie = opx_pw(&e->hdr).rts.cookie;
			found = true;
		}
	}
	assert_true(found);
	stray0 = opx_ep_of(t->ep2)->rndv_stray;

	memset(&w, 0, sizeof(w));
	w.pid = (uint32_t)v;
	w.iov_count = 1;
	w.off = 0;
	w.len = vlen;
	w.iov_base[0] = (uint64_t)(uintptr_t)vbuf;
	w.iov_len[0] = vlen;
	tp_forge(to_tx, OPX_OP_CTW, ra.lid, stranger, 0, cookie, 0x99, &w, sizeof(w));
	tp_forge(to_tx, OPX_OP_DONE, ra.lid, stranger, 0, cookie, 0, NULL, 0);
	for (uint64_t g = 0; g < 4; g++)
		for (uint64_t i = 0; i < 4; i++)
			tp_forge(to_tx, OPX_OP_DONE, ra.lid, ra.ctx, 0, (g << 32) | i, 0, NULL, 0);
	assert_int_equal(tp_wait(t, src, &c, 300), -FI_ETIMEDOUT);
	assert_true(opx_ep_of(t->ep2)->rndv_stray >= stray0 + 18);

	assert_int_equal(fi_trecv(t->fx.ep, dst, len, NULL, FI_ADDR_UNSPEC, 0x81, 0, dst), 0);
	assert_int_equal(tp_wait(t, dst, &c, TP_WAIT_MS), 0);
	assert_int_equal(c.err, 0);
	assert_true(tp_intact(dst, len, 31));
	assert_int_equal(tp_wait(t, src, &c, TP_WAIT_MS), 0);
	assert_int_equal(c.err, 0);
	assert_int_equal(tp_wait(t, src, &c, 200), -FI_ETIMEDOUT); /* once */

	shim_peer_close(to_rx);
	shim_peer_close(to_tx);
	shim_dev_close(dev);
	assert_int_equal(tp_victim_end(v, vfd), 0);
	free(src);
	free(dst);
	free(vbuf);
}

/* ---------------------------------------------------------------------
 * Split copy refused by the receiver (item 4).  The receiver is a
 * re-executed copy of this binary that made itself non-dumpable; the
 * sender (this process) gives up CAP_SYS_PTRACE for the test, so its
 * process_vm_writev into the receiver fails with EPERM even as root,
 * while the receiver may still read from the sender.
 */
#define TP_SPLIT_CHILD "--split-rx-child"
#define TP_SPLIT_LEN ((size_t)1 << 20)

static int tp_cap_ptrace(bool on)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -errno;
	if (on)
		d[0].effective |= (d[0].permitted & (1u << CAP_SYS_PTRACE));
	else
		d[0].effective &= ~(1u << CAP_SYS_PTRACE);
	return syscall(SYS_capset, &h, d) ? -errno : 0;
}

/* The receiver: two messages of TP_SPLIT_LEN (the first proves CMA, the
 * second is split), both must arrive intact.  Exit code 0 or the step
 * that failed. */
static int tp_split_child(int up, int down)
{
	struct fx_env e;
	struct shim_addr me, peer;
	size_t len = sizeof(me);
	fi_addr_t from;
	uint8_t *buf[2];
	int done = 0;
	uint64_t end;

	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		return 10;
	if (fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED))
		return 11;
	if (fi_getname(&e.ep->fid, &me, &len) || write(up, &me, sizeof(me)) != (ssize_t)sizeof(me))
		return 12;
	if (read(down, &peer, sizeof(peer)) != (ssize_t)sizeof(peer))
		return 13;
	if (fi_av_insert(e.av, &peer, 1, &from, 0, NULL) != 1)
		return 14;
	for (int i = 0; i < 2; i++) {
		buf[i] = calloc(1, TP_SPLIT_LEN);
		if (!buf[i] || fi_trecv(e.ep, buf[i], TP_SPLIT_LEN, NULL, from, (uint64_t)i + 1, 0,
					buf[i]))
			return 15;
	}
	end = fx_now_ms() + 20000;
	while (done < 2 && fx_now_ms() < end) {
		struct fi_cq_tagged_entry ent;
		ssize_t n = fi_cq_read(e.cq, &ent, 1);

		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee = {0};

			(void)fi_cq_readerr(e.cq, &ee, 0);
			fprintf(stderr, "split child: error completion %d\n", ee.err);
			return 16;
		}
		if (n == 1) {
			int i = ent.op_context == buf[0] ? 0 : 1;

			if (ent.len != TP_SPLIT_LEN || !tp_intact(buf[i], TP_SPLIT_LEN, 41u + i))
				return 17;
			done++;
		}
	}
	if (done < 2)
		return 18;
	/* stay until the sender has its completions (it closes the pipe) */
	char c;
	if (read(down, &c, 1) < 0)
		c = 0; /* EOF or error: either way the sender is done */
	free(buf[0]);
	free(buf[1]);
	fx_close(&e);
	return 0;
}

static void test_split_refused(void **state)
{
	struct tp_env *t = *state;
	struct shim_addr me = tp_name(t->fx.ep), child;
	uint8_t *src[2];
	char a1[16], a2[16];
	int up[2], down[2], st = 0;
	fi_addr_t to;
	struct fx_comp c;
	pid_t pid;

	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		snprintf(a1, sizeof(a1), "%d", up[1]);
		snprintf(a2, sizeof(a2), "%d", down[0]);
		char *argv[] = {"test_peer", TP_SPLIT_CHILD, a1, a2, NULL};
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(up[1]);
	close(down[0]);
	assert_int_equal(read(up[0], &child, sizeof(child)), (ssize_t)sizeof(child));
	assert_int_equal(write(down[1], &me, sizeof(me)), (ssize_t)sizeof(me));
	assert_int_equal(fi_av_insert(t->fx.av, &child, 1, &to, 0, NULL), 1);

	assert_int_equal(tp_cap_ptrace(false), 0);
	for (int i = 0; i < 2; i++) {
		src[i] = malloc(TP_SPLIT_LEN);
		assert_non_null(src[i]);
		tp_fill(src[i], TP_SPLIT_LEN, 41u + (unsigned)i);
		tp_tsend(t, t->fx.ep, src[i], TP_SPLIT_LEN, to, (uint64_t)i + 1, src[i]);
		/* one at a time: the first must have proven CMA */
		int rc = tp_wait(t, src[i], &c, 20000);
		if (rc || c.err) {
			tp_cap_ptrace(true);
			kill(pid, SIGKILL);
			(void)waitpid(pid, &st, 0);
			fail_msg("send %d: wait %d err %d (child status %#x)", i, rc, c.err, st);
		}
	}
	assert_int_equal(tp_cap_ptrace(true), 0);
	close(down[1]);
	close(up[0]);
	uint64_t end = fx_now_ms() + 20000;
	while (waitpid(pid, &st, WNOHANG) == 0 && fx_now_ms() < end)
		usleep(10000);
	if (fx_now_ms() >= end) {
		kill(pid, SIGKILL);
		(void)waitpid(pid, &st, 0);
		fail_msg("split receiver hung");
	}
	free(src[0]);
	free(src[1]);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}


int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], TP_SPLIT_CHILD) == 0)
		return tp_split_child(atoi(argv[2]), atoi(argv[3]));
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
		cmocka_unit_test_setup_teardown(test_forged_rts, tp_setup, tp_teardown),
		cmocka_unit_test_setup_teardown(test_forged_ctl, tp_setup, tp_teardown),
		cmocka_unit_test_setup_teardown(test_split_refused, tp_setup, tp_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
