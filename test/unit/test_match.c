/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_match.c - the matching engine and the size protocols, end to end
 * through the public API: tag/ignore matching, expected and unexpected
 * paths at every protocol threshold, directed receive, ordering,
 * truncation and iovecs.  Peek / claim / discard, cancel, multi-recv and
 * the bound on unexpected memory are in test_match_queue.c; the helpers
 * both use are in match_fixture.c.
 *
 * Messages go from an endpoint to itself (the fixture's loopback) or
 * between extra endpoints opened on the same domain, AV and CQ, so one
 * fi_cq_read drives progress for all of them.  Every wait is bounded.
 *
 * Sizes above the advertised max_msg_size cannot be sent at all, so the
 * sweeps skip them (saying so once); test_rndv_reachable is the one test
 * that insists the rendezvous sizes are reachable.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "match_fixture.h"

static void tm_open_ep(struct tm_env *t, struct fid_ep **ep, fi_addr_t *addr)
{
	fx_open_peer_ep(&t->fx, NULL, NULL, ep, addr);
}

/* ---------------------------------------------------------------------
 * Tag and ignore bits; separate tagged and msg queues.
 */
static void test_tag_ignore(void **state)
{
	struct tm_env *t = *state;
	struct fi_context rctx, sctx[4], mctx, mrctx, xctx;
	static const uint64_t tags[] = {0x1200, 0x12ff, 0x1234, 0x1300};
	uint8_t sbuf[32], rbuf[32];
	struct fx_comp c;

	/* One receive with the low byte ignored accepts 0x12xx only. */
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(fi_trecv(t->fx.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 0x1200,
					  0xff, &rctx),
				 0);
		tm_fill(sbuf, sizeof(sbuf), i);
		tm_tsend(t, t->fx.ep, sbuf, sizeof(sbuf), t->fx.self, tags[i], 0, false, &sctx[i]);
		tm_wait(t, &sctx[i], &c);
		assert_int_equal(c.err, 0);
		if (tags[i] >> 8 == 0x12) {
			tm_wait(t, &rctx, &c);
			assert_int_equal(c.err, 0);
			assert_int_equal(c.e.tag, tags[i]);
			assert_int_equal(c.e.len, sizeof(sbuf));
			assert_int_equal(tm_check(rbuf, sizeof(rbuf), i), sizeof(rbuf));
		} else {
			/* 0x1300 must not match; cancel the receive and take the
			 * message with an exact tag. */
			tm_expect_none(t, &rctx, 50);
			assert_int_equal(fi_cancel(&t->fx.ep->fid, &rctx), 0);
			tm_wait(t, &rctx, &c);
			assert_int_equal(c.err, FI_ECANCELED);
			assert_int_equal(fi_trecv(t->fx.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC,
						  0x1300, 0, &xctx),
					 0);
			tm_wait(t, &xctx, &c);
			assert_int_equal(c.err, 0);
			assert_int_equal(c.e.tag, 0x1300);
			assert_int_equal(tm_check(rbuf, sizeof(rbuf), i), sizeof(rbuf));
		}
	}

	/* A msg send must not match a tagged receive, even with all tag bits
	 * ignored; a tagged send must not match a msg receive. */
	assert_int_equal(fi_trecv(t->fx.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 0, ~0ULL, &rctx),
			 0);
	tm_fill(sbuf, sizeof(sbuf), 77);
	assert_int_equal(fi_send(t->fx.ep, sbuf, sizeof(sbuf), NULL, t->fx.self, &mctx), 0);
	tm_wait(t, &mctx, &c);
	tm_expect_none(t, &rctx, 50);
	assert_int_equal(fi_recv(t->fx.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, &mrctx), 0);
	tm_wait(t, &mrctx, &c);
	assert_int_equal(c.err, 0);
	assert_int_equal(c.e.flags & TM_FLAG_MASK, FI_RECV | FI_MSG);
	assert_int_equal(tm_check(rbuf, sizeof(rbuf), 77), sizeof(rbuf));
	/* the wildcard tagged receive takes the next tagged message */
	tm_fill(sbuf, sizeof(sbuf), 78);
	tm_tsend(t, t->fx.ep, sbuf, sizeof(sbuf), t->fx.self, 0xdeadbeefULL, 0, false, &sctx[0]);
	tm_wait(t, &rctx, &c);
	assert_int_equal(c.err, 0);
	assert_int_equal(c.e.tag, 0xdeadbeefULL);
	assert_int_equal(tm_check(rbuf, sizeof(rbuf), 78), sizeof(rbuf));
	tm_wait(t, &sctx[0], NULL);

	assert_int_equal(fi_recv(t->fx.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, &mrctx), 0);
	tm_tsend(t, t->fx.ep, sbuf, sizeof(sbuf), t->fx.self, 5, 0, false, &sctx[1]);
	tm_wait(t, &sctx[1], NULL);
	tm_expect_none(t, &mrctx, 50);
	assert_int_equal(fi_cancel(&t->fx.ep->fid, &mrctx), 0);
	tm_wait(t, &mrctx, &c);
	assert_int_equal(c.err, FI_ECANCELED);
	assert_int_equal(fi_trecv(t->fx.ep, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 5, 0, &rctx), 0);
	tm_wait(t, &rctx, &c);
	assert_int_equal(c.err, 0);
}

/* ---------------------------------------------------------------------
 * Expected and unexpected paths at every size.
 */
static void tm_one_size(struct tm_env *t, size_t len, bool expected, unsigned seed)
{
	struct fi_context rctx, sctx;
	uint64_t tag = 0xabc00000ULL + len;
	uint64_t data = 0x5eed000000000000ULL | (len << 8) | seed;
	uint8_t *sbuf = malloc(len + 1), *rbuf = malloc(len + 64);
	struct fx_comp c;

	assert_non_null(sbuf);
	assert_non_null(rbuf);
	tm_fill(sbuf, len, seed);
	memset(rbuf, 0xee, len + 64);
	if (expected)
		assert_int_equal(fi_trecv(t->fx.ep, rbuf, len + 64, NULL, FI_ADDR_UNSPEC, tag, 0, &rctx),
				 0);
	tm_tsend(t, t->fx.ep, sbuf, len, t->fx.self, tag, data, true, &sctx);
	if (!expected) {
		tm_progress(t, 4);
		assert_int_equal(fi_trecv(t->fx.ep, rbuf, len + 64, NULL, FI_ADDR_UNSPEC, tag, 0, &rctx),
				 0);
	}
	tm_wait(t, &rctx, &c);
	assert_int_equal(c.err, 0);
	assert_int_equal(c.e.len, len);
	assert_int_equal(c.e.tag, tag);
	assert_int_equal(c.e.data, data);
	assert_int_equal(c.e.flags & TM_FLAG_MASK, TM_RECV_TAGGED | FI_REMOTE_CQ_DATA);
	assert_int_equal(c.src, t->fx.self);
	assert_int_equal(tm_check(rbuf, len, seed), len);
	for (size_t i = len; i < len + 64; i++)
		assert_int_equal(rbuf[i], 0xee); /* nothing written past the message */
	/* the send completes too, as a send */
	tm_wait(t, &sctx, &c);
	assert_int_equal(c.err, 0);
	assert_int_equal(c.e.flags & TM_FLAG_MASK, FI_SEND | FI_TAGGED);
	free(sbuf);
	free(rbuf);
}

static void test_expected_sizes(void **state)
{
	struct tm_env *t = *state;

	for (size_t i = 0; i < TM_NSIZES; i++)
		if (tm_size_ok(t, tm_sizes[i]))
			tm_one_size(t, tm_sizes[i], true, (unsigned)i + 1);
}

static void test_unexpected_sizes(void **state)
{
	struct tm_env *t = *state;

	for (size_t i = 0; i < TM_NSIZES; i++)
		if (tm_size_ok(t, tm_sizes[i]))
			tm_one_size(t, tm_sizes[i], false, (unsigned)i + 11);
}

/* The sweeps skip what cannot be sent; this test is the one that says
 * rendezvous sizes must be sendable at all. */
static void test_rndv_reachable(void **state)
{
	struct tm_env *t = *state;

	/* Guards against max_msg_size falling back to the eager limit (it
	 * once did), which would make the sweeps silently skip rendezvous. */
	if (t->max_msg < TM_MIB)
		fail_msg("max_msg_size %zu < 1 MiB: rendezvous sizes cannot be sent", t->max_msg);
	tm_one_size(t, TM_MIB, true, 99);
	tm_one_size(t, TM_MIB, false, 98);
}

/* ---------------------------------------------------------------------
 * Directed receive.
 */
static void test_directed_recv(void **state)
{
	static const size_t lens[] = {8, 8192, 65536, TM_MIB};
	struct tm_env *t = *state;
	struct fi_context r3, rany, s2, s3;
	struct fx_comp c;

	tm_open_ep(t, &t->ep2, &t->a2);
	tm_open_ep(t, &t->ep3, &t->a3);
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
		size_t len = lens[k];
		uint8_t *b2, *b3, *rb3, *rbany;

		if (!tm_size_ok(t, len))
			continue;
		b2 = malloc(len);
		b3 = malloc(len);
		rb3 = calloc(1, len);
		rbany = calloc(1, len);
		assert_true(b2 && b3 && rb3 && rbany);
		tm_fill(b2, len, 2);
		tm_fill(b3, len, 3);

		/* posted before: from ep3 only; ep2's message must wait */
		assert_int_equal(fi_trecv(t->fx.ep, rb3, len, NULL, t->a3, 7, 0, &r3), 0);
		tm_tsend(t, t->ep2, b2, len, t->fx.self, 7, 0, false, &s2);
		tm_progress(t, 4);
		tm_expect_none(t, &r3, 20);
		tm_tsend(t, t->ep3, b3, len, t->fx.self, 7, 0, false, &s3);
		tm_wait(t, &r3, &c);
		assert_int_equal(c.err, 0);
		assert_int_equal(c.src, t->a3);
		assert_int_equal(tm_check(rb3, len, 3), len);
		/* FI_ADDR_UNSPEC takes ep2's, now unexpected */
		assert_int_equal(fi_trecv(t->fx.ep, rbany, len, NULL, FI_ADDR_UNSPEC, 7, 0, &rany), 0);
		tm_wait(t, &rany, &c);
		assert_int_equal(c.err, 0);
		assert_int_equal(c.src, t->a2);
		assert_int_equal(tm_check(rbany, len, 2), len);
		tm_wait(t, &s2, NULL);
		tm_wait(t, &s3, NULL);

		/* unexpected first: both arrive, then a directed receive for
		 * ep3 skips ep2's older message */
		memset(rb3, 0, len);
		memset(rbany, 0, len);
		tm_tsend(t, t->ep2, b2, len, t->fx.self, 8, 0, false, &s2);
		tm_tsend(t, t->ep3, b3, len, t->fx.self, 8, 0, false, &s3);
		tm_progress(t, 4);
		assert_int_equal(fi_trecv(t->fx.ep, rb3, len, NULL, t->a3, 8, 0, &r3), 0);
		tm_wait(t, &r3, &c);
		assert_int_equal(c.src, t->a3);
		assert_int_equal(tm_check(rb3, len, 3), len);
		assert_int_equal(fi_trecv(t->fx.ep, rbany, len, NULL, FI_ADDR_UNSPEC, 8, 0, &rany), 0);
		tm_wait(t, &rany, &c);
		assert_int_equal(c.src, t->a2);
		assert_int_equal(tm_check(rbany, len, 2), len);
		tm_wait(t, &s2, NULL);
		tm_wait(t, &s3, NULL);
		free(b2);
		free(b3);
		free(rb3);
		free(rbany);
	}
}

/* ---------------------------------------------------------------------
 * Ordering: one tag, mixed protocols, half unexpected, half posted.
 */
#define TM_ORDER_N 36

/* A message that arrives before the receiver inserted its sender (another
 * host's rank that finished MPI_Init first) still matches a directed
 * receive posted after the insert, eager and rendezvous, and reports the
 * inserted fi_addr.  The sender has its own domain and AV. */
static void test_directed_before_insert(void **state)
{
	static uint8_t small[100], big[200000], rsmall[100], rbig[200000];
	struct tm_env *t = *state;
	struct fx_env o;
	char name[64];
	size_t namelen = sizeof(name);
	fi_addr_t to_t, ao;
	struct fx_comp c;
	uint64_t end;
	bool got_small = false, got_big = false;

	assert_int_equal(fx_open(&o, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED), 0);
	assert_int_equal(fi_getname(&t->fx.ep->fid, name, &namelen), 0);
	assert_int_equal(fi_av_insert(o.av, name, 1, &to_t, 0, NULL), 1);
	tm_fill(small, sizeof(small), 21);
	tm_fill(big, sizeof(big), 22);
	assert_int_equal(fi_tsend(o.ep, small, sizeof(small), NULL, to_t, 0x71, small), 0);
	assert_int_equal(fi_tsend(o.ep, big, sizeof(big), NULL, to_t, 0x72, big), 0);
	tm_progress(t, 200); /* both land as unexpected, sender unknown */
	namelen = sizeof(name);
	assert_int_equal(fi_getname(&o.ep->fid, name, &namelen), 0);
	assert_int_equal(fi_av_insert(t->fx.av, name, 1, &ao, 0, NULL), 1);
	assert_int_equal(fi_trecv(t->fx.ep, rsmall, sizeof(rsmall), NULL, ao, 0x71, 0, rsmall), 0);
	assert_int_equal(fi_trecv(t->fx.ep, rbig, sizeof(rbig), NULL, ao, 0x72, 0, rbig), 0);
	end = fx_now_ms() + 10000;
	while ((!got_small || !got_big) && fx_now_ms() < end) {
		(void)fi_cq_read(o.cq, NULL, 0); /* the sender progresses too */
		if (!got_small && tm_wait_ms(t, rsmall, &c, 1) == 0) {
			assert_int_equal(c.err, 0);
			assert_int_equal(c.src, ao);
			got_small = true;
		}
		if (!got_big && tm_wait_ms(t, rbig, &c, 1) == 0) {
			assert_int_equal(c.err, 0);
			assert_int_equal(c.src, ao);
			got_big = true;
		}
	}
	assert_true(got_small && got_big);
	assert_int_equal(tm_check(rsmall, sizeof(rsmall), 21), sizeof(rsmall));
	assert_int_equal(tm_check(rbig, sizeof(rbig), 22), sizeof(rbig));
	fx_close(&o);
}

static void test_ordering(void **state)
{
	static const size_t mix[] = {0, 8, 100, 8192, 20000, 65536, TM_MIB, 17, 8193};
	struct tm_env *t = *state;
	struct fi_context sctx[TM_ORDER_N], rctx[TM_ORDER_N];
	uint8_t *sbuf[TM_ORDER_N], *rbuf[TM_ORDER_N];
	size_t len[TM_ORDER_N];
	size_t n = 0;
	struct fx_comp c;

	tm_open_ep(t, &t->ep2, &t->a2);
	for (size_t i = 0; n < TM_ORDER_N && i < 4 * TM_ORDER_N; i++) {
		size_t l = mix[i % (sizeof(mix) / sizeof(mix[0]))];
		if (!tm_size_ok(t, l))
			continue;
		len[n] = l;
		sbuf[n] = malloc(l + 1);
		rbuf[n] = calloc(1, l + 1);
		assert_true(sbuf[n] && rbuf[n]);
		tm_fill(sbuf[n], l, (unsigned)n + 100);
		n++;
	}
	/* first half sent before any receive exists, from ep2 */
	for (size_t i = 0; i < n / 2; i++)
		tm_tsend(t, t->ep2, sbuf[i], len[i], t->fx.self, 42, i, true, &sctx[i]);
	tm_progress(t, 8);
	/* receives for everything, with a buffer big enough for any size */
	for (size_t i = 0; i < n; i++)
		assert_int_equal(fi_trecv(t->fx.ep, rbuf[i], len[i] + 1, NULL, FI_ADDR_UNSPEC, 42, 0,
					  &rctx[i]),
				 0);
	for (size_t i = n / 2; i < n; i++)
		tm_tsend(t, t->ep2, sbuf[i], len[i], t->fx.self, 42, i, true, &sctx[i]);
	/* the i-th receive got the i-th message */
	for (size_t i = 0; i < n; i++) {
		tm_wait(t, &rctx[i], &c);
		assert_int_equal(c.err, 0);
		assert_int_equal(c.e.data, i);
		assert_int_equal(c.e.len, len[i]);
		assert_int_equal(tm_check(rbuf[i], len[i], (unsigned)i + 100), len[i]);
	}
	for (size_t i = 0; i < n; i++) {
		tm_wait(t, &sctx[i], &c);
		assert_int_equal(c.err, 0);
		free(sbuf[i]);
		free(rbuf[i]);
	}
}

/* ---------------------------------------------------------------------
 * Truncation.
 */
static void test_truncation(void **state)
{
	struct tm_env *t = *state;
	struct fi_context rctx, sctx;
	struct fx_comp c;

	for (size_t i = 0; i < TM_NSIZES; i++) {
		size_t len = tm_sizes[i];
		for (int expected = 0; expected < 2; expected++) {
			size_t blen = len / 2;
			uint8_t *sbuf, *rbuf;

			if (!len || !tm_size_ok(t, len))
				continue;
			sbuf = malloc(len);
			rbuf = malloc(blen + 64);
			assert_true(sbuf && rbuf);
			memset(rbuf, 0xee, blen + 64);
			tm_fill(sbuf, len, (unsigned)i + 40);
			if (expected)
				assert_int_equal(fi_trecv(t->fx.ep, rbuf, blen, NULL, FI_ADDR_UNSPEC, 3, 0,
							  &rctx),
						 0);
			tm_tsend(t, t->fx.ep, sbuf, len, t->fx.self, 3, 0, false, &sctx);
			if (!expected) {
				tm_progress(t, 4);
				assert_int_equal(fi_trecv(t->fx.ep, rbuf, blen, NULL, FI_ADDR_UNSPEC, 3, 0,
							  &rctx),
						 0);
			}
			tm_wait(t, &rctx, &c);
			assert_int_equal(c.err, FI_ETRUNC);
			assert_int_equal(c.olen, len - blen);
			assert_int_equal(c.e.len, blen);
			assert_int_equal(c.e.tag, 3);
			assert_int_equal(tm_check(rbuf, blen, (unsigned)i + 40), blen);
			for (size_t k = blen; k < blen + 64; k++)
				assert_int_equal(rbuf[k], 0xee);
			tm_wait(t, &sctx, &c);
			assert_int_equal(c.err, 0);
			free(sbuf);
			free(rbuf);
		}
	}
}

/* ---------------------------------------------------------------------
 * sendv / recvv.
 */
static void tm_split(struct iovec *iov, size_t n, uint8_t *base, size_t len, unsigned salt)
{
	size_t off = 0;

	for (size_t k = 0; k < n; k++) {
		size_t part = k + 1 == n ? len - off : (len / n) + (salt * (k + 3)) % 7;
		if (part > len - off)
			part = len - off;
		iov[k].iov_base = base + off;
		iov[k].iov_len = part;
		off += part;
	}
}

static void test_iov(void **state)
{
	static const size_t lens[] = {3, 17, 8191, 8193, 65535, 65537, TM_MIB};
	struct tm_env *t = *state;
	struct fi_context rctx, sctx;
	struct fx_comp c;

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		size_t len = lens[i];
		for (size_t sn = 1; sn <= 4; sn += 3) {
			for (int tagged = 0; tagged < 2; tagged++) {
				struct iovec siov[4], riov[4];
				size_t rn = 5 - sn;
				uint8_t *sbuf, *rbuf;

				if (!tm_size_ok(t, len))
					continue;
				sbuf = malloc(len);
				rbuf = calloc(1, len);
				assert_true(sbuf && rbuf);
				tm_fill(sbuf, len, (unsigned)(i * 8 + sn));
				tm_split(siov, sn, sbuf, len, 1);
				tm_split(riov, rn, rbuf, len, 5);
				if (tagged) {
					assert_int_equal(fi_trecvv(t->fx.ep, riov, NULL, rn, FI_ADDR_UNSPEC,
								   11, 0, &rctx),
							 0);
					assert_int_equal(fi_tsendv(t->fx.ep, siov, NULL, sn, t->fx.self, 11,
								   &sctx),
							 0);
				} else {
					/* unexpected this time */
					assert_int_equal(fi_sendv(t->fx.ep, siov, NULL, sn, t->fx.self,
								  &sctx),
							 0);
					tm_progress(t, 4);
					assert_int_equal(fi_recvv(t->fx.ep, riov, NULL, rn, FI_ADDR_UNSPEC,
								  &rctx),
							 0);
				}
				tm_wait(t, &rctx, &c);
				assert_int_equal(c.err, 0);
				assert_int_equal(c.e.len, len);
				assert_int_equal(tm_check(rbuf, len, (unsigned)(i * 8 + sn)), len);
				tm_wait(t, &sctx, &c);
				assert_int_equal(c.err, 0);
				free(sbuf);
				free(rbuf);
			}
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_tag_ignore, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_expected_sizes, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_unexpected_sizes, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_rndv_reachable, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_directed_recv, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_directed_before_insert, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_ordering, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_truncation, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_iov, tm_setup, tm_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
