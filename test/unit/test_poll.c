/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_poll.c - poll sets (fi_poll(3), prov/opx_poll.c): a CQ and a
 * counter of the fixture's loopback endpoint in one set; fi_poll drives
 * the endpoint's progress (no fi_cq_read in between) and reports the CQ
 * while it has something to read and the counter when it moved; add/del
 * and argument rules; members cannot be closed while in a set; wait sets
 * are refused with -FI_ENOSYS.  Every wait is bounded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

#define TP_WAIT_MS 2000

static int tp_has(void **ctx, int n, void *want)
{
	for (int i = 0; i < n; i++)
		if (ctx[i] == want)
			return 1;
	return 0;
}

/* fi_poll until want shows up (bounded); returns the last count. */
static int tp_poll_for(struct fid_poll *ps, void **ctx, int cap, void *want)
{
	uint64_t end = fx_now_ms() + TP_WAIT_MS;
	int n;

	do {
		n = fi_poll(ps, ctx, cap);
		assert_true(n >= 0);
		if (tp_has(ctx, n, want))
			return n;
	} while (fx_now_ms() <= end);
	fail_msg("fi_poll never reported %p", want);
	return n;
}

static void test_poll_cq_cntr(void **state)
{
	struct fx_env *e = *state;
	struct fi_cntr_attr cattr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
	struct fi_cq_attr qattr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
	struct fid_cntr *cntr;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_poll *ps;
	struct fi_poll_attr pattr = {0};
	void *cq_ctx = (void *)0xc0, *cntr_ctx = (void *)0xc1;
	void *ctx[4];
	struct fi_cq_tagged_entry ce;
	struct fi_context rctx;
	char sbuf[32] = "poll set payload", rbuf[32];
	char name[64];
	size_t len = sizeof(name);
	fi_addr_t self;

	/* an endpoint of our own: the CQ (receive) and counter (send) are
	 * polled only through the set */
	assert_int_equal(fi_cq_open(e->domain, &qattr, &cq, cq_ctx), 0);
	assert_int_equal(fi_cntr_open(e->domain, &cattr, &cntr, cntr_ctx), 0);
	assert_int_equal(fi_endpoint(e->domain, e->info, &ep, NULL), 0);
	/* sends counted, not completed on the CQ */
	assert_int_equal(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_SELECTIVE_COMPLETION), 0);
	assert_int_equal(fi_ep_bind(ep, &cq->fid, FI_RECV), 0);
	assert_int_equal(fi_ep_bind(ep, &cntr->fid, FI_SEND), 0);
	assert_int_equal(fi_ep_bind(ep, &e->av->fid, 0), 0);
	assert_int_equal(fi_enable(ep), 0);
	assert_int_equal(fi_getname(&ep->fid, name, &len), 0);
	assert_int_equal(fi_av_insert(e->av, name, 1, &self, 0, NULL), 1);

	assert_int_equal(fi_poll_open(e->domain, &pattr, &ps), 0);
	assert_int_equal(fi_poll_add(ps, &cq->fid, 0), 0);
	assert_int_equal(fi_poll_add(ps, &cntr->fid, 0), 0);
	assert_int_equal(fi_poll_add(ps, &cq->fid, 0), -FI_EALREADY);
	assert_int_equal(fi_poll_add(ps, &e->domain->fid, 0), -FI_EINVAL);
	assert_int_equal(fi_poll_add(ps, &cq->fid, 1), -FI_EBADFLAGS);
	assert_int_equal(fi_poll(ps, ctx, 4), 0);

	/* members stay open while in a set */
	assert_int_equal(fi_close(&cq->fid), -FI_EBUSY);

	/* a message to ourselves: only fi_poll progresses the endpoint */
	memset(rbuf, 0, sizeof(rbuf));
	assert_int_equal(fi_trecv(ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 5, 0, &rctx), 0);
	assert_int_equal(fi_tsend(ep, sbuf, sizeof(sbuf), NULL, self, 5, NULL), 0);
	/* the CQ has the receive; the counter moved (the send completed):
	 * both reported, the counter once only */
	{
		uint64_t end = fx_now_ms() + TP_WAIT_MS;
		int seen_cq = 0, seen_cntr = 0, n;

		do {
			n = fi_poll(ps, ctx, 4);
			assert_true(n >= 0 && n <= 2);
			seen_cq |= tp_has(ctx, n, cq_ctx);
			seen_cntr += tp_has(ctx, n, cntr_ctx);
		} while (!(seen_cq && seen_cntr) && fx_now_ms() <= end);
		assert_true(seen_cq);
		assert_int_equal(seen_cntr, 1);
		n = fi_poll(ps, ctx, 4);
		assert_false(tp_has(ctx, n, cntr_ctx));
		assert_true(tp_has(ctx, n, cq_ctx)); /* still unread */
	}
	assert_int_equal(fi_cntr_read(cntr), 1);
	assert_int_equal(fi_cq_read(cq, &ce, 1), 1);
	assert_ptr_equal(ce.op_context, &rctx);
	assert_memory_equal(rbuf, sbuf, sizeof(sbuf));
	assert_int_equal(fi_poll(ps, ctx, 4), 0); /* everything read */

	/* a count of 1 reports one member; the other waits for the next call */
	assert_int_equal(fi_trecv(ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 6, 0, &rctx), 0);
	assert_int_equal(fi_tsend(ep, sbuf, sizeof(sbuf), NULL, self, 6, NULL), 0);
	tp_poll_for(ps, ctx, 1, cq_ctx);
	assert_int_equal(fi_cq_read(cq, &ce, 1), 1);

	/* removed: no longer reported, and closable */
	assert_int_equal(fi_poll_del(ps, &cq->fid, 0), 0);
	assert_int_equal(fi_poll_del(ps, &cq->fid, 0), -FI_ENOENT);
	assert_int_equal(fi_trecv(ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 7, 0, &rctx), 0);
	assert_int_equal(fi_tsend(ep, sbuf, sizeof(sbuf), NULL, self, 7, NULL), 0);
	for (int i = 0; i < 20; i++) {
		int n = fi_poll(ps, ctx, 4);

		assert_false(tp_has(ctx, n, cq_ctx));
	}
	assert_int_equal(fi_close(&ps->fid), 0);

	assert_int_equal(fi_close(&ep->fid), 0);
	assert_int_equal(fi_close(&cq->fid), 0);
	assert_int_equal(fi_close(&cntr->fid), 0);
}

/* Wait sets are not provided: refused cleanly, everywhere they appear. */
static void test_wait_set_refused(void **state)
{
	struct fx_env *e = *state;
	struct fi_wait_attr wattr = {.wait_obj = FI_WAIT_UNSPEC};
	struct fi_cq_attr qattr = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_SET};
	struct fid_wait *ws = NULL;
	struct fid_cq *cq = NULL;

	assert_int_equal(fi_wait_open(e->fabric, &wattr, &ws), -FI_ENOSYS);
	assert_int_equal(fi_cq_open(e->domain, &qattr, &cq, NULL), -FI_ENOSYS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_poll_cq_cntr, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_wait_set_refused, fx_setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
