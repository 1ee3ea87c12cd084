/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_progress.c - the progress engine (prov/opx_progress.c) and the
 * progress sets that call it (prov/opx_pset.c): which API calls move an
 * endpoint, and how much one call moves.
 *
 *  - an idle fi_cq_read returns -FI_EAGAIN at once, progressing its
 *    endpoint exactly once per call, also past the spin count's yield;
 *  - an empty poll yields every FI_OPX_SPIN_COUNT looks at the rings, or
 *    every 25th of that when it polls the udp socket each time;
 *  - with manual progress a message waits in the receiver's ring until
 *    the receiver's CQ is read: the sender's reads do not deliver it;
 *  - reading the CQ an endpoint is bound to for transmit only also moves
 *    its receives (progress is per endpoint, not per direction);
 *  - an endpoint bound to one CQ in two calls (transmit, then receive)
 *    joins the CQ's progress set once: it is progressed once per read,
 *    each completion is reported once, and its close releases the CQ;
 *  - fi_cntr_read of a receive counter delivers into the posted buffer;
 *  - messages nothing is posted for go to the unexpected store and are
 *    matched, in order, by receives posted later;
 *  - a burst of more packets than one progress call takes (its budget)
 *    arrives complete and in order over several calls, at most a batch
 *    per call;
 *  - with FI_PROGRESS_AUTO a message lands while the application makes
 *    no libfabric call at all.
 *
 * Senders and receivers are endpoints of one domain with CQs of their
 * own (fx_open_peer_ep_split), so a test chooses which endpoint a read
 * drives.  Every wait is bounded in time.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fixture.h"
#include "opx_ep.h"

#define TP_WAIT_MS 5000u
#define TP_TAG 0x5150u
/* Packets one progress call consumes at most when the CQs have room
 * (OPX_PROGRESS_BATCH in prov/opx_progress.c). */
#define TP_BATCH 64
#define TP_MSG 200 /* one eager packet with a payload */

static struct opx_ep *tp_ep(struct fid_ep *ep)
{
	return OPX_CONTAINER_OF(ep, struct opx_ep, ep_fid);
}

static struct fid_cq *tp_cq(struct fx_env *e)
{
	struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
	struct fid_cq *cq;

	assert_int_equal(fi_cq_open(e->domain, &attr, &cq, NULL), 0);
	return cq;
}

static void tp_fill(uint8_t *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed * 53u + i * 5u + 1u);
}

/* Whether buf holds seed's pattern; read through volatile, since the
 * progress thread may be writing it (FI_PROGRESS_AUTO). */
static int tp_intact(const uint8_t *buf, size_t len, unsigned seed)
{
	const volatile uint8_t *v = buf;

	for (size_t i = 0; i < len; i++)
		if (v[i] != (uint8_t)(seed * 53u + i * 5u + 1u))
			return 0;
	return 1;
}

static int tp_zero(const uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i])
			return 0;
	return 1;
}

/* A send from ep that must be taken (no -FI_EAGAIN retry: the receive
 * rings are far larger than any burst here). */
static void tp_send(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t to, uint64_t tag,
		    void *ctx)
{
	assert_int_equal(fi_tsend(ep, buf, len, NULL, to, tag, ctx), 0);
}

/* ------------------------------------------------------------------ */

static void test_idle_read_eagain(void **state)
{
	struct fx_env *e = *state;
	struct opx_ep *ep = tp_ep(e->ep);
	/* more than the spin count (1000 by default): the idle step yields */
	const int reads = 3 * opx_env.spin_count + 10;
	struct fi_cq_tagged_entry ce;
	uint64_t p0 = ep->tel.app_progress, t0 = fx_now_ms(), slowest = 0;

	for (int i = 0; i < reads; i++) {
		uint64_t t = fx_now_ms();

		assert_int_equal(fi_cq_read(e->cq, &ce, 1), -FI_EAGAIN);
		if (fx_now_ms() - t > slowest)
			slowest = fx_now_ms() - t;
	}
	/* a yield is not a sleep: generous bounds for a loaded machine */
	assert_true(slowest < 500);
	assert_true(fx_now_ms() - t0 < TP_WAIT_MS);
	/* every read progressed the bound endpoint, once */
	assert_int_equal(ep->tel.app_progress - p0, (uint64_t)reads);
	/* count 0 progresses too, and says there is nothing */
	assert_int_equal(fi_cq_read(e->cq, NULL, 0), 0);
	assert_int_equal(ep->tel.app_progress - p0, (uint64_t)reads + 1);
}

/* The yield's cadence: an empty look at the rings counts 1 towards
 * FI_OPX_SPIN_COUNT, one that also polled the udp socket (a system call)
 * counts 25.  On the udp wire (test_rma_udp.sh runs this suite again with
 * FI_OPX_WIRE=udp) a message to itself gives the endpoint a flow, after
 * which every progress call polls the socket. */
static void test_idle_yield_cadence(void **state)
{
	struct fx_env *e = *state;
	struct opx_ep *ep = tp_ep(e->ep);
	struct fi_cq_tagged_entry ce;
	struct fi_context sctx, rctx;
	uint8_t sbuf[8] = {1, 2, 3}, rbuf[8] = {0};
	const uint32_t weight = 25, spin = (uint32_t)opx_env.spin_count;
	uint64_t y0, t0 = fx_now_ms();
	int done = 0, reads;

	assert_int_equal(fi_trecv(e->ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, TP_TAG, 0,
				  &rctx),
			 0);
	tp_send(e->ep, sbuf, sizeof(sbuf), e->self, TP_TAG, &sctx);
	while (done < 2 && fx_now_ms() - t0 < TP_WAIT_MS)
		if (fi_cq_read(e->cq, &ce, 1) == 1)
			done++;
	assert_int_equal(done, 2);
	assert_memory_equal(sbuf, rbuf, sizeof(sbuf));
	if (spin < weight)
		skip(); /* a spin count this small yields at every poll */
	/* start counting right after a yield */
	y0 = ep->tel.yields;
	for (int i = 0; i < 100000 && ep->tel.yields == y0; i++)
		(void)fi_cq_read(e->cq, &ce, 1);
	assert_int_equal(ep->tel.yields, y0 + 1);
	y0 = ep->tel.yields;
	bool sock = ep->udp && ep->rel.flows;
	uint32_t per = sock ? (spin + weight - 1) / weight : spin;

	reads = (int)(3 * per);
	for (int i = 0; i < reads; i++)
		assert_int_equal(fi_cq_read(e->cq, &ce, 1), -FI_EAGAIN);
	print_message("%s wire: a yield every %u empty reads (spin count %u)\n",
		      sock ? "udp" : "shm", per, spin);
	assert_int_equal(ep->tel.yields - y0, 3);
}

/* A blocking wait counts FI_OPX_SPIN_COUNT in the same units as the idle
 * yield above: on the udp wire a pass that polled the socket counts 25,
 * so a wait goes on to its yields and then to sleep after spin/25 passes,
 * not after spin system calls (some 2 ms of them).  The receiver here is
 * a second endpoint with a counter; under FI_OPX_WIRE=udp the message
 * gives it its flow. */
static void test_wait_spin_cadence(void **state)
{
	struct fx_env *e = *state;
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC};
	struct fid_cntr *rcntr;
	struct fid_cq *cq = tp_cq(e);
	struct fid_ep *rx;
	fi_addr_t rx_addr;
	struct fi_context sctx, rctx;
	uint8_t sbuf[8] = {4, 5, 6}, rbuf[8] = {0};
	const uint32_t weight = 25, spin = (uint32_t)opx_env.spin_count;
	const uint64_t wait_ms = 500, slice_ms = opx_env.sleep_ms > 0 ? (uint64_t)opx_env.sleep_ms : 1;
	/* the yields of opx_pset_wait_locked (OPX_PSET_YIELDS) */
	const uint64_t yields = 64;
	uint64_t p0, passes;

	assert_int_equal(fi_cntr_open(e->domain, &ca, &rcntr, NULL), 0);
	fx_open_peer_ep_split(e, NULL, cq, NULL, rcntr, &rx, &rx_addr);
	assert_int_equal(fi_trecv(rx, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, TP_TAG, 0, &rctx),
			 0);
	tp_send(e->ep, sbuf, sizeof(sbuf), rx_addr, TP_TAG, &sctx);
	assert_int_equal(fi_cntr_wait(rcntr, 1, TP_WAIT_MS), 0);
	assert_memory_equal(sbuf, rbuf, sizeof(sbuf));
	assert_int_equal(fx_cq_wait(e->cq, &sctx, TP_WAIT_MS, NULL), 0);

	bool sock = tp_ep(rx)->udp && tp_ep(rx)->rel.flows;
	uint64_t per = sock ? (spin + weight - 1) / weight : spin;

	p0 = tp_ep(rx)->tel.app_progress;
	assert_int_equal(fi_cntr_wait(rcntr, 2, (int)wait_ms), -FI_ETIMEDOUT);
	passes = tp_ep(rx)->tel.app_progress - p0;
	print_message("%s wire: a %" PRIu64 " ms wait progressed %" PRIu64
		      " times (spin %" PRIu64 ", %" PRIu64 " yields, %" PRIu64 " ms slices)\n",
		      sock ? "udp" : "shm", wait_ms, passes, per, yields, slice_ms);
	/* the whole spin phase (a machine that stalls us for half a second
	 * would cut it short: the wait is long for that reason) */
	assert_true(passes >= per);
	/* the sleep slices: at most one pass each, and a few that found a
	 * packet at arming; a busy machine only makes the slices longer */
	assert_true(passes <= per + yields + 2 * wait_ms / slice_ms + 32);

	assert_int_equal(fi_close(&rx->fid), 0);
	assert_int_equal(fi_close(&cq->fid), 0);
	assert_int_equal(fi_close(&rcntr->fid), 0);
}

/* Manual progress: the sender's reads never drive the receiver. */
static void test_recv_needs_receiver_progress(void **state)
{
	struct fx_env *e = *state;
	struct fid_cq *cq = tp_cq(e);
	struct fid_ep *rx;
	fi_addr_t rx_addr;
	uint8_t sbuf[TP_MSG], rbuf[TP_MSG] = {0};
	struct fi_cq_tagged_entry ce;
	struct fi_context sctx, rctx;
	int sent = 0;
	uint64_t p0;

	fx_open_peer_ep(e, NULL, cq, &rx, &rx_addr);
	tp_fill(sbuf, sizeof(sbuf), 1);
	assert_int_equal(fi_trecv(rx, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, TP_TAG, 0, &rctx),
			 0);
	p0 = tp_ep(rx)->tel.app_progress;
	tp_send(e->ep, sbuf, sizeof(sbuf), rx_addr, TP_TAG, &sctx);
	for (int i = 0; i < 200; i++)
		sent |= fi_cq_read(e->cq, &ce, 1) == 1 && ce.op_context == &sctx;
	/* still in the ring: not copied, not completed, rx never progressed */
	assert_true(tp_zero(rbuf, sizeof(rbuf)));
	assert_int_equal(tp_ep(rx)->tel.app_progress, p0);

	assert_int_equal(fx_cq_wait(cq, &rctx, TP_WAIT_MS, &ce), 0);
	assert_true(tp_ep(rx)->tel.app_progress > p0);
	assert_int_equal(ce.len, sizeof(sbuf));
	assert_int_equal(ce.tag, TP_TAG);
	assert_true(ce.flags & FI_RECV);
	assert_true(tp_intact(rbuf, sizeof(rbuf), 1));
	if (!sent)
		assert_int_equal(fx_cq_wait(e->cq, &sctx, TP_WAIT_MS, NULL), 0);

	assert_int_equal(fi_close(&rx->fid), 0);
	assert_int_equal(fi_close(&cq->fid), 0);
}

/* An endpoint's transmit CQ drives its receives too, and its send
 * completions go there, not to the receive CQ. */
static void test_tx_cq_drives_recv(void **state)
{
	struct fx_env *e = *state;
	struct fid_cq *txcq = tp_cq(e), *rxcq = tp_cq(e);
	struct fid_ep *ep;
	fi_addr_t addr;
	uint8_t sbuf[TP_MSG], rbuf[TP_MSG] = {0}, back[TP_MSG] = {0};
	struct fi_cq_tagged_entry ce;
	struct fi_context sctx, rctx, bsctx, brctx;
	uint64_t end = fx_now_ms() + TP_WAIT_MS;

	fx_open_peer_ep_split(e, NULL, txcq, rxcq, NULL, &ep, &addr);
	tp_fill(sbuf, sizeof(sbuf), 2);
	assert_int_equal(fi_trecv(ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, TP_TAG, 0, &rctx),
			 0);
	tp_send(e->ep, sbuf, sizeof(sbuf), addr, TP_TAG, &sctx);
	/* only the transmit CQ is read: the data lands all the same */
	while (!tp_intact(rbuf, sizeof(rbuf), 2) && fx_now_ms() <= end)
		assert_int_equal(fi_cq_read(txcq, &ce, 1), -FI_EAGAIN);
	assert_true(tp_intact(rbuf, sizeof(rbuf), 2));
	/* and its completion is already in the receive CQ */
	assert_int_equal(fi_cq_read(rxcq, &ce, 1), 1);
	assert_ptr_equal(ce.op_context, &rctx);
	assert_true(ce.flags & FI_RECV);

	/* the other way: the send completes on the transmit CQ only */
	assert_int_equal(fi_trecv(e->ep, back, sizeof(back), NULL, FI_ADDR_UNSPEC, TP_TAG + 1, 0,
				  &brctx),
			 0);
	tp_send(ep, sbuf, sizeof(sbuf), e->self, TP_TAG + 1, &bsctx);
	assert_int_equal(fx_cq_wait(txcq, &bsctx, TP_WAIT_MS, &ce), 0);
	assert_true(ce.flags & FI_SEND);
	assert_int_equal(fi_cq_read(rxcq, &ce, 1), -FI_EAGAIN);
	/* e's CQ: the first send's completion, then the receive */
	assert_int_equal(fx_cq_wait(e->cq, &sctx, TP_WAIT_MS, NULL), 0);
	assert_int_equal(fx_cq_wait(e->cq, &brctx, TP_WAIT_MS, NULL), 0);
	assert_true(tp_intact(back, sizeof(back), 2));

	assert_int_equal(fi_close(&ep->fid), 0);
	assert_int_equal(fi_close(&txcq->fid), 0);
	assert_int_equal(fi_close(&rxcq->fid), 0);
}

/* Bound to one CQ for transmit and for receive in two calls: the
 * endpoint is in the CQ's progress set once (prov/opx_ep.c attaches a CQ
 * once), so each read progresses it once, and its close releases the
 * CQ. */
static void test_bound_twice_progressed_once(void **state)
{
	struct fx_env *e = *state;
	struct fid_cq *cq = tp_cq(e);
	struct fid_ep *ep;
	fi_addr_t self;
	uint8_t sbuf[TP_MSG], rbuf[TP_MSG] = {0};
	struct fi_cq_tagged_entry ce;
	struct fi_context sctx, rctx;
	int nsend = 0, nrecv = 0;
	uint64_t p0, end;

	fx_open_peer_ep_split(e, NULL, cq, cq, NULL, &ep, &self);
	p0 = tp_ep(ep)->tel.app_progress;
	for (int i = 0; i < 10; i++)
		assert_int_equal(fi_cq_read(cq, &ce, 1), -FI_EAGAIN);
	assert_int_equal(tp_ep(ep)->tel.app_progress - p0, 10);

	/* a message to itself: one send and one receive completion */
	tp_fill(sbuf, sizeof(sbuf), 3);
	assert_int_equal(fi_trecv(ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, TP_TAG, 0, &rctx),
			 0);
	tp_send(ep, sbuf, sizeof(sbuf), self, TP_TAG, &sctx);
	end = fx_now_ms() + TP_WAIT_MS;
	while (!(nsend && nrecv) && fx_now_ms() <= end) {
		if (fi_cq_read(cq, &ce, 1) != 1)
			continue;
		nsend += ce.op_context == &sctx;
		nrecv += ce.op_context == &rctx;
	}
	for (int i = 0; i < 50; i++)
		assert_int_equal(fi_cq_read(cq, &ce, 1), -FI_EAGAIN);
	assert_int_equal(nsend, 1);
	assert_int_equal(nrecv, 1);
	assert_true(tp_intact(rbuf, sizeof(rbuf), 3));

	assert_int_equal(fi_close(&cq->fid), -FI_EBUSY);
	assert_int_equal(fi_close(&ep->fid), 0);
	assert_int_equal(fi_close(&cq->fid), 0);
}

/* Reading a receive counter progresses its endpoint: nothing else is
 * called until the data is there. */
static void test_cntr_read_drives_ep(void **state)
{
	struct fx_env *e = *state;
	struct fi_cntr_attr cattr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
	struct fid_cq *cq = tp_cq(e);
	struct fid_cntr *cntr;
	struct fid_ep *rx;
	fi_addr_t rx_addr;
	uint8_t sbuf[TP_MSG], rbuf[TP_MSG] = {0};
	struct fi_cq_tagged_entry ce;
	struct fi_context sctx, rctx;
	uint64_t p0, reads = 0, end;

	assert_int_equal(fi_cntr_open(e->domain, &cattr, &cntr, NULL), 0);
	fx_open_peer_ep_split(e, NULL, cq, NULL, cntr, &rx, &rx_addr);
	tp_fill(sbuf, sizeof(sbuf), 4);
	assert_int_equal(fi_trecv(rx, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, TP_TAG, 0, &rctx),
			 0);
	p0 = tp_ep(rx)->tel.app_progress;
	tp_send(e->ep, sbuf, sizeof(sbuf), rx_addr, TP_TAG, &sctx);
	end = fx_now_ms() + TP_WAIT_MS;
	do {
		reads++;
	} while (fi_cntr_read(cntr) == 0 && fx_now_ms() <= end);
	assert_int_equal(fi_cntr_read(cntr), 1);
	assert_int_equal(tp_ep(rx)->tel.app_progress - p0, reads + 1);
	assert_true(tp_intact(rbuf, sizeof(rbuf), 4));
	/* the completion was written by that progress, not by this read */
	assert_int_equal(fi_cq_read(cq, &ce, 1), 1);
	assert_ptr_equal(ce.op_context, &rctx);
	assert_int_equal(fx_cq_wait(e->cq, &sctx, TP_WAIT_MS, NULL), 0);

	assert_int_equal(fi_close(&rx->fid), 0);
	assert_int_equal(fi_close(&cntr->fid), 0);
	assert_int_equal(fi_close(&cq->fid), 0);
}

/* Progress takes messages nothing is posted for into the unexpected
 * store (after a few deferring drains); receives posted later match them
 * there, in the order they were sent. */
static void test_unexpected_then_recv(void **state)
{
	struct fx_env *e = *state;
	struct fid_cq *cq = tp_cq(e);
	struct fid_ep *rx;
	fi_addr_t rx_addr;
	uint8_t sbuf[3][TP_MSG], rbuf[3][TP_MSG];
	const uint64_t tags[3] = {TP_TAG, TP_TAG, TP_TAG + 1};
	struct fi_context sctx[3], rctx[3];
	struct fx_stash *st = calloc(1, sizeof(*st));

	assert_non_null(st);
	memset(rbuf, 0, sizeof(rbuf));
	fx_open_peer_ep(e, NULL, cq, &rx, &rx_addr);
	for (unsigned i = 0; i < 3; i++) {
		tp_fill(sbuf[i], TP_MSG, 10 + i);
		tp_send(e->ep, sbuf[i], TP_MSG, rx_addr, tags[i], &sctx[i]);
	}
	assert_int_equal(tp_ep(rx)->tel.ux_cnt, 0);
	for (int i = 0; i < 20; i++)
		assert_int_equal(fi_cq_read(cq, NULL, 0), 0);
	assert_int_equal(tp_ep(rx)->tel.ux_cnt, 3);

	/* the last one first (its own tag), then the two of one tag */
	assert_int_equal(
		fi_trecv(rx, rbuf[2], TP_MSG, NULL, FI_ADDR_UNSPEC, tags[2], 0, &rctx[2]), 0);
	assert_int_equal(
		fi_trecv(rx, rbuf[0], TP_MSG, NULL, FI_ADDR_UNSPEC, tags[0], 0, &rctx[0]), 0);
	assert_int_equal(
		fi_trecv(rx, rbuf[1], TP_MSG, NULL, FI_ADDR_UNSPEC, tags[1], 0, &rctx[1]), 0);
	/* they complete in the order posted: stash and find each */
	for (unsigned i = 0; i < 3; i++) {
		struct fx_comp c;

		assert_int_equal(fx_stash_wait(cq, st, &rctx[i], &c, TP_WAIT_MS), 0);
		assert_int_equal(c.err, 0);
		assert_int_equal(c.e.len, TP_MSG);
		assert_int_equal(c.e.tag, tags[i]);
		if (!tp_intact(rbuf[i], TP_MSG, 10 + i))
			fail_msg("receive %u got another message's data", i);
	}
	assert_int_equal(tp_ep(rx)->tel.ux_cnt, 0);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(fx_cq_wait(e->cq, &sctx[i], TP_WAIT_MS, NULL), 0);

	free(st);
	assert_int_equal(fi_close(&rx->fid), 0);
	assert_int_equal(fi_close(&cq->fid), 0);
}

/* More packets than one progress call takes: each read delivers at most
 * a batch, and all arrive, in order, into the receives posted for them. */
#define TP_BURST (3 * TP_BATCH + 7)
static void test_burst_over_budget(void **state)
{
	struct fx_env *e = *state;
	struct fid_cq *cq = tp_cq(e);
	struct fid_ep *rx;
	fi_addr_t rx_addr;
	uint64_t *sbuf = calloc(TP_BURST, sizeof(*sbuf)), *rbuf = calloc(TP_BURST, sizeof(*rbuf));
	struct fi_context *rctx = calloc(TP_BURST, sizeof(*rctx));
	struct fi_cq_tagged_entry ce[4 * TP_BATCH];
	size_t got = 0, reads = 0;
	uint64_t end;

	assert_true(sbuf && rbuf && rctx);
	fx_open_peer_ep(e, NULL, cq, &rx, &rx_addr);
	for (size_t i = 0; i < TP_BURST; i++)
		assert_int_equal(fi_trecv(rx, &rbuf[i], sizeof(rbuf[i]), NULL, FI_ADDR_UNSPEC,
					  TP_TAG, 0, &rctx[i]),
				 0);
	for (size_t i = 0; i < TP_BURST; i++) {
		sbuf[i] = 0xb0b0000000000000ull | i;
		assert_int_equal(fi_tinject(e->ep, &sbuf[i], sizeof(sbuf[i]), rx_addr, TP_TAG), 0);
	}
	end = fx_now_ms() + TP_WAIT_MS;
	while (got < TP_BURST && fx_now_ms() <= end) {
		ssize_t n = fi_cq_read(cq, ce, sizeof(ce) / sizeof(ce[0]));

		if (n == -FI_EAGAIN)
			continue;
		assert_true(n > 0);
		reads++;
		/* one read is one progress step: at most a batch */
		if (n > TP_BATCH)
			fail_msg("one read completed %zd receives, more than a batch (%d)", n,
				 TP_BATCH);
		for (ssize_t k = 0; k < n; k++, got++) {
			if (ce[k].op_context != &rctx[got])
				fail_msg("completion %zu is not receive %zu", got, got);
			assert_int_equal(ce[k].len, sizeof(uint64_t));
			assert_int_equal(rbuf[got], sbuf[got]);
		}
	}
	assert_int_equal(got, TP_BURST);
	assert_true(reads >= (TP_BURST + TP_BATCH - 1) / TP_BATCH);
	assert_int_equal(fi_cq_read(cq, ce, 1), -FI_EAGAIN);

	assert_int_equal(fi_close(&rx->fid), 0);
	assert_int_equal(fi_close(&cq->fid), 0);
	free(sbuf);
	free(rbuf);
	free(rctx);
}

/* FI_PROGRESS_AUTO: the domain's thread delivers while the application
 * only sleeps; the receiver's own progress count does not move. */
static void test_auto_progress_delivers(void **state)
{
	struct fi_info *hints = fx_hints(FI_TAGGED);
	struct fx_env env, *e = &env;
	struct fid_cq *cq;
	struct fid_ep *rx;
	fi_addr_t rx_addr;
	uint8_t sbuf[TP_MSG], rbuf[TP_MSG] = {0};
	struct fi_cq_tagged_entry ce;
	struct fi_context sctx, rctx;
	struct timespec nap = {0, 1000000};
	uint64_t p0, end;

	(void)state;
	assert_non_null(hints);
	hints->domain_attr->data_progress = FI_PROGRESS_AUTO;
	hints->domain_attr->control_progress = FI_PROGRESS_AUTO;
	assert_int_equal(fx_open_hints(e, hints), 0);
	fi_freeinfo(hints);
	assert_int_equal(e->info->domain_attr->data_progress, FI_PROGRESS_AUTO);
	cq = tp_cq(e);
	fx_open_peer_ep(e, NULL, cq, &rx, &rx_addr);
	tp_fill(sbuf, sizeof(sbuf), 5);
	assert_int_equal(fi_trecv(rx, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, TP_TAG, 0, &rctx),
			 0);
	p0 = __atomic_load_n(&tp_ep(rx)->tel.app_progress, __ATOMIC_RELAXED);
	tp_send(e->ep, sbuf, sizeof(sbuf), rx_addr, TP_TAG, &sctx);
	/* no libfabric call from here until the data is there */
	end = fx_now_ms() + TP_WAIT_MS;
	while (!tp_intact(rbuf, sizeof(rbuf), 5) && fx_now_ms() <= end)
		nanosleep(&nap, NULL);
	assert_true(tp_intact(rbuf, sizeof(rbuf), 5));
	assert_int_equal(__atomic_load_n(&tp_ep(rx)->tel.app_progress, __ATOMIC_RELAXED), p0);
	assert_int_equal(fi_cq_read(cq, &ce, 1), 1);
	assert_ptr_equal(ce.op_context, &rctx);
	assert_int_equal(ce.len, sizeof(sbuf));
	assert_int_equal(fx_cq_wait(e->cq, &sctx, TP_WAIT_MS, NULL), 0);

	assert_int_equal(fi_close(&rx->fid), 0);
	assert_int_equal(fi_close(&cq->fid), 0);
	fx_close(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_idle_read_eagain, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_idle_yield_cadence, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_wait_spin_cadence, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_recv_needs_receiver_progress, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_tx_cq_drives_recv, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_bound_twice_progressed_once, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_cntr_read_drives_ep, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_unexpected_then_recv, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_burst_over_budget, fx_setup, fx_teardown),
		cmocka_unit_test(test_auto_progress_delivers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
