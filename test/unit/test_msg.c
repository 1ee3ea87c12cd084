/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_msg.c - transmit flag semantics of fi_msg(3) / fi_tagged(3) on a
 * loopback endpoint: FI_INJECT on the *msg calls and in tx op_flags (the
 * completion still comes; only the fi_inject family suppresses it),
 * the completion levels (FI_INJECT_COMPLETE, FI_TRANSMIT_COMPLETE,
 * FI_DELIVERY_COMPLETE), and FI_SOURCE_ERR.
 *
 * Every wait is bounded (TM_WAIT_MS); every received payload is checked.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

#define TM_WAIT_MS 2000

/* Drain the CQ for ms milliseconds; returns how many entries had ctx. */
static int tm_count(struct fid_cq *cq, void *ctx, int ms)
{
	uint64_t end = fx_now_ms() + (uint64_t)ms;
	struct fi_cq_tagged_entry e;
	int n = 0;

	do {
		if (fi_cq_read(cq, &e, 1) == 1 && e.op_context == ctx)
			n++;
	} while (fx_now_ms() <= end);
	return n;
}

static void tm_fill(char *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)(seed * 31u + i * 7u + 1u);
}

/* ---------------------------------------------------------------------
 * Item 4: FI_INJECT on fi_sendmsg / fi_tsendmsg.
 */
static void test_sendmsg_inject_completes(void **state)
{
	struct fx_env *e = *state;
	struct fi_context sctx, rctx, sctx2, rctx2;
	struct fi_cq_tagged_entry ce;
	char sbuf[12], rbuf[12];
	struct iovec iov = {.iov_base = sbuf, .iov_len = sizeof(sbuf)};
	struct fi_msg_tagged tmsg = {.msg_iov = &iov, .iov_count = 1, .addr = e->self,
				     .tag = 0x4242, .context = &sctx};
	struct fi_msg msg = {.msg_iov = &iov, .iov_count = 1, .addr = e->self, .context = &sctx2};

	tm_fill(sbuf, sizeof(sbuf), 1);
	memset(rbuf, 0, sizeof(rbuf));
	assert_int_equal(fi_trecv(e->ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 0x4242, 0, &rctx),
			 0);
	assert_int_equal(fi_tsendmsg(e->ep, &tmsg, FI_INJECT | FI_COMPLETION), 0);
	memset(sbuf, 0, sizeof(sbuf)); /* FI_INJECT: the buffer is ours again */
	assert_int_equal(fx_cq_wait(e->cq, &sctx, TM_WAIT_MS, &ce), 0);
	assert_true(ce.flags & FI_SEND);
	assert_true(ce.flags & FI_TAGGED);
	assert_int_equal(fx_cq_wait(e->cq, &rctx, TM_WAIT_MS, &ce), 0);
	tm_fill(sbuf, sizeof(sbuf), 1);
	assert_memory_equal(rbuf, sbuf, sizeof(sbuf));

	/* untagged, FI_INJECT without FI_COMPLETION (no selective completion) */
	tm_fill(sbuf, sizeof(sbuf), 2);
	assert_int_equal(fi_recv(e->ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, &rctx2), 0);
	assert_int_equal(fi_sendmsg(e->ep, &msg, FI_INJECT), 0);
	assert_int_equal(fx_cq_wait(e->cq, &sctx2, TM_WAIT_MS, &ce), 0);
	assert_true(ce.flags & FI_SEND);
	assert_true(ce.flags & FI_MSG);
	assert_int_equal(fx_cq_wait(e->cq, &rctx2, TM_WAIT_MS, &ce), 0);
	assert_memory_equal(rbuf, sbuf, sizeof(sbuf));

	/* the fi_inject family still has no send completion */
	assert_int_equal(fi_trecv(e->ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 0x43, 0, &rctx), 0);
	assert_int_equal(fi_tinject(e->ep, sbuf, sizeof(sbuf), e->self, 0x43), 0);
	assert_int_equal(fx_cq_wait(e->cq, &rctx, TM_WAIT_MS, &ce), 0);
	assert_int_equal(tm_count(e->cq, NULL, 50), 0);
}

/* ---------------------------------------------------------------------
 * Item 9: FI_INJECT as a default tx op flag.
 */
/* A second endpoint on the fixture's domain and AV with its own CQ,
 * opened from info; *addr is its fi_addr in the AV. */
static void tm_ep_open(struct fx_env *e, struct fi_info *info, struct fid_ep **ep,
		       struct fid_cq **cq, fi_addr_t *addr)
{
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};

	assert_int_equal(fi_cq_open(e->domain, &cq_attr, cq, NULL), 0);
	fx_open_peer_ep(e, info, *cq, ep, addr);
}

static void test_inject_op_flag(void **state)
{
	struct fx_env *e = *state;
	struct fi_provider *prov = fx_prov();
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct fid_ep *ep;
	struct fid_cq *cq;
	fi_addr_t self;
	struct fi_context sctx, rctx;
	struct fi_cq_tagged_entry ce;
	char *sbuf, *rbuf;
	size_t inject;
	uint64_t flags = FI_TRANSMIT;

	assert_non_null(hints);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED;
	hints->tx_attr->op_flags = FI_INJECT;
	assert_int_equal(prov->getinfo(FX_VERSION, NULL, NULL, 0, hints, &info), 0);
	fi_freeinfo(hints);
	assert_true(info->tx_attr->op_flags & FI_INJECT);
	inject = info->tx_attr->inject_size;
	assert_true(inject > 0);

	tm_ep_open(e, info, &ep, &cq, &self);
	assert_int_equal(fi_control(&ep->fid, FI_GETOPSFLAG, &flags), 0);
	assert_true(flags & FI_INJECT);
	sbuf = calloc(1, inject + 1);
	rbuf = calloc(1, inject + 1);
	assert_non_null(sbuf);
	assert_non_null(rbuf);

	/* up to inject_size: sent, the buffer reusable at once, completed */
	tm_fill(sbuf, inject, 3);
	assert_int_equal(fi_trecv(ep, rbuf, inject, NULL, FI_ADDR_UNSPEC, 9, 0, &rctx), 0);
	assert_int_equal(fi_tsend(ep, sbuf, inject, NULL, self, 9, &sctx), 0);
	memset(sbuf, 0, inject);
	assert_int_equal(fx_cq_wait(cq, &sctx, TM_WAIT_MS, &ce), 0);
	assert_int_equal(fx_cq_wait(cq, &rctx, TM_WAIT_MS, &ce), 0);
	assert_int_equal(ce.len, inject);
	tm_fill(sbuf, inject, 3);
	assert_memory_equal(rbuf, sbuf, inject);

	/* above inject_size: -FI_EMSGSIZE, nothing sent */
	assert_int_equal(fi_tsend(ep, sbuf, inject + 1, NULL, self, 9, &sctx), -FI_EMSGSIZE);
	assert_int_equal(tm_count(cq, &sctx, 20), 0);

	free(sbuf);
	free(rbuf);
	assert_int_equal(fi_close(&ep->fid), 0);
	assert_int_equal(fi_close(&cq->fid), 0);
	fi_freeinfo(info);
}

/* ---------------------------------------------------------------------
 * Item 7: FI_DELIVERY_COMPLETE.
 */
/* Sender ep2 (its own CQ, FI_DELIVERY_COMPLETE in tx op_flags from the
 * hints) to the fixture's endpoint, which posts its receive late: the
 * send must not complete while the message sits unexpected (received but
 * not placed), and must complete once the receive is posted.  Every
 * protocol size: one packet with the sender's address, and above that
 * rendezvous. */
static void test_delivery_complete(void **state)
{
	static const size_t sizes[] = {0, 1, 16, 17, 1000, 8192 - 32, 8192 - 31, 8192, 100000};
	struct fx_env *e = *state;
	struct fi_provider *prov = fx_prov();
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct fid_ep *ep2;
	struct fid_cq *cq2;
	fi_addr_t a2;
	struct fi_cq_tagged_entry ce;
	char *sbuf = malloc(100001), *rbuf = malloc(100001); /* + 1: a guard byte */

	assert_non_null(hints);
	assert_non_null(sbuf);
	assert_non_null(rbuf);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED | FI_MSG;
	hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	assert_int_equal(prov->getinfo(FX_VERSION, NULL, NULL, 0, hints, &info), 0);
	fi_freeinfo(hints);
	assert_true(info->tx_attr->op_flags & FI_DELIVERY_COMPLETE);
	tm_ep_open(e, info, &ep2, &cq2, &a2);

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t len = sizes[k];
		struct fi_context sctx, rctx;
		uint64_t tag = 0x100 + k;

		tm_fill(sbuf, len, (unsigned)k);
		memset(rbuf, 0, len + 1);
		assert_int_equal(fi_tsend(ep2, sbuf, len, NULL, e->self, tag, &sctx), 0);
		/* the receiver progresses (the message arrives, unexpected) but
		 * nothing is placed yet: no send completion */
		for (int i = 0; i < 20; i++) {
			(void)fi_cq_read(e->cq, &ce, 0);
			assert_int_equal(tm_count(cq2, &sctx, 2), 0);
		}
		assert_int_equal(fi_trecv(e->ep, rbuf, len, NULL, FI_ADDR_UNSPEC, tag, 0, &rctx), 0);
		/* receive completion first, then the sender's (a split
		 * rendezvous needs the sender's progress too: count 0 reads
		 * progress without taking completions) */
		{
			uint64_t end = fx_now_ms() + TM_WAIT_MS;
			int rc = -FI_ETIMEDOUT;

			while (rc && fx_now_ms() <= end) {
				(void)fi_cq_read(cq2, &ce, 0);
				rc = fx_cq_wait(e->cq, &rctx, 1, &ce);
			}
			if (rc)
				fail_msg("no receive completion for %zu bytes", len);
		}
		assert_int_equal(ce.len, len);
		assert_memory_equal(rbuf, sbuf, len);
		assert_int_equal(rbuf[len], 0); /* nothing past the message */
		{
			uint64_t end = fx_now_ms() + TM_WAIT_MS;
			int rc = -FI_ETIMEDOUT;

			while (rc && fx_now_ms() <= end) {
				(void)fi_cq_read(e->cq, &ce, 0); /* the receiver sends DONE */
				rc = fx_cq_wait(cq2, &sctx, 1, &ce);
			}
			assert_int_equal(rc, 0);
		}
		assert_true(ce.flags & FI_SEND);
	}

	/* posted first: completes once delivered; per-call flag on fi_tsendmsg,
	 * with FI_INJECT (buffer reused at once) */
	{
		struct fi_context sctx, rctx;
		struct iovec iov = {.iov_base = sbuf, .iov_len = 100};
		struct fi_msg_tagged m = {.msg_iov = &iov, .iov_count = 1, .addr = e->self,
					  .tag = 0x77, .context = &sctx};
		uint64_t end = fx_now_ms() + TM_WAIT_MS;
		int rc = -FI_ETIMEDOUT;

		tm_fill(sbuf, 100, 99);
		assert_int_equal(fi_trecv(e->ep, rbuf, 100, NULL, FI_ADDR_UNSPEC, 0x77, 0, &rctx), 0);
		assert_int_equal(fi_tsendmsg(ep2, &m, FI_DELIVERY_COMPLETE | FI_INJECT), 0);
		memset(sbuf, 0, 100);
		while (rc && fx_now_ms() <= end) {
			(void)fi_cq_read(e->cq, &ce, 0);
			rc = fx_cq_wait(cq2, &sctx, 1, &ce);
		}
		assert_int_equal(rc, 0);
		assert_int_equal(fx_cq_wait(e->cq, &rctx, TM_WAIT_MS, &ce), 0);
		tm_fill(sbuf, 100, 99);
		assert_memory_equal(rbuf, sbuf, 100);
	}

	free(sbuf);
	free(rbuf);
	assert_int_equal(fi_close(&ep2->fid), 0);
	assert_int_equal(fi_close(&cq2->fid), 0);
	fi_freeinfo(info);
}

/* ---------------------------------------------------------------------
 * Item 10: FI_SOURCE_ERR.
 */
/* A receiver with FI_SOURCE | FI_SOURCE_ERR gets a message from an
 * endpoint that is not in its AV: fi_cq_readfrom says -FI_EAVAIL, the
 * error entry is FI_EADDRNOTAVAIL with the data received and err_data
 * the sender's address, which fi_av_insert takes; the next message from
 * it is an ordinary completion whose source is the new fi_addr.
 * Without FI_SOURCE_ERR the source is FI_ADDR_NOTAVAIL, no error. */
static void test_source_err(void **state)
{
	struct fx_env *e = *state;
	struct fi_provider *prov = fx_prov();
	struct fi_info *hints = fi_allocinfo(), *info = NULL, *plain = NULL;
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fid_ep *rx, *tx;
	struct fid_cq *rcq, *tcq;
	struct fid_av *rav;
	struct shim_name {
		uint64_t host_id;
		uint32_t ipv4;
		uint16_t udp_port, lid, ctx, unit;
		uint32_t nonce, uid, pid;
	} txname, got;
	size_t len = sizeof(txname);
	char rxname[64];
	size_t rxlen = sizeof(rxname);
	fi_addr_t to_rx, from_tx = FI_ADDR_NOTAVAIL, src;
	struct fi_cq_tagged_entry ce;
	struct fi_cq_err_entry ee;
	struct fi_context rctx, sctx;
	char sbuf[40], rbuf[40];
	uint64_t end;
	ssize_t n;

	assert_non_null(hints);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED | FI_SOURCE | FI_SOURCE_ERR;
	assert_int_equal(prov->getinfo(FX_VERSION, NULL, NULL, 0, hints, &info), 0);
	assert_true(info->caps & FI_SOURCE_ERR);
	hints->caps = FI_TAGGED | FI_SOURCE_ERR; /* must come with FI_SOURCE */
	assert_int_equal(prov->getinfo(FX_VERSION, NULL, NULL, 0, hints, &plain), -FI_ENODATA);
	hints->caps = 0; /* never given unasked */
	assert_int_equal(prov->getinfo(FX_VERSION, NULL, NULL, 0, hints, &plain), 0);
	assert_false(plain->caps & FI_SOURCE_ERR);
	fi_freeinfo(plain);
	fi_freeinfo(hints);

	/* the receiver has an AV of its own that never holds the sender */
	assert_int_equal(fi_av_open(e->domain, &av_attr, &rav, NULL), 0);
	assert_int_equal(fi_cq_open(e->domain, &cq_attr, &rcq, NULL), 0);
	assert_int_equal(fi_endpoint(e->domain, info, &rx, NULL), 0);
	assert_int_equal(fi_ep_bind(rx, &rcq->fid, FI_TRANSMIT | FI_RECV), 0);
	assert_int_equal(fi_ep_bind(rx, &rav->fid, 0), 0);
	assert_int_equal(fi_enable(rx), 0);
	assert_int_equal(fi_getname(&rx->fid, rxname, &rxlen), 0);
	/* the sender uses the fixture's AV */
	tm_ep_open(e, e->info, &tx, &tcq, &src);
	assert_int_equal(fi_getname(&tx->fid, &txname, &len), 0);
	assert_int_equal(fi_av_insert(e->av, rxname, 1, &to_rx, 0, NULL), 1);

	for (int round = 0; round < 2; round++) {
		tm_fill(sbuf, sizeof(sbuf), 40u + (unsigned)round);
		memset(rbuf, 0, sizeof(rbuf));
		assert_int_equal(fi_trecv(rx, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 3, 0, &rctx), 0);
		assert_int_equal(fi_tsend(tx, sbuf, sizeof(sbuf), NULL, to_rx, 3, &sctx), 0);
		assert_int_equal(fx_cq_wait(tcq, &sctx, TM_WAIT_MS, &ce), 0);
		end = fx_now_ms() + TM_WAIT_MS;
		do
			n = fi_cq_readfrom(rcq, &ce, 1, &src);
		while (n == -FI_EAGAIN && fx_now_ms() <= end);
		if (round == 0) {
			assert_int_equal(n, -FI_EAVAIL);
			memset(&ee, 0, sizeof(ee));
			ee.err_data = &got;
			ee.err_data_size = sizeof(got);
			assert_int_equal(fi_cq_readerr(rcq, &ee, 0), 1);
			assert_int_equal(ee.err, FI_EADDRNOTAVAIL);
			assert_ptr_equal(ee.op_context, &rctx);
			assert_int_equal(ee.len, sizeof(sbuf));
			assert_true(ee.flags & FI_RECV);
			assert_int_equal(ee.err_data_size, sizeof(got));
			assert_int_equal(got.host_id, txname.host_id);
			assert_int_equal(got.lid, txname.lid);
			assert_int_equal(got.ctx, txname.ctx);
			assert_int_equal(got.unit, txname.unit);
			assert_int_equal(got.nonce, txname.nonce);
			assert_int_equal(fi_av_insert(rav, &got, 1, &from_tx, 0, NULL), 1);
		} else {
			assert_int_equal(n, 1);
			assert_ptr_equal(ce.op_context, &rctx);
			assert_int_equal(src, from_tx);
		}
		assert_memory_equal(rbuf, sbuf, sizeof(sbuf));
	}

	/* back the other way, to an endpoint without FI_SOURCE_ERR whose AV
	 * holds the sender: an ordinary completion with its source */
	tm_fill(sbuf, sizeof(sbuf), 7);
	assert_int_equal(fi_trecv(tx, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 4, 0, &rctx), 0);
	assert_int_equal(fi_tsend(rx, sbuf, sizeof(sbuf), NULL, from_tx, 4, &sctx), 0);
	end = fx_now_ms() + TM_WAIT_MS;
	do {
		(void)fi_cq_read(rcq, &ce, 0);
		n = fi_cq_readfrom(tcq, &ce, 1, &src);
	} while (n == -FI_EAGAIN && fx_now_ms() <= end);
	assert_int_equal(n, 1);
	assert_ptr_equal(ce.op_context, &rctx);
	assert_memory_equal(rbuf, sbuf, sizeof(sbuf));
	/* tx's AV (the fixture's) holds rx: a real source */
	assert_int_equal(src, to_rx);

	assert_int_equal(fi_close(&tx->fid), 0);
	assert_int_equal(fi_close(&tcq->fid), 0);
	assert_int_equal(fi_close(&rx->fid), 0);
	assert_int_equal(fi_close(&rcq->fid), 0);
	assert_int_equal(fi_close(&rav->fid), 0);
	fi_freeinfo(info);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_sendmsg_inject_completes, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_inject_op_flag, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_delivery_complete, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_source_err, fx_setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
