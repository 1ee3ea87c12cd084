/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_peer_split.c - the split copy's choices with peers in flight
 * (issue 6 item 6, issue 11): a split receive whose sender is pushed out
 * of the receiver's anonymous-peer cache still completes intact, and a
 * receiver with rendezvous sends of its own in flight pulls whole instead
 * of splitting.  The split refused by a receiver that forbids CMA writes
 * is in test_peer_forged.c with the other misbehaving peers.  Every wait is
 * bounded in time.
 */
#include <stdlib.h>
#include <string.h>

#include "peer_fixture.h"
#include "opx_ep.h"

/* tx (its own CQ cq_tx) sends len bytes to the fixture's endpoint, which
 * pulls them whole: a first pull proves CMA, the split copy's condition. */
static void tp_first_pull(struct tp_env *t, struct fid_ep *tx, struct fid_cq *cq_tx, uint8_t *src,
			  uint8_t *dst, size_t len, unsigned seed, uint64_t tag)
{
	void *ctx;

	tp_fill(src, len, seed);
	assert_int_equal(fi_trecv(t->fx.ep, dst, len, NULL, FI_ADDR_UNSPEC, tag, 0, dst), 0);
	assert_int_equal(fi_tsend(tx, src, len, NULL, t->fx.self, tag, src), 0);
	assert_int_equal(tp_wait(t, dst, NULL, TP_WAIT_MS), 0);
	assert_true(tp_intact(dst, len, seed));
	assert_int_equal(tp_cq_one(cq_tx, &ctx, TP_WAIT_MS), 0);
	assert_ptr_equal(ctx, src);
}

/* The same, split: the receive waits for tx, which has not progressed. */
static void tp_split_started(struct tp_env *t, struct fid_ep *tx, uint8_t *src, uint8_t *dst,
			     size_t len, unsigned seed, uint64_t tag)
{
	tp_fill(src, len, seed);
	memset(dst, 0, len);
	assert_int_equal(fi_trecv(t->fx.ep, dst, len, NULL, FI_ADDR_UNSPEC, tag, 0, dst), 0);
	assert_int_equal(fi_tsend(tx, src, len, NULL, t->fx.self, tag, src), 0);
	assert_int_equal(tp_wait(t, dst, NULL, 200), -FI_ETIMEDOUT);
}

/* The anonymous-peer cache (item 6): a split receive from a sender that is
 * not in the AV holds the cached mapping of that sender; sixteen other
 * anonymous senders evict it from the cache while the receive waits for
 * the sender's WDONE.  The idle watch then looks at the receive's peer:
 * it must still be mapped (old code: a freed peer), and the message must
 * arrive intact.  Separate CQs let the test order each side's progress. */
#define TP_ANON_SENDERS (OPX_ANON_PEERS + 1)

static void test_anon_evicted_inflight(void **state)
{
	struct tp_env *t = *state;
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
	struct fid_cq *cq_tx, *cq_others;
	struct fid_ep *tx, *others[TP_ANON_SENDERS];
	const size_t big = 1 << 20, small = 16 * 1024; /* pulled whole, not split */
	uint8_t *src = malloc(big), *dst = calloc(1, big), *osrc = malloc(small);
	uint8_t *odst = calloc(TP_ANON_SENDERS, small);
	void *ctx;
	int got;

	assert_true(src && dst && osrc && odst);
	assert_int_equal(fi_cq_open(t->fx.domain, &ca, &cq_tx, NULL), 0);
	assert_int_equal(fi_cq_open(t->fx.domain, &ca, &cq_others, NULL), 0);
	tp_ep_on(t, cq_tx, &tx); /* not inserted: the receiver answers it anonymously */
	for (int i = 0; i < TP_ANON_SENDERS; i++)
		tp_ep_on(t, cq_others, &others[i]);

	/* 1: a plain pull proves CMA for the receiver */
	tp_first_pull(t, tx, cq_tx, src, dst, big, 51, 0xa1);

	/* 2: split; the receiver now waits for tx's WDONE */
	tp_split_started(t, tx, src, dst, big, 52, 0xa2);

	/* 3: other anonymous senders push tx out of the receiver's cache */
	tp_fill(osrc, small, 53);
	for (int i = 0; i < TP_ANON_SENDERS; i++) {
		assert_int_equal(fi_trecv(t->fx.ep, odst + (size_t)i * small, small, NULL,
					  FI_ADDR_UNSPEC, 0xa3, 0, odst + (size_t)i * small),
				 0);
		assert_int_equal(fi_tsend(others[i], osrc, small, NULL, t->fx.self, 0xa3, osrc), 0);
		assert_int_equal(tp_wait(t, odst + (size_t)i * small, NULL, TP_WAIT_MS), 0);
		assert_true(tp_intact(odst + (size_t)i * small, small, 53));
	}
	for (got = 0; got < TP_ANON_SENDERS; got++)
		assert_int_equal(tp_cq_one(cq_others, &ctx, TP_WAIT_MS), 0);
	/* idle polls: the watch looks at the waiting receive's peer */
	assert_int_equal(tp_wait(t, dst, NULL, 150), -FI_ETIMEDOUT);

	/* 4: tx answers, the receive completes intact */
	assert_int_equal(tp_cq_one(cq_tx, &ctx, TP_WAIT_MS), 0);
	assert_ptr_equal(ctx, src);
	assert_int_equal(tp_wait(t, dst, NULL, TP_WAIT_MS), 0);
	assert_true(tp_intact(dst, big, 52));

	for (int i = 0; i < TP_ANON_SENDERS; i++)
		assert_int_equal(fi_close(&others[i]->fid), 0);
	assert_int_equal(fi_close(&tx->fid), 0);
	assert_int_equal(fi_close(&cq_tx->fid), 0);
	assert_int_equal(fi_close(&cq_others->fid), 0);
	free(src);
	free(dst);
	free(osrc);
	free(odst);
}

/* The split copy has the sender write part of the data: only a sender
 * with CPU to spare.  A receiver with rendezvous sends of its own in
 * flight (its peers are busy pulling them) pulls the whole message, so
 * its receive completes while the sender does not progress at all. */
static void test_split_busy(void **state)
{
	struct tp_env *t = *state;
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
	const size_t big = 1 << 20;
	uint8_t *src = malloc(big), *dst = calloc(1, big), *out = malloc(big), *in = calloc(1, big);
	char name[64];
	size_t namelen = sizeof(name);
	struct fid_cq *cq_tx;
	struct fid_ep *tx;
	fi_addr_t a_tx;
	void *ctx;

	assert_true(src && dst && out && in);
	assert_int_equal(fi_cq_open(t->fx.domain, &ca, &cq_tx, NULL), 0);
	tp_ep_on(t, cq_tx, &tx);
	assert_int_equal(fi_getname(&tx->fid, name, &namelen), 0);
	assert_int_equal(fi_av_insert(t->fx.av, name, 1, &a_tx, 0, NULL), 1);

	/* 1: a plain pull proves CMA for the receiver */
	tp_first_pull(t, tx, cq_tx, src, dst, big, 61, 0xb1);

	/* 2: nothing of its own in flight: split, the receive waits for tx */
	tp_split_started(t, tx, src, dst, big, 62, 0xb2);
	assert_int_equal(tp_cq_one(cq_tx, &ctx, TP_WAIT_MS), 0);
	assert_ptr_equal(ctx, src);
	assert_int_equal(tp_wait(t, dst, NULL, TP_WAIT_MS), 0);
	assert_true(tp_intact(dst, big, 62));

	/* 3: a rendezvous send of its own to tx in flight: pulled whole */
	tp_fill(out, big, 63);
	assert_int_equal(fi_tsend(t->fx.ep, out, big, NULL, a_tx, 0xb4, out), 0);
	tp_fill(src, big, 64);
	memset(dst, 0, big);
	assert_int_equal(fi_trecv(t->fx.ep, dst, big, NULL, FI_ADDR_UNSPEC, 0xb3, 0, dst), 0);
	assert_int_equal(fi_tsend(tx, src, big, NULL, t->fx.self, 0xb3, src), 0);
	assert_int_equal(tp_wait(t, dst, NULL, TP_WAIT_MS), 0);
	assert_true(tp_intact(dst, big, 64));
	/* tx: its send is done; it receives ours, which then completes */
	assert_int_equal(tp_cq_one(cq_tx, &ctx, TP_WAIT_MS), 0);
	assert_ptr_equal(ctx, src);
	assert_int_equal(fi_trecv(tx, in, big, NULL, FI_ADDR_UNSPEC, 0xb4, 0, in), 0);
	assert_int_equal(tp_cq_one(cq_tx, &ctx, TP_WAIT_MS), 0);
	assert_ptr_equal(ctx, in);
	assert_true(tp_intact(in, big, 63));
	assert_int_equal(tp_wait(t, out, NULL, TP_WAIT_MS), 0);

	assert_int_equal(fi_close(&tx->fid), 0);
	assert_int_equal(fi_close(&cq_tx->fid), 0);
	free(src);
	free(dst);
	free(out);
	free(in);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_anon_evicted_inflight, tp_setup, tp_teardown),
		cmocka_unit_test_setup_teardown(test_split_busy, tp_setup, tp_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
