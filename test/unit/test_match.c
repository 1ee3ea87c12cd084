/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_match.c - the matching engine and the size protocols, end to end
 * through the public API: tag/ignore matching, expected and unexpected
 * paths at every protocol threshold, directed receive, ordering, peek /
 * claim / discard, cancel, multi-recv, truncation, iovecs, and the bound
 * on unexpected memory.
 *
 * Messages go from an endpoint to itself (the fixture's loopback) or
 * between extra endpoints opened on the same domain, AV and CQ, so one
 * fi_cq_read drives progress for all of them.  Every wait is bounded.
 *
 * Sizes above the advertised max_msg_size cannot be sent at all, so the
 * sweeps skip them (saying so once); test_rndv_reachable is the one test
 * that insists the rendezvous sizes are reachable.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"

#define TM_WAIT_MS 2000
#define TM_MAX_SEEN 4096
#define TM_MIB ((size_t)1 << 20)

/* Thresholds: inline <= 16, one packet <= 8192 (MTU), multi-packet eager
 * <= FI_OPX_EAGER_MAX (64 KiB default), rendezvous above. */
static const size_t tm_sizes[] = {0,	 1,	15,    16,    17,    63,    64,    65,    8191,
				  8192,	 8193,	16383, 16384, 16385, 65535, 65536, 65537, TM_MIB};
#define TM_NSIZES (sizeof(tm_sizes) / sizeof(tm_sizes[0]))

/* One completion seen on the CQ, kept until a test asks for its context:
 * loopback puts send and receive completions on one CQ in an order the
 * tests should not depend on. */
struct tm_comp {
	void *ctx;
	struct fi_cq_tagged_entry e;
	fi_addr_t src;
	int err; /* 0, or the positive FI_E* of an error completion */
	size_t olen;
};

struct tm_env {
	struct fx_env fx;
	struct fid_ep *ep2, *ep3; /* extra senders, opened on demand */
	fi_addr_t a2, a3;
	size_t max_msg;
	struct tm_comp seen[TM_MAX_SEEN];
	size_t nseen;
};

static bool tm_skip_noted;

static uint64_t tm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Byte patterns that differ per message (seed) and per offset, so a
 * shifted, truncated or swapped copy is detected. */
static uint8_t tm_pat(unsigned seed, size_t i)
{
	return (uint8_t)(seed * 131u + i * 7u + (i >> 8) + (i >> 16));
}

static void tm_fill(void *buf, size_t len, unsigned seed)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = tm_pat(seed, i);
}

/* Index of the first wrong byte, or len when all are right. */
static size_t tm_check(const void *buf, size_t len, unsigned seed)
{
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		if (p[i] != tm_pat(seed, i))
			return i;
	return len;
}

static bool tm_size_ok(struct tm_env *t, size_t len)
{
	if (len <= t->max_msg)
		return true;
	if (!tm_skip_noted) {
		print_message("note: sizes above max_msg_size=%zu skipped in sweeps\n", t->max_msg);
		tm_skip_noted = true;
	}
	return false;
}

static void tm_stash(struct tm_env *t, const struct tm_comp *c)
{
	assert_true(t->nseen < TM_MAX_SEEN);
	t->seen[t->nseen++] = *c;
}

/* Drive progress once and stash whatever completed. */
static void tm_poll(struct tm_env *t)
{
	struct fi_cq_tagged_entry ents[16];
	fi_addr_t src[16];
	struct tm_comp c;
	ssize_t n = fi_cq_readfrom(t->fx.cq, ents, 16, src);

	if (n > 0) {
		for (ssize_t i = 0; i < n; i++) {
			memset(&c, 0, sizeof(c));
			c.ctx = ents[i].op_context;
			c.e = ents[i];
			c.src = src[i];
			tm_stash(t, &c);
		}
		return;
	}
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry ee;

		memset(&ee, 0, sizeof(ee));
		assert_int_equal(fi_cq_readerr(t->fx.cq, &ee, 0), 1);
		memset(&c, 0, sizeof(c));
		c.ctx = ee.op_context;
		c.e.op_context = ee.op_context;
		c.e.flags = ee.flags;
		c.e.len = ee.len;
		c.e.buf = ee.buf;
		c.e.data = ee.data;
		c.e.tag = ee.tag;
		c.src = FI_ADDR_NOTAVAIL; /* fi_cq_readerr has no source */
		c.err = ee.err;
		c.olen = ee.olen;
		assert_true(c.err > 0);
		tm_stash(t, &c);
		return;
	}
	assert_int_equal(n, -FI_EAGAIN);
}

/* The completion for ctx, polling up to ms milliseconds.  Returns 0 and
 * fills *out, or -FI_ETIMEDOUT. */
static int tm_wait_ms(struct tm_env *t, void *ctx, struct tm_comp *out, unsigned ms)
{
	uint64_t end = tm_now_ms() + ms;

	for (;;) {
		for (size_t i = 0; i < t->nseen; i++) {
			if (t->seen[i].ctx != ctx)
				continue;
			if (out)
				*out = t->seen[i];
			memmove(&t->seen[i], &t->seen[i + 1], (t->nseen - i - 1) * sizeof(t->seen[0]));
			t->nseen--;
			return 0;
		}
		if (tm_now_ms() > end)
			return -FI_ETIMEDOUT;
		tm_poll(t);
	}
}

static void tm_wait(struct tm_env *t, void *ctx, struct tm_comp *out)
{
	int rc = tm_wait_ms(t, ctx, out, TM_WAIT_MS);

	if (rc)
		fail_msg("no completion for context %p within %d ms", ctx, TM_WAIT_MS);
}

/* Drive progress a few times so sent packets reach the unexpected queue
 * before a receive is posted. */
static void tm_progress(struct tm_env *t, int rounds)
{
	for (int i = 0; i < rounds; i++)
		tm_poll(t);
}

/* ctx must not complete within ms. */
static void tm_expect_none(struct tm_env *t, void *ctx, unsigned ms)
{
	if (tm_wait_ms(t, ctx, NULL, ms) == 0)
		fail_msg("unexpected completion for context %p", ctx);
}

/* Sends retry on -FI_EAGAIN with progress, bounded in time. */
static void tm_tsend(struct tm_env *t, struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest,
		     uint64_t tag, uint64_t data, bool with_data, void *ctx)
{
	uint64_t end = tm_now_ms() + TM_WAIT_MS;
	ssize_t rc;

	for (;;) {
		rc = with_data ? fi_tsenddata(ep, buf, len, NULL, data, dest, tag, ctx)
			       : fi_tsend(ep, buf, len, NULL, dest, tag, ctx);
		if (rc != -FI_EAGAIN || tm_now_ms() > end)
			break;
		tm_poll(t);
	}
	assert_int_equal(rc, 0);
}

static ssize_t tm_trecvmsg(struct fid_ep *ep, void *buf, size_t len, fi_addr_t src, uint64_t tag,
			   uint64_t ignore, void *ctx, uint64_t flags)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct fi_msg_tagged m = {
		.msg_iov = &iov,
		.desc = NULL,
		.iov_count = (buf || len) ? 1 : 0,
		.addr = src,
		.tag = tag,
		.ignore = ignore,
		.context = ctx,
		.data = 0,
	};

	return fi_trecvmsg(ep, &m, flags);
}

static void tm_open_ep(struct tm_env *t, struct fid_ep **ep, fi_addr_t *addr)
{
	char name[64];
	size_t namelen = sizeof(name);

	assert_int_equal(fi_endpoint(t->fx.domain, t->fx.info, ep, NULL), 0);
	assert_int_equal(fi_ep_bind(*ep, &t->fx.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	assert_int_equal(fi_ep_bind(*ep, &t->fx.av->fid, 0), 0);
	assert_int_equal(fi_enable(*ep), 0);
	assert_int_equal(fi_getname(&(*ep)->fid, name, &namelen), 0);
	assert_int_equal(fi_av_insert(t->fx.av, name, 1, addr, 0, NULL), 1);
}

static int tm_setup(void **state)
{
	struct tm_env *t = calloc(1, sizeof(*t));

	if (!t)
		return -1;
	if (fx_open(&t->fx, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED)) {
		free(t);
		return -1;
	}
	t->max_msg = t->fx.info->ep_attr->max_msg_size;
	*state = t;
	return 0;
}

static int tm_teardown(void **state)
{
	struct tm_env *t = *state;

	if (t->ep2)
		(void)fi_close(&t->ep2->fid);
	if (t->ep3)
		(void)fi_close(&t->ep3->fid);
	fx_close(&t->fx);
	free(t);
	*state = NULL;
	return 0;
}

#define TM_RECV_TAGGED (FI_RECV | FI_TAGGED)
#define TM_FLAG_MASK (FI_RECV | FI_SEND | FI_TAGGED | FI_MSG | FI_REMOTE_CQ_DATA | FI_MULTI_RECV)

/* ---------------------------------------------------------------------
 * Tag and ignore bits; separate tagged and msg queues.
 */
static void test_tag_ignore(void **state)
{
	struct tm_env *t = *state;
	struct fi_context rctx, sctx[4], mctx, mrctx, xctx;
	static const uint64_t tags[] = {0x1200, 0x12ff, 0x1234, 0x1300};
	uint8_t sbuf[32], rbuf[32];
	struct tm_comp c;

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
	struct tm_comp c;

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
	struct tm_comp c;

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
	struct tm_comp c;
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
	end = tm_now_ms() + 10000;
	while ((!got_small || !got_big) && tm_now_ms() < end) {
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
	struct tm_comp c;

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
 * FI_PEEK, FI_CLAIM, FI_DISCARD.
 */
static void test_peek(void **state)
{
	struct tm_env *t = *state;
	struct fi_context pctx, rctx, sctx;
	struct tm_comp c;

	/* nothing there: error completion FI_ENOMSG */
	assert_int_equal(tm_trecvmsg(t->fx.ep, NULL, 0, FI_ADDR_UNSPEC, 0x77, 0, &pctx, FI_PEEK), 0);
	tm_wait(t, &pctx, &c);
	assert_int_equal(c.err, FI_ENOMSG);
	assert_ptr_equal(c.ctx, &pctx);

	for (size_t i = 0; i < TM_NSIZES; i++) {
		size_t len = tm_sizes[i];
		uint64_t tag = 0x9000 + i;
		uint8_t *sbuf, *rbuf;

		if (!tm_size_ok(t, len))
			continue;
		sbuf = malloc(len + 1);
		rbuf = calloc(1, len + 1);
		assert_true(sbuf && rbuf);
		tm_fill(sbuf, len, (unsigned)i);
		tm_tsend(t, t->fx.ep, sbuf, len, t->fx.self, tag, 0xc0de0000 + i, true, &sctx);
		tm_progress(t, 4);
		/* a peek for another tag finds nothing */
		assert_int_equal(
			tm_trecvmsg(t->fx.ep, NULL, 0, FI_ADDR_UNSPEC, tag + 0x100, 0, &pctx, FI_PEEK),
			0);
		tm_wait(t, &pctx, &c);
		assert_int_equal(c.err, FI_ENOMSG);
		/* peek reports length, tag and data and leaves the message */
		for (int rep = 0; rep < 2; rep++) {
			assert_int_equal(
				tm_trecvmsg(t->fx.ep, NULL, 0, FI_ADDR_UNSPEC, tag, 0, &pctx, FI_PEEK), 0);
			tm_wait(t, &pctx, &c);
			assert_int_equal(c.err, 0);
			assert_int_equal(c.e.len, len);
			assert_int_equal(c.e.tag, tag);
			assert_int_equal(c.e.data, 0xc0de0000 + i);
			assert_int_equal(c.e.flags & TM_FLAG_MASK, TM_RECV_TAGGED | FI_REMOTE_CQ_DATA);
		}
		assert_int_equal(fi_trecv(t->fx.ep, rbuf, len, NULL, FI_ADDR_UNSPEC, tag, 0, &rctx), 0);
		tm_wait(t, &rctx, &c);
		assert_int_equal(c.err, 0);
		assert_int_equal(tm_check(rbuf, len, (unsigned)i), len);
		tm_wait(t, &sctx, NULL);
		/* and now it is gone */
		assert_int_equal(tm_trecvmsg(t->fx.ep, NULL, 0, FI_ADDR_UNSPEC, tag, 0, &pctx, FI_PEEK),
				 0);
		tm_wait(t, &pctx, &c);
		assert_int_equal(c.err, FI_ENOMSG);
		free(sbuf);
		free(rbuf);
	}
}

/* Two messages A then B with one tag, sent unexpected. */
static void tm_send_ab(struct tm_env *t, size_t len, uint64_t tag, uint8_t *a, uint8_t *b,
		       struct fi_context *sa, struct fi_context *sb)
{
	tm_fill(a, len, 0xa);
	tm_fill(b, len, 0xb);
	tm_tsend(t, t->fx.ep, a, len, t->fx.self, tag, 0xa, true, sa);
	tm_tsend(t, t->fx.ep, b, len, t->fx.self, tag, 0xb, true, sb);
	tm_progress(t, 4);
}

static void test_peek_claim(void **state)
{
	struct tm_env *t = *state;
	struct fi_context pctx, rctx, sa, sb;
	struct tm_comp c;

	for (size_t i = 0; i < TM_NSIZES; i++) {
		size_t len = tm_sizes[i];
		uint64_t tag = 0x7700 + i;
		uint8_t *a, *b, *ra, *rb;

		if (!tm_size_ok(t, len))
			continue;
		a = malloc(len + 1);
		b = malloc(len + 1);
		ra = calloc(1, len + 1);
		rb = calloc(1, len + 1);
		assert_true(a && b && ra && rb);
		tm_send_ab(t, len, tag, a, b, &sa, &sb);

		memset(&pctx, 0, sizeof(pctx));
		assert_int_equal(tm_trecvmsg(t->fx.ep, NULL, 0, FI_ADDR_UNSPEC, tag, 0, &pctx,
					     FI_PEEK | FI_CLAIM),
				 0);
		tm_wait(t, &pctx, &c);
		assert_int_equal(c.err, 0);
		assert_int_equal(c.e.len, len);
		assert_int_equal(c.e.data, 0xa);
		/* A is claimed: an ordinary receive gets B */
		assert_int_equal(fi_trecv(t->fx.ep, rb, len, NULL, FI_ADDR_UNSPEC, tag, 0, &rctx), 0);
		tm_wait(t, &rctx, &c);
		assert_int_equal(c.err, 0);
		assert_int_equal(c.e.data, 0xb);
		assert_int_equal(tm_check(rb, len, 0xb), len);
		/* the claiming receive, same context, gets A */
		assert_int_equal(tm_trecvmsg(t->fx.ep, ra, len, FI_ADDR_UNSPEC, tag, 0, &pctx, FI_CLAIM),
				 0);
		tm_wait(t, &pctx, &c);
		assert_int_equal(c.err, 0);
		assert_int_equal(c.e.len, len);
		assert_int_equal(c.e.tag, tag);
		assert_int_equal(c.e.data, 0xa);
		assert_int_equal(tm_check(ra, len, 0xa), len);
		tm_wait(t, &sa, &c);
		assert_int_equal(c.err, 0);
		tm_wait(t, &sb, &c);
		assert_int_equal(c.err, 0);
		free(a);
		free(b);
		free(ra);
		free(rb);
	}
}

static void tm_discard_case(struct tm_env *t, bool via_claim)
{
	struct fi_context pctx, rctx, sa, sb;
	struct tm_comp c;

	for (size_t i = 0; i < TM_NSIZES; i++) {
		size_t len = tm_sizes[i];
		uint64_t tag = (via_claim ? 0x6600 : 0x5500) + i;
		uint8_t *a, *b, *rb;

		if (!tm_size_ok(t, len))
			continue;
		a = malloc(len + 1);
		b = malloc(len + 1);
		rb = calloc(1, len + 1);
		assert_true(a && b && rb);
		tm_send_ab(t, len, tag, a, b, &sa, &sb);
		memset(&pctx, 0, sizeof(pctx));
		if (via_claim) {
			assert_int_equal(tm_trecvmsg(t->fx.ep, NULL, 0, FI_ADDR_UNSPEC, tag, 0, &pctx,
						     FI_PEEK | FI_CLAIM),
					 0);
			tm_wait(t, &pctx, &c);
			assert_int_equal(c.err, 0);
			assert_int_equal(c.e.data, 0xa);
			assert_int_equal(tm_trecvmsg(t->fx.ep, NULL, 0, FI_ADDR_UNSPEC, tag, 0, &pctx,
						     FI_CLAIM | FI_DISCARD),
					 0);
			tm_wait(t, &pctx, &c);
			assert_int_equal(c.err, 0);
		} else {
			assert_int_equal(tm_trecvmsg(t->fx.ep, NULL, 0, FI_ADDR_UNSPEC, tag, 0, &pctx,
						     FI_PEEK | FI_DISCARD),
					 0);
			tm_wait(t, &pctx, &c);
			assert_int_equal(c.err, 0);
			assert_int_equal(c.e.len, len);
			assert_int_equal(c.e.data, 0xa);
		}
		/* A is gone: the next receive gets B */
		assert_int_equal(fi_trecv(t->fx.ep, rb, len, NULL, FI_ADDR_UNSPEC, tag, 0, &rctx), 0);
		tm_wait(t, &rctx, &c);
		assert_int_equal(c.err, 0);
		assert_int_equal(c.e.data, 0xb);
		assert_int_equal(tm_check(rb, len, 0xb), len);
		/* the discarded send still completes normally */
		tm_wait(t, &sa, &c);
		assert_int_equal(c.err, 0);
		tm_wait(t, &sb, &c);
		assert_int_equal(c.err, 0);
		tm_expect_none(t, &pctx, 10);
		free(a);
		free(b);
		free(rb);
	}
}

static void test_peek_discard(void **state)
{
	tm_discard_case(*state, false);
}

static void test_claim_discard(void **state)
{
	tm_discard_case(*state, true);
}

/* ---------------------------------------------------------------------
 * Cancel.
 */
static void test_cancel(void **state)
{
	struct tm_env *t = *state;
	struct fi_context r1, r2, r3, other, sctx;
	uint8_t buf[64], sbuf[64];
	struct tm_comp c;

	assert_int_equal(fi_trecv(t->fx.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 1, 0, &r1), 0);
	assert_int_equal(fi_recv(t->fx.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, &r2), 0);
	assert_int_equal(fi_cancel(&t->fx.ep->fid, &other), -FI_ENOENT);
	assert_int_equal(fi_cancel(&t->fx.ep->fid, &r1), 0);
	tm_wait(t, &r1, &c);
	assert_int_equal(c.err, FI_ECANCELED);
	assert_ptr_equal(c.e.op_context, &r1);
	assert_true(c.e.flags & FI_RECV);
	assert_int_equal(fi_cancel(&t->fx.ep->fid, &r2), 0);
	tm_wait(t, &r2, &c);
	assert_int_equal(c.err, FI_ECANCELED);
	assert_ptr_equal(c.e.op_context, &r2);
	/* twice: it is gone */
	assert_int_equal(fi_cancel(&t->fx.ep->fid, &r1), -FI_ENOENT);
	tm_expect_none(t, &r1, 10);

	/* the endpoint still works, and the cancelled receive took nothing */
	tm_fill(sbuf, sizeof(sbuf), 5);
	assert_int_equal(fi_trecv(t->fx.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 1, 0, &r3), 0);
	tm_tsend(t, t->fx.ep, sbuf, sizeof(sbuf), t->fx.self, 1, 0, false, &sctx);
	tm_wait(t, &r3, &c);
	assert_int_equal(c.err, 0);
	assert_int_equal(tm_check(buf, sizeof(buf), 5), sizeof(buf));
	tm_wait(t, &sctx, NULL);
	/* a completed receive cannot be cancelled */
	assert_int_equal(fi_cancel(&t->fx.ep->fid, &r3), -FI_ENOENT);
}

/* ---------------------------------------------------------------------
 * FI_MULTI_RECV.
 */
static void test_multi_recv(void **state)
{
	static const size_t lens[] = {1000, 1, 999, 100, 17}; /* the 5th is sent as 117 bytes */
	struct tm_env *t = *state;
	const size_t cap = 3200, min = 1024;
	size_t minv = min, got, optlen = sizeof(got);
	struct fi_context mctx, sctx[8];
	uint8_t *buf = calloc(1, cap), sbuf[2048];
	struct iovec iov = {.iov_base = buf, .iov_len = cap};
	struct fi_msg m = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = &mctx};
	size_t off = 0;
	struct tm_comp c;

	assert_non_null(buf);
	assert_int_equal(fi_setopt(&t->fx.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &minv,
				   sizeof(minv)),
			 0);
	assert_int_equal(fi_getopt(&t->fx.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &got,
				   &optlen),
			 0);
	assert_int_equal(got, min);

	/* two messages arrive before the buffer is posted */
	for (size_t i = 0; i < 2; i++) {
		tm_fill(sbuf, lens[i], (unsigned)i);
		assert_int_equal(fi_send(t->fx.ep, sbuf, lens[i], NULL, t->fx.self, &sctx[i]), 0);
	}
	tm_progress(t, 4);
	assert_int_equal(fi_recvmsg(t->fx.ep, &m, FI_MULTI_RECV), 0);
	for (size_t i = 2; i < 4; i++) {
		tm_fill(sbuf, lens[i], (unsigned)i);
		assert_int_equal(fi_send(t->fx.ep, sbuf, lens[i], NULL, t->fx.self, &sctx[i]), 0);
	}
	/* 1000 + 1 + 999 + 100 = 2100 used, 1100 left; the 4th leaves
	 * 1100 >= min, so send one more that drops it below min */
	tm_fill(sbuf, lens[4] + 100, 4);
	assert_int_equal(fi_send(t->fx.ep, sbuf, lens[4] + 100, NULL, t->fx.self, &sctx[4]), 0);
	for (size_t i = 0; i < 5; i++) {
		size_t l = i == 4 ? lens[4] + 100 : lens[i];

		tm_wait(t, &mctx, &c);
		assert_int_equal(c.err, 0);
		assert_int_equal(c.e.len, l);
		assert_ptr_equal(c.e.buf, buf + off);
		assert_int_equal(tm_check(buf + off, l, (unsigned)i), l);
		if (i < 4)
			assert_false(c.e.flags & FI_MULTI_RECV);
		else
			assert_true(c.e.flags & FI_MULTI_RECV); /* 3200 - 2217 < 1024: released */
		assert_int_equal(c.e.flags & (FI_RECV | FI_MSG), FI_RECV | FI_MSG);
		off += l;
	}
	for (size_t i = 0; i < 5; i++)
		tm_wait(t, &sctx[i], NULL);
	/* released: a further message is not delivered into it */
	assert_int_equal(fi_send(t->fx.ep, sbuf, 10, NULL, t->fx.self, &sctx[5]), 0);
	tm_wait(t, &sctx[5], NULL);
	tm_expect_none(t, &mctx, 30);

	/* a buffer fully consumed by unexpected messages during the post */
	{
		struct fi_context m2;
		uint8_t small[2048];
		struct iovec iov2 = {.iov_base = small, .iov_len = sizeof(small)};
		struct fi_msg msg2 = {
			.msg_iov = &iov2, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = &m2};
		bool saw_last = false;

		/* the 10-byte message sent above is still unexpected */
		tm_fill(sbuf, 1500, 9);
		assert_int_equal(fi_send(t->fx.ep, sbuf, 1500, NULL, t->fx.self, &sctx[6]), 0);
		tm_progress(t, 4);
		assert_int_equal(fi_recvmsg(t->fx.ep, &msg2, FI_MULTI_RECV), 0);
		for (int k = 0; k < 3 && !saw_last; k++) {
			tm_wait(t, &m2, &c);
			assert_int_equal(c.err, 0);
			if (c.e.len == 10)
				assert_ptr_equal(c.e.buf, small);
			if (c.e.len == 1500) {
				assert_ptr_equal(c.e.buf, small + 10);
				assert_int_equal(tm_check(small + 10, 1500, 9), 1500);
			}
			saw_last = c.e.flags & FI_MULTI_RECV;
		}
		assert_true(saw_last);
		tm_wait(t, &sctx[6], NULL);
	}
	free(buf);
}

/* Issue 10 item 5: 1000 messages of 1024 bytes into multi-receive
 * buffers of 8 slots of 1024 bytes, FI_OPT_MIN_MULTI_RECV = 1024.  Every
 * other buffer is posted only after its 8 messages arrived (they are
 * unexpected and consume it during the post: the case that reported the
 * release as FI_RECV with length 0), the others before.  Every data
 * completion must carry 1024 bytes of the right message; each buffer is
 * released exactly once, by a completion carrying FI_MULTI_RECV, and a
 * release that is not also a data completion carries FI_MULTI_RECV alone. */
static void test_multi_recv_release(void **state)
{
	enum { SLOT = 1024, SLOTS = 8, MSGS = 1000 };
	struct tm_env *t = *state;
	size_t minv = SLOT;
	uint8_t *buf = calloc(1, SLOT * SLOTS), sbuf[SLOT];
	struct fi_context mctx, sctx;
	unsigned sent = 0, rcvd = 0, bufs = 0;

	assert_non_null(buf);
	assert_int_equal(fi_setopt(&t->fx.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &minv,
				   sizeof(minv)),
			 0);
	while (rcvd < MSGS) {
		struct iovec iov = {.iov_base = buf, .iov_len = SLOT * SLOTS};
		struct fi_msg m = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC,
				   .context = &mctx};
		unsigned first = sent, n = MSGS - sent < SLOTS ? MSGS - sent : SLOTS;
		bool late = bufs % 2 == 0, released = false;
		unsigned data = 0;

		memset(buf, 0, SLOT * SLOTS);
		if (!late)
			assert_int_equal(fi_recvmsg(t->fx.ep, &m, FI_MULTI_RECV), 0);
		for (unsigned i = 0; i < n; i++, sent++) {
			tm_fill(sbuf, SLOT, sent);
			{
				uint64_t end = tm_now_ms() + TM_WAIT_MS;
				ssize_t rc;

				while ((rc = fi_send(t->fx.ep, sbuf, SLOT, NULL, t->fx.self, &sctx)) ==
					       -FI_EAGAIN &&
				       tm_now_ms() <= end)
					tm_poll(t);
				assert_int_equal(rc, 0);
			}
			tm_wait(t, &sctx, NULL);
		}
		if (late) {
			tm_progress(t, 4); /* all of them unexpected now */
			assert_int_equal(fi_recvmsg(t->fx.ep, &m, FI_MULTI_RECV), 0);
		}
		/* a last partial buffer is never released by data: cancel it */
		while (!released) {
			struct tm_comp c;

			if (data == n && n < SLOTS) {
				assert_int_equal(fi_cancel(&t->fx.ep->fid, &mctx), 0);
				tm_wait(t, &mctx, &c);
				assert_int_equal(c.err, FI_ECANCELED);
				break;
			}
			tm_wait(t, &mctx, &c);
			assert_int_equal(c.err, 0);
			if (c.e.flags & FI_RECV) {
				unsigned k = first + data;

				assert_int_equal(c.e.len, SLOT); /* never 0: no 0-byte sends */
				assert_int_equal(c.e.flags & (FI_RECV | FI_MSG), FI_RECV | FI_MSG);
				assert_ptr_equal(c.e.buf, buf + (size_t)data * SLOT);
				assert_int_equal(tm_check(buf + (size_t)data * SLOT, SLOT, k), SLOT);
				data++;
				rcvd++;
			} else {
				assert_int_equal(c.e.flags, FI_MULTI_RECV);
			}
			if (c.e.flags & FI_MULTI_RECV) {
				assert_int_equal(data, n);
				released = true;
			}
		}
		tm_expect_none(t, &mctx, 0);
		bufs++;
	}
	assert_int_equal(rcvd, MSGS);
	free(buf);
}

/* ---------------------------------------------------------------------
 * Truncation.
 */
static void test_truncation(void **state)
{
	struct tm_env *t = *state;
	struct fi_context rctx, sctx;
	struct tm_comp c;

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
	struct tm_comp c;

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

/* ---------------------------------------------------------------------
 * Unexpected-memory bound.  Parameters are read once per process at
 * fi_prov_ini, so the small bound runs in a re-executed copy of this
 * binary (argv[1] == TM_UX_CHILD) that sets it before anything else.
 */
#define TM_UX_CHILD "--ux-bound-child"
#define TM_UX_LEN 4096
#define TM_UX_MAX_SENDS 6000

static int tm_ux_child(void)
{
	struct fx_env e;
	static struct fi_context sctx, rctx[TM_UX_MAX_SENDS];
	uint8_t sbuf[TM_UX_LEN];
	uint8_t *rbuf;
	struct fi_cq_tagged_entry ent[32];
	size_t sent = 0, done = 0;
	bool eagain = false;
	uint64_t end;

	setenv("FI_OPX_UX_MAX_BYTES", "32768", 1);
	if (fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED))
		return 10;
	/* Keep sending to ourselves without posting receives: the bound
	 * stops absorbing, the rings fill, and sends must say -FI_EAGAIN. */
	while (sent < TM_UX_MAX_SENDS) {
		ssize_t rc;
		int tries;

		tm_fill(sbuf, TM_UX_LEN, (unsigned)sent);
		memcpy(sbuf, &sent, sizeof(sent));
		for (tries = 0; tries < 8; tries++) {
			rc = fi_tsend(e.ep, sbuf, TM_UX_LEN, NULL, e.self, 0x44, &sctx);
			if (rc != -FI_EAGAIN)
				break;
			(void)fi_cq_read(e.cq, ent, 32);
		}
		if (rc == -FI_EAGAIN) {
			eagain = true;
			break;
		}
		if (rc) {
			fprintf(stderr, "ux child: send %zu: %zd\n", sent, rc);
			return 11;
		}
		sent++;
		if (sent % 64 == 0)
			(void)fi_cq_read(e.cq, ent, 32);
	}
	if (!eagain) {
		fprintf(stderr, "ux child: %zu sends never saw -FI_EAGAIN\n", sent);
		return 12;
	}
	rbuf = malloc(sent * TM_UX_LEN);
	if (!rbuf)
		return 13;
	/* Now receive everything, in order. */
	for (size_t i = 0; i < sent; i++) {
		ssize_t rc;
		uint64_t pend = tm_now_ms() + TM_WAIT_MS;

		do {
			rc = fi_trecv(e.ep, rbuf + i * TM_UX_LEN, TM_UX_LEN, NULL, FI_ADDR_UNSPEC, 0x44, 0,
				      &rctx[i]);
			if (rc == -FI_EAGAIN)
				(void)fi_cq_read(e.cq, ent, 32);
		} while (rc == -FI_EAGAIN && tm_now_ms() < pend);
		if (rc) {
			fprintf(stderr, "ux child: trecv %zu: %zd\n", i, rc);
			return 14;
		}
	}
	end = tm_now_ms() + 10000;
	while (done < sent && tm_now_ms() < end) {
		ssize_t n = fi_cq_read(e.cq, ent, 32);

		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee = {0};
			(void)fi_cq_readerr(e.cq, &ee, 0);
			fprintf(stderr, "ux child: error completion %d\n", ee.err);
			return 15;
		}
		for (ssize_t k = 0; k < n; k++) {
			if (!(ent[k].flags & FI_RECV))
				continue;
			size_t idx = (size_t)((struct fi_context *)ent[k].op_context - rctx);
			size_t seq;

			if (idx != done) {
				fprintf(stderr, "ux child: receive %zu completed as #%zu\n", idx, done);
				return 16;
			}
			memcpy(&seq, rbuf + idx * TM_UX_LEN, sizeof(seq));
			if (seq != idx || ent[k].len != TM_UX_LEN) {
				fprintf(stderr, "ux child: receive %zu holds message %zu\n", idx, seq);
				return 17;
			}
			done++;
		}
	}
	if (done != sent) {
		fprintf(stderr, "ux child: %zu of %zu received\n", done, sent);
		return 18;
	}
	fprintf(stderr, "ux child: %zu sends before -FI_EAGAIN, all received in order\n", sent);
	free(rbuf);
	fx_close(&e);
	return 0;
}

static void test_ux_bound(void **state)
{
	pid_t pid;
	int status = 0;
	uint64_t end;

	(void)state;
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *argv[] = {"test_match", TM_UX_CHILD, NULL};
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	end = tm_now_ms() + 60000;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			break;
		assert_int_not_equal(r, -1);
		if (tm_now_ms() > end) {
			kill(pid, SIGKILL);
			(void)waitpid(pid, &status, 0);
			fail_msg("unexpected-bound child hung");
		}
		usleep(10000);
	}
	if (!WIFEXITED(status))
		fail_msg("unexpected-bound child died with signal %d", WTERMSIG(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_tag_ignore, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_expected_sizes, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_unexpected_sizes, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_rndv_reachable, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_directed_recv, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_directed_before_insert, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_ordering, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_peek, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_peek_claim, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_peek_discard, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_claim_discard, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_cancel, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_multi_recv, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_multi_recv_release, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_truncation, tm_setup, tm_teardown),
		cmocka_unit_test_setup_teardown(test_iov, tm_setup, tm_teardown),
		cmocka_unit_test(test_ux_bound),
	};

	if (argc > 1 && !strcmp(argv[1], TM_UX_CHILD))
		return tm_ux_child();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
