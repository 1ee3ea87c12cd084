/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_sdma.c - unit tests of the software SuperNIC's expected receive
 * (TID) table and SDMA engine.
 *
 * Rings are tiny (64 header entries, 16 KiB eager, 1 KiB MTU) so that a
 * 1 MiB transfer has to wait for credits hundreds of times.  Contexts are
 * opened on unit 6 of 8 (test_shim uses unit 7, the provider unit 0) so
 * concurrent suites do not collide.  Sender and receiver run interleaved
 * in one thread, except for the peer-death test, which forks.  Every loop
 * is bounded in count and in time.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../driver-shim/shim_internal.h"

#define T_MTU 1024u
#define T_HDRQ 64u
#define T_EGR (16u * 1024u)
#define T_UNITS ((int)SHIM_MAX_UNITS)
#define T_UNIT (T_UNITS - 2)
#define T_JKEY 0x5344
#define T_DEADLINE_S 30.0
#define T_GUARD 0xa5

/* ---------------------------------------------------------------------
 * Helpers
 */
static double t_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint8_t t_pat(uint64_t seed, uint64_t i)
{
	return (uint8_t)(seed * 131u + i * 7u + (i >> 8));
}

static void t_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *b = buf;

	for (size_t i = 0; i < len; i++)
		b[i] = t_pat(seed, i);
}

struct t_pair {
	struct shim_dev *dev;
	struct shim_ctx *ctx;
	struct shim_rx *rx;
	struct shim_addr addr;
	struct shim_peer *peer;
};

static const struct shim_dev_params t_params = {
	.num_units = T_UNITS,
	.force_unit = -1,
	.mtu = T_MTU,
	.hdrq_cnt = T_HDRQ,
	.egr_bytes = T_EGR,
	.jkey = T_JKEY,
};

static void t_pair_open(struct t_pair *t)
{
	memset(t, 0, sizeof(*t));
	assert_int_equal(shim_dev_open(&t_params, &t->dev), 0);
	assert_int_equal(shim_ctx_open(t->dev, T_UNIT, &t->ctx, NULL, NULL), 0);
	t->rx = shim_ctx_rx(t->ctx);
	shim_ctx_addr(t->ctx, &t->addr);
	assert_int_equal(shim_peer_open(t->dev, &t->addr, &t->peer), 0);
}

static void t_pair_close(struct t_pair *t)
{
	shim_peer_close(t->peer);
	shim_ctx_close(t->ctx);
	shim_dev_close(t->dev);
}

/* Header template addressed to the pair's own context. */
static struct shim_pkt_hdr t_tmpl(const struct shim_peer *p, uint32_t msgid)
{
	struct shim_pkt_hdr h;

	memset(&h, 0, sizeof(h));
	h.opcode = 0x42;
	h.jkey = p->jkey;
	h.dlid = p->lid;
	h.dctx = p->ctx;
	h.msgid = msgid;
	h.tag = 0x1234;
	return h;
}

/* Publish one TID packet by hand (no SDMA): 0 or -EAGAIN. */
static int t_tid_send(struct shim_peer *p, uint32_t handle, uint64_t off, const void *data,
		      uint32_t len)
{
	struct shim_pio_resv r;
	struct shim_rhq_entry *e;
	int ret;

	ret = shim_pio_reserve(p, 1, len, &r);
	if (ret)
		return ret;
	e = shim_pio_entry(p, &r, 0);
	e->hdr = t_tmpl(p, 0);
	e->hdr.paylen = len;
	e->hdr.p.u32[0] = handle;
	e->hdr.p.u64[1] = off;
	if (len)
		memcpy(r.egr, data, len);
	shim_pio_publish(p, &r, 0, SHIM_RHF_TID | (len ? shim_rhf_egr(p, &r, 0) : 0));
	return 0;
}

/* Optional per-packet observer of t_drain. */
struct t_log {
	uint32_t n;
	uint32_t max;
	uint32_t *tid;
	uint64_t *off;
	uint32_t *msgid;
};

/* Consume every waiting packet: TID packets are placed, their place()
 * results counted.  Returns packets consumed. */
static uint32_t t_drain(struct t_pair *t, int *place_err, struct t_log *log)
{
	struct shim_rhq_entry *e;
	uint32_t n = 0;

	while (n < 4 * T_HDRQ && (e = shim_rx_peek(t->rx))) {
		if (e->rhf & SHIM_RHF_TID) {
			if (shim_ctx_tid_place(t->ctx, e))
				(*place_err)++;
			if (e->hdr.paylen > T_MTU)
				(*place_err)++;
			if (log && log->n < log->max) {
				log->tid[log->n] = e->hdr.p.u32[0];
				log->off[log->n] = e->hdr.p.u64[1];
				log->msgid[log->n] = e->hdr.msgid;
				log->n++;
			}
		}
		shim_rx_release(t->rx, e);
		n++;
	}
	return n;
}

/* Place one hand-made packet through the ring: the place() result. */
static int t_tid_roundtrip(struct t_pair *t, uint32_t handle, uint64_t off, const void *data,
			   uint32_t len)
{
	struct shim_rhq_entry *e;
	int ret;

	assert_int_equal(t_tid_send(t->peer, handle, off, data, len), 0);
	e = shim_rx_peek(t->rx);
	assert_non_null(e);
	assert_true(e->rhf & SHIM_RHF_TID);
	ret = shim_ctx_tid_place(t->ctx, e);
	shim_rx_release(t->rx, e);
	return ret;
}

/* Run the engine and the consumer until `want` requests are reaped (or
 * the deadline passes); cookies and statuses in reap order. */
static uint32_t t_run(struct t_pair *t, struct shim_sdma *eng, uint32_t want, uint64_t *cookies,
		      int *statuses, int *place_err, struct t_log *log)
{
	double end = t_now() + T_DEADLINE_S;
	uint32_t got = 0;

	while (got < want && t_now() < end) {
		uint64_t c;
		int st;

		assert_true(shim_sdma_progress(eng) >= 0);
		t_drain(t, place_err, log);
		while (got < want && shim_sdma_reap(eng, &c, &st) == 1) {
			cookies[got] = c;
			statuses[got] = st;
			got++;
		}
	}
	return got;
}

static struct shim_sdma_req t_req(const struct shim_peer *p, uint32_t tid, uint64_t tid_off,
				  void *src, size_t len, uint64_t cookie)
{
	struct shim_sdma_req r;

	memset(&r, 0, sizeof(r));
	r.tmpl = t_tmpl(p, (uint32_t)cookie);
	r.iovcnt = len ? 1 : 0;
	r.iov[0].iov_base = src;
	r.iov[0].iov_len = len;
	r.tid = tid;
	r.tid_off = tid_off;
	r.len = len;
	r.cookie = cookie;
	return r;
}

/* ---------------------------------------------------------------------
 * TID table
 */
static void test_tid_cache(void **state)
{
	struct shim_tid_stats st;
	struct t_pair t;
	uint32_t h1, h2, h3;
	static uint8_t buf[8192];

	(void)state;
	t_pair_open(&t);
	/* argument checks */
	assert_int_equal(shim_tid_register(NULL, buf, 16, &h1), -EINVAL);
	assert_int_equal(shim_tid_register(t.ctx, NULL, 16, &h1), -EINVAL);
	assert_int_equal(shim_tid_register(t.ctx, buf, 0, &h1), -EINVAL);
	assert_int_equal(shim_tid_register(t.ctx, buf, 16, NULL), -EINVAL);
	assert_int_equal(shim_tid_register(t.ctx, (void *)(UINTPTR_MAX - 8), 16, &h1), -EINVAL);
	assert_int_equal(shim_tid_release(NULL, 0), -EINVAL);
	assert_int_equal(shim_tid_invalidate(t.ctx, NULL, 16), -EINVAL);
	assert_int_equal(shim_tid_invalidate(t.ctx, buf, 0), -EINVAL);
	assert_int_equal(shim_ctx_tid_place(t.ctx, NULL), -EINVAL);
	shim_tid_stats(t.ctx, &st);
	assert_int_equal(st.misses + st.hits + st.cached, 0);

	/* miss, then a hit on the same range: same handle, two refs */
	assert_int_equal(shim_tid_register(t.ctx, buf, 4096, &h1), 0);
	assert_int_not_equal(h1, SHIM_TID_NONE);
	assert_int_equal(SHIM_TID_GEN(h1), 1);
	assert_int_equal(shim_tid_register(t.ctx, buf, 4096, &h2), 0);
	assert_int_equal(h1, h2);
	/* same address, other length: another entry */
	assert_int_equal(shim_tid_register(t.ctx, buf, 4095, &h3), 0);
	assert_int_not_equal(h3, h1);
	shim_tid_stats(t.ctx, &st);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.misses, 2);
	assert_int_equal(st.cached, 2);
	assert_int_equal(st.in_use, 2);

	/* release: two references then one more is an error */
	assert_int_equal(shim_tid_release(t.ctx, h1), 0);
	shim_tid_stats(t.ctx, &st);
	assert_int_equal(st.in_use, 2);
	assert_int_equal(shim_tid_release(t.ctx, h1), 0);
	shim_tid_stats(t.ctx, &st);
	assert_int_equal(st.in_use, 1);
	assert_int_equal(st.cached, 2); /* stays cached */
	assert_int_equal(shim_tid_release(t.ctx, h1), -EINVAL);
	/* forged handles: wrong generation, index out of range */
	assert_int_equal(shim_tid_release(t.ctx, h3 + (1u << 16)), -EINVAL);
	assert_int_equal(shim_tid_release(t.ctx, SHIM_TID_MAX), -EINVAL);
	assert_int_equal(shim_tid_release(t.ctx, SHIM_TID_NONE), -EINVAL);

	/* cached unreferenced entry: register again is a hit, same handle */
	assert_int_equal(shim_tid_register(t.ctx, buf, 4096, &h2), 0);
	assert_int_equal(h2, h1);
	shim_tid_stats(t.ctx, &st);
	assert_int_equal(st.hits, 2);
	assert_int_equal(st.in_use, 2);
	assert_int_equal(shim_tid_release(t.ctx, h2), 0);
	assert_int_equal(shim_tid_release(t.ctx, h3), 0);
	shim_tid_stats(t.ctx, &st);
	assert_int_equal(st.in_use, 0);
	assert_int_equal(st.cached, 2);
	/* invalidate a range overlapping both: both dropped, handles stale */
	assert_int_equal(shim_tid_invalidate(t.ctx, buf + 4000, 1), 2);
	assert_int_equal(shim_tid_invalidate(t.ctx, buf, sizeof(buf)), 0);
	shim_tid_stats(t.ctx, &st);
	assert_int_equal(st.cached, 0);
	assert_int_equal(st.invalidations, 2);
	assert_int_equal(shim_tid_register(t.ctx, buf, 4096, &h2), 0);
	assert_int_not_equal(h2, h1); /* new generation (or slot) */
	assert_int_equal(shim_tid_release(t.ctx, h1), -EINVAL);
	assert_int_equal(shim_tid_release(t.ctx, h2), 0);
	shim_tid_stats(NULL, &st);
	assert_int_equal(st.cached, 0);
	shim_tid_stats(t.ctx, NULL);
	t_pair_close(&t);
}

/* Fill the table with distinct slices of one buffer, then evict LRU
 * first; with every entry referenced, -ENOSPC. */
static void test_tid_evict(void **state)
{
	const size_t n = SHIM_TID_MAX, slice = 16;
	uint8_t *big = malloc(n * slice + slice);
	uint32_t *h = calloc(n + 1, sizeof(*h));
	struct shim_tid_stats st;
	struct t_pair t;
	uint32_t extra, again;

	(void)state;
	assert_non_null(big);
	assert_non_null(h);
	t_pair_open(&t);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(shim_tid_register(t.ctx, big + i * slice, slice, &h[i]), 0);
		for (size_t k = 0; k < i && k < 4; k++)
			assert_int_not_equal(h[i], h[k]);
	}
	shim_tid_stats(t.ctx, &st);
	assert_int_equal(st.cached, n);
	assert_int_equal(st.in_use, n);
	assert_int_equal(st.misses, n);
	/* all referenced: no room */
	assert_int_equal(shim_tid_register(t.ctx, big + n * slice, slice, &extra), -ENOSPC);
	/* every cached range still hits */
	assert_int_equal(shim_tid_register(t.ctx, big + 7 * slice, slice, &again), 0);
	assert_int_equal(again, h[7]);
	assert_int_equal(shim_tid_release(t.ctx, again), 0);

	/* release 3, then 1, then 2 (in that order): the LRU victim is 3 */
	assert_int_equal(shim_tid_release(t.ctx, h[3]), 0);
	assert_int_equal(shim_tid_release(t.ctx, h[1]), 0);
	assert_int_equal(shim_tid_release(t.ctx, h[2]), 0);
	assert_int_equal(shim_tid_register(t.ctx, big + n * slice, slice, &extra), 0);
	assert_int_equal(SHIM_TID_IDX(extra), SHIM_TID_IDX(h[3]));
	assert_int_not_equal(SHIM_TID_GEN(extra), SHIM_TID_GEN(h[3]));
	shim_tid_stats(t.ctx, &st);
	assert_int_equal(st.evictions, 1);
	assert_int_equal(st.cached, n);
	/* the evicted handle is stale; the others still valid */
	assert_int_equal(shim_tid_release(t.ctx, h[3]), -EINVAL);
	/* 1 is next: a hit on 1 makes it used again, so 2 is evicted */
	assert_int_equal(shim_tid_register(t.ctx, big + 1 * slice, slice, &again), 0);
	assert_int_equal(again, h[1]);
	assert_int_equal(shim_tid_register(t.ctx, big + 3 * slice, slice, &h[3]), 0);
	assert_int_equal(SHIM_TID_IDX(h[3]), SHIM_TID_IDX(h[2]));
	shim_tid_stats(t.ctx, &st);
	assert_int_equal(st.evictions, 2);
	/* everything referenced again */
	assert_int_equal(shim_tid_register(t.ctx, big + 2 * slice, slice, &h[2]), -ENOSPC);

	/* map stays consistent after evictions: every live range hits */
	for (size_t i = 0; i < n; i++) {
		if (i == 2)
			continue;
		assert_int_equal(shim_tid_register(t.ctx, big + i * slice, slice, &again), 0);
		assert_int_equal(shim_tid_release(t.ctx, again), 0);
	}
	assert_int_equal(shim_tid_register(t.ctx, big + n * slice, slice, &again), 0);
	assert_int_equal(again, extra);
	assert_int_equal(shim_tid_release(t.ctx, again), 0);

	/* generations wrap without ever reaching 0: churn one slot */
	for (size_t i = 0; i < n; i++)
		if (i != 2)
			assert_int_equal(shim_tid_release(t.ctx, h[i]), 0);
	assert_int_equal(shim_tid_release(t.ctx, extra), 0);
	assert_int_equal(shim_tid_release(t.ctx, h[1]), -EINVAL); /* no references left */
	shim_tid_stats(t.ctx, &st);
	assert_int_equal(st.in_use, 0);
	assert_int_equal(shim_tid_invalidate(t.ctx, big, n * slice + slice), (int)st.cached);
	for (uint32_t i = 0; i < 70000; i++) {
		uint32_t x;

		assert_int_equal(shim_tid_register(t.ctx, big, slice, &x), 0);
		assert_int_not_equal(SHIM_TID_GEN(x), 0);
		assert_int_equal(shim_tid_release(t.ctx, x), 0);
		assert_int_equal(shim_tid_invalidate(t.ctx, big, 1), 1);
	}
	t_pair_close(&t);
	free(h);
	free(big);
}

static void test_tid_place(void **state)
{
	uint8_t *mem = malloc(3 * 4096);
	uint8_t *buf = mem + 4096, data[T_MTU];
	struct shim_rhq_entry fake;
	struct t_pair t;
	uint32_t h;

	(void)state;
	assert_non_null(mem);
	t_pair_open(&t);
	memset(mem, T_GUARD, 3 * 4096);
	t_fill(data, sizeof(data), 9);
	assert_int_equal(shim_tid_register(t.ctx, buf, 4096, &h), 0);

	/* in range: lands at the offset, nothing else touched */
	assert_int_equal(t_tid_roundtrip(&t, h, 100, data, 1000), 0);
	assert_memory_equal(buf + 100, data, 1000);
	assert_int_equal(buf[99], T_GUARD);
	assert_int_equal(buf[1100], T_GUARD);
	/* exactly to the end */
	assert_int_equal(t_tid_roundtrip(&t, h, 4096 - 64, data, 64), 0);
	assert_memory_equal(buf + 4096 - 64, data, 64);
	/* zero-length packet at the end is fine, one past is not */
	assert_int_equal(t_tid_roundtrip(&t, h, 4096, data, 0), 0);
	assert_int_equal(t_tid_roundtrip(&t, h, 4097, data, 0), -EINVAL);
	/* out of range: refused, guards intact */
	assert_int_equal(t_tid_roundtrip(&t, h, 4096 - 63, data, 64), -EINVAL);
	assert_int_equal(t_tid_roundtrip(&t, h, 5000, data, 10), -EINVAL);
	assert_int_equal(t_tid_roundtrip(&t, h, UINT64_MAX - 5, data, 10), -EINVAL);
	assert_int_equal(t_tid_roundtrip(&t, h, (uint64_t)-4096, data, T_MTU), -EINVAL);
	/* unknown handles */
	assert_int_equal(t_tid_roundtrip(&t, h ^ (1u << 16), 0, data, 10), -EINVAL);
	assert_int_equal(t_tid_roundtrip(&t, SHIM_TID_NONE, 0, data, 10), -EINVAL);
	assert_int_equal(t_tid_roundtrip(&t, (h & 0xffff0000u) | 1000u, 0, data, 10), -EINVAL);
	for (size_t i = 0; i < 4096; i++) {
		assert_int_equal(mem[i], T_GUARD);
		assert_int_equal(mem[2 * 4096 + i], T_GUARD);
	}

	/* malformed entries, made by hand */
	memset(&fake, 0, sizeof(fake));
	fake.hdr.p.u32[0] = h;
	fake.hdr.paylen = 10;
	fake.rhf = SHIM_RHF_EGR; /* not a TID packet */
	assert_int_equal(shim_ctx_tid_place(t.ctx, &fake), -EINVAL);
	fake.rhf = SHIM_RHF_TID; /* payload neither eager nor empty */
	assert_int_equal(shim_ctx_tid_place(t.ctx, &fake), -EINVAL);
	fake.rhf = SHIM_RHF_TID | SHIM_RHF_EGR | (T_EGR / SHIM_BLOCK - 1);
	fake.hdr.paylen = 2 * SHIM_BLOCK; /* runs past the eager ring */
	assert_int_equal(shim_ctx_tid_place(t.ctx, &fake), -EINVAL);
	fake.rhf = SHIM_RHF_TID | SHIM_RHF_EGR | SHIM_RHF_EGRIDX_MASK;
	fake.hdr.paylen = 1;
	assert_int_equal(shim_ctx_tid_place(t.ctx, &fake), -EINVAL);
	fake.rhf = SHIM_RHF_TID | SHIM_RHF_EGR;
	fake.hdr.paylen = 0xffffffffu;
	assert_int_equal(shim_ctx_tid_place(t.ctx, &fake), -EINVAL);
	for (size_t i = 0; i < 4096; i++)
		assert_int_equal(mem[2 * 4096 + i], T_GUARD);

	/* released handle: place refused */
	assert_int_equal(shim_tid_release(t.ctx, h), 0);
	assert_int_equal(t_tid_roundtrip(&t, h, 0, data, 10), -EINVAL);
	assert_int_equal(buf[0], T_GUARD);

	/* invalidated while referenced: works until the last release */
	assert_int_equal(shim_tid_register(t.ctx, buf, 4096, &h), 0);
	assert_int_equal(shim_tid_invalidate(t.ctx, buf, 1), 0);
	assert_int_equal(t_tid_roundtrip(&t, h, 0, data, 10), 0);
	assert_memory_equal(buf, data, 10);
	uint32_t h2;
	assert_int_equal(shim_tid_register(t.ctx, buf, 4096, &h2), 0);
	assert_int_not_equal(h2, h); /* dropping entry is not a hit */
	assert_int_equal(shim_tid_release(t.ctx, h), 0);
	struct shim_tid_stats st;
	shim_tid_stats(t.ctx, &st);
	assert_int_equal(st.invalidations, 1);
	assert_int_equal(st.cached, 1);
	assert_int_equal(t_tid_roundtrip(&t, h, 0, data, 10), -EINVAL);
	assert_int_equal(t_tid_roundtrip(&t, h2, 20, data, 10), 0);
	assert_memory_equal(buf + 20, data, 10);
	assert_int_equal(shim_tid_release(t.ctx, h2), 0);
	t_pair_close(&t);
	free(mem);
}

/* A registration bound to its rendezvous sender takes only that sender's
 * packets, on either wire; a new use of a cached range starts unbound. */
static void test_tid_bind(void **state)
{
	uint8_t *buf = malloc(4096), data[256];
	struct t_pair t;
	uint32_t h, h2;

	(void)state;
	assert_non_null(buf);
	t_pair_open(&t);
	memset(buf, T_GUARD, 4096);
	t_fill(data, sizeof(data), 3);
	assert_int_equal(shim_tid_register(t.ctx, buf, 4096, &h), 0);
	assert_int_equal(shim_tid_bind(t.ctx, h, 0, 1), -EINVAL);
	assert_int_equal(shim_tid_bind(t.ctx, h, SHIM_TID_FROM_ANY, 1), -EINVAL);
	assert_int_equal(shim_tid_bind(t.ctx, h ^ (1u << 16), 7, 1), -EINVAL);
	assert_int_equal(shim_tid_bind(t.ctx, h, 7, 1), 0);
	/* the udp wire: another lid, another context of the same lid */
	assert_int_equal(shim_tid_place_wire(t.ctx, h, 0, data, 100, 8, 1), -EINVAL);
	assert_int_equal(shim_tid_place_wire(t.ctx, h, 0, data, 100, 7, 2), -EINVAL);
	assert_int_equal(shim_tid_place_wire(t.ctx, h, 0, data, 100, 0, 0), -EINVAL);
	for (size_t i = 0; i < 4096; i++)
		assert_int_equal(buf[i], T_GUARD);
	assert_int_equal(shim_tid_place_wire(t.ctx, h, 10, data, 100, 7, 1), 0);
	assert_memory_equal(buf + 10, data, 100);
	/* the shm wire: the ring entry's sender (slid 0 here) is not 7 */
	assert_int_equal(t_tid_roundtrip(&t, h, 200, data, 64), -EINVAL);
	assert_int_equal(buf[200], T_GUARD);
	/* a second live receive of the same range for another sender: either */
	assert_int_equal(shim_tid_register(t.ctx, buf, 4096, &h2), 0);
	assert_int_equal(h2, h);
	assert_int_equal(shim_tid_bind(t.ctx, h2, 9, 1), 0);
	assert_int_equal(shim_tid_place_wire(t.ctx, h, 300, data, 10, 9, 1), 0);
	assert_int_equal(shim_tid_place_wire(t.ctx, h, 310, data, 10, 7, 1), 0);
	assert_int_equal(shim_tid_release(t.ctx, h), 0);
	assert_int_equal(shim_tid_release(t.ctx, h), 0);
	/* cached, used again: unbound until bound */
	assert_int_equal(shim_tid_register(t.ctx, buf, 4096, &h2), 0);
	assert_int_equal(h2, h);
	assert_int_equal(t_tid_roundtrip(&t, h2, 200, data, 64), 0);
	assert_memory_equal(buf + 200, data, 64);
	assert_int_equal(shim_tid_bind(t.ctx, h2, 0x20, 3), 0);
	assert_int_equal(shim_tid_place_wire(t.ctx, h2, 0, data, 10, 7, 1), -EINVAL);
	assert_int_equal(shim_tid_release(t.ctx, h2), 0);
	t_pair_close(&t);
	free(buf);
}

/* Random register / release / invalidate against a reference model of
 * the cache: hits, LRU victims, -ENOSPC and the counters must agree
 * after every step (exercises map deletion inside long probe clusters). */
#define T_MR 1400u  /* ranges: more than the table holds */
#define T_MD 64u    /* dropping entries tracked at most */
struct t_mrange {
	uint32_t handle;
	uint32_t ref;
	bool cached;
	uint64_t idle_at; /* model LRU clock when ref reached 0 */
};

static void test_tid_model(void **state)
{
	const size_t stride = 64;
	uint8_t *big = malloc(T_MR * stride);
	struct t_mrange *m = calloc(T_MR, sizeof(*m));
	uint32_t drop_h[T_MD], drop_ref[T_MD], ndrop = 0, ncached = 0, in_use = 0;
	uint64_t clock = 0, evictions = 0, nospc = 0;
	struct shim_tid_stats st;
	struct t_pair t;
	uint32_t rnd = 0x1234567u;

	(void)state;
	assert_non_null(big);
	assert_non_null(m);
	t_pair_open(&t);
	for (uint32_t step = 0; step < 200000; step++) {
		uint32_t x = (rnd ^= rnd << 13, rnd ^= rnd >> 17, rnd ^= rnd << 5);
		uint32_t k = (x >> 8) % T_MR, op = x % 16, h;
		/* alternate phases: references pile up (table runs out), or
		 * drain (evictions) */
		uint32_t reg_cut = (step / 25000) % 2 ? 11 : 7;
		uint8_t *a = big + k * stride;
		size_t len = 16 + k % 33;

		if (op < reg_cut) { /* register */
			int ret = shim_tid_register(t.ctx, a, len, &h);

			if (m[k].cached) {
				assert_int_equal(ret, 0);
				assert_int_equal(h, m[k].handle);
				if (!m[k].ref++)
					in_use++;
				continue;
			}
			if (ncached < SHIM_TID_MAX) {
				assert_int_equal(ret, 0);
				ncached++;
			} else {
				uint32_t v = T_MR;
				for (uint32_t i = 0; i < T_MR; i++)
					if (m[i].cached && !m[i].ref &&
					    (v == T_MR || m[i].idle_at < m[v].idle_at))
						v = i;
				if (v == T_MR) {
					assert_int_equal(ret, -ENOSPC);
					nospc++;
					continue;
				}
				assert_int_equal(ret, 0);
				assert_int_equal(SHIM_TID_IDX(h), SHIM_TID_IDX(m[v].handle));
				m[v].cached = false;
				evictions++;
			}
			m[k].cached = true;
			m[k].handle = h;
			m[k].ref = 1;
			in_use++;
		} else if (op < 13) { /* release */
			if (ndrop && op == 12) {
				uint32_t d = x % ndrop;
				assert_int_equal(shim_tid_release(t.ctx, drop_h[d]), 0);
				if (!--drop_ref[d]) {
					in_use--;
					ncached--;
					drop_h[d] = drop_h[--ndrop];
					drop_ref[d] = drop_ref[ndrop];
				}
				continue;
			}
			if (!m[k].cached || !m[k].ref) {
				if (m[k].cached)
					assert_int_equal(shim_tid_release(t.ctx, m[k].handle), -EINVAL);
				continue;
			}
			assert_int_equal(shim_tid_release(t.ctx, m[k].handle), 0);
			if (!--m[k].ref) {
				in_use--;
				m[k].idle_at = ++clock;
			}
		} else { /* invalidate exactly this range */
			int ret = shim_tid_invalidate(t.ctx, a, len);

			if (!m[k].cached) {
				assert_int_equal(ret, 0);
				continue;
			}
			if (m[k].ref && ndrop == T_MD) {
				/* keep the model bounded: undo by releasing */
				assert_int_equal(ret, 0);
				while (m[k].ref--)
					assert_int_equal(shim_tid_release(t.ctx, m[k].handle), 0);
				in_use--;
				ncached--;
			} else if (m[k].ref) {
				assert_int_equal(ret, 0);
				drop_h[ndrop] = m[k].handle;
				drop_ref[ndrop++] = m[k].ref;
			} else {
				assert_int_equal(ret, 1);
				ncached--;
			}
			m[k].cached = false;
			m[k].ref = 0;
		}
		if (step % 64 == 0) {
			shim_tid_stats(t.ctx, &st);
			assert_int_equal(st.cached, ncached);
			assert_int_equal(st.in_use, in_use);
			assert_int_equal(st.evictions, evictions);
		}
	}
	print_message("model: %llu evictions, %llu -ENOSPC, %u dropping\n",
		(unsigned long long)evictions, (unsigned long long)nospc, ndrop);
	assert_true(evictions > 1000);
	assert_true(nospc > 100);
	t_pair_close(&t);
	free(m);
	free(big);
}

/* The application frees a cached buffer and allocates another of the same
 * size: register is a hit (same address) or a miss, and either way data
 * lands in the new buffer; after invalidate the old handle is stale. */
static void test_tid_free_reuse(void **state)
{
	const size_t len = 3000;
	uint8_t *a, *b, data[T_MTU];
	struct shim_tid_stats st;
	struct t_pair t;
	uint32_t ha, hb;
	uintptr_t a_addr;

	(void)state;
	t_pair_open(&t);
	t_fill(data, sizeof(data), 77);
	a = malloc(len);
	assert_non_null(a);
	assert_int_equal(shim_tid_register(t.ctx, a, len, &ha), 0);
	assert_int_equal(shim_tid_release(t.ctx, ha), 0);
	a_addr = (uintptr_t)a; /* only the number: comparing a freed pointer is UB */
	free(a);
	b = malloc(len);
	assert_non_null(b);
	memset(b, 0, len);
	assert_int_equal(shim_tid_register(t.ctx, b, len, &hb), 0);
	shim_tid_stats(t.ctx, &st);
	if ((uintptr_t)b == a_addr) {
		assert_int_equal(hb, ha);
		assert_int_equal(st.hits, 1);
	} else {
		assert_int_equal(st.misses, 2);
	}
	assert_int_equal(t_tid_roundtrip(&t, hb, 500, data, 700), 0);
	assert_memory_equal(b + 500, data, 700);
	assert_int_equal(b[499], 0);
	assert_int_equal(b[1200], 0);
	assert_int_equal(shim_tid_release(t.ctx, hb), 0);
	/* the memory is about to go away: drop it, its handle goes stale */
	/* (a's entry may be caught too if b overlaps a's old range) */
	assert_true(shim_tid_invalidate(t.ctx, b, len) >= 1);
	assert_int_equal(t_tid_roundtrip(&t, hb, 0, data, 10), -EINVAL);
	assert_int_equal(b[0], 0);
	free(b);
	t_pair_close(&t);
}

/* ---------------------------------------------------------------------
 * SDMA state machine
 */
static void test_sdma_states(void **state)
{
	static const struct {
		enum shim_sdma_state from;
		enum shim_sdma_event ev;
		enum shim_sdma_state to;
	} ok[] = {
		{SHIM_SDMA_S0_FREE, E0_SUBMIT, SHIM_SDMA_S1_QUEUED},
		{SHIM_SDMA_S1_QUEUED, E1_START, SHIM_SDMA_S2_RUNNING},
		{SHIM_SDMA_S1_QUEUED, E6_PEER_GONE, SHIM_SDMA_S5_ERROR},
		{SHIM_SDMA_S2_RUNNING, E2_PKT_SENT, SHIM_SDMA_S2_RUNNING},
		{SHIM_SDMA_S2_RUNNING, E3_NO_CREDIT, SHIM_SDMA_S3_WAIT_CREDIT},
		{SHIM_SDMA_S2_RUNNING, E5_LAST_SENT, SHIM_SDMA_S4_DONE},
		{SHIM_SDMA_S2_RUNNING, E6_PEER_GONE, SHIM_SDMA_S5_ERROR},
		{SHIM_SDMA_S3_WAIT_CREDIT, E3_NO_CREDIT, SHIM_SDMA_S3_WAIT_CREDIT},
		{SHIM_SDMA_S3_WAIT_CREDIT, E4_CREDIT_BACK, SHIM_SDMA_S2_RUNNING},
		{SHIM_SDMA_S3_WAIT_CREDIT, E6_PEER_GONE, SHIM_SDMA_S5_ERROR},
		{SHIM_SDMA_S4_DONE, E7_REAPED, SHIM_SDMA_S0_FREE},
		{SHIM_SDMA_S5_ERROR, E7_REAPED, SHIM_SDMA_S0_FREE},
	};
	struct shim_sdma_desc d;
	unsigned int nvalid = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		memset(&d, 0, sizeof(d));
		d.state = ok[i].from;
		assert_int_equal(shim_sdma_step(&d, ok[i].ev), 0);
		assert_int_equal(d.state, ok[i].to);
		assert_int_equal(d.status, 0);
	}
	/* every pair not in the list is refused and parks the descriptor */
	for (int s = 0; s < SHIM_SDMA_NSTATES; s++) {
		for (int e = 0; e < SHIM_SDMA_NEVENTS; e++) {
			bool valid = false;

			for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
				valid |= (int)ok[i].from == s && (int)ok[i].ev == e;
			memset(&d, 0, sizeof(d));
			d.state = (enum shim_sdma_state)s;
			if (valid) {
				nvalid++;
				assert_int_equal(shim_sdma_step(&d, (enum shim_sdma_event)e), 0);
				continue;
			}
			assert_int_equal(shim_sdma_step(&d, (enum shim_sdma_event)e), -EPROTO);
			assert_int_equal(d.state, SHIM_SDMA_S5_ERROR);
			assert_int_equal(d.status, -EPROTO);
		}
	}
	assert_int_equal(nvalid, sizeof(ok) / sizeof(ok[0]));
	/* out-of-range state or event */
	memset(&d, 0, sizeof(d));
	assert_int_equal(shim_sdma_step(&d, (enum shim_sdma_event)99), -EPROTO);
	d.state = (enum shim_sdma_state)42;
	assert_int_equal(shim_sdma_step(&d, E0_SUBMIT), -EPROTO);
	assert_int_equal(d.state, SHIM_SDMA_S5_ERROR);
	assert_int_equal(shim_sdma_step(NULL, E0_SUBMIT), -EINVAL);
}

/* ---------------------------------------------------------------------
 * SDMA engine
 */

/* 1 MiB through a 16 KiB eager ring: hundreds of credit waits. */
static void test_sdma_large(void **state)
{
	const size_t len = 1u << 20;
	uint8_t *src = malloc(len), *dst = malloc(len + 128);
	struct shim_sdma *eng;
	struct shim_sdma_req req;
	struct t_pair t;
	uint64_t cookie = 0, nocredit;
	int status = 1, perr = 0;
	uint32_t h;

	(void)state;
	assert_non_null(src);
	assert_non_null(dst);
	t_fill(src, len, 3);
	memset(dst, T_GUARD, len + 128);
	t_pair_open(&t);
	assert_int_equal(shim_sdma_open(t.ctx, 0, &eng), 0);
	assert_int_equal(shim_tid_register(t.ctx, dst + 64, len, &h), 0);
	req = t_req(t.peer, h, 0, src, len, 0xabcdef);
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), 0);
	assert_int_equal(shim_sdma_busy(eng), 1);
	nocredit = atomic_load(&t.rx->ctl->tx_nocredit);
	assert_int_equal(t_run(&t, eng, 1, &cookie, &status, &perr, NULL), 1);
	assert_int_equal(cookie, 0xabcdef);
	assert_int_equal(status, 0);
	assert_int_equal(perr, 0);
	assert_int_equal(shim_sdma_busy(eng), 0);
	/* it really had to wait for credits */
	assert_true(atomic_load(&t.rx->ctl->tx_nocredit) - nocredit > 10);
	assert_memory_equal(dst + 64, src, len);
	for (size_t i = 0; i < 64; i++) {
		assert_int_equal(dst[i], T_GUARD);
		assert_int_equal(dst[64 + len + i], T_GUARD);
	}
	/* nothing left: progress is a no-op */
	assert_int_equal(shim_sdma_progress(eng), 0);
	assert_null(shim_rx_peek(t.rx));
	assert_int_equal(shim_sdma_reap(eng, &cookie, &status), 0);
	assert_int_equal(shim_tid_release(t.ctx, h), 0);
	shim_sdma_close(eng);
	t_pair_close(&t);
	free(src);
	free(dst);
}

/* Three source iovecs of odd sizes into a TID at a nonzero offset. */
static void test_sdma_iov(void **state)
{
	static uint8_t s0[1001], s1[3007], s2[77], dst[8192];
	const uint64_t off = 123;
	struct shim_sdma *eng;
	struct shim_sdma_req req;
	struct t_pair t;
	uint64_t cookie;
	int status, perr = 0;
	uint32_t h;
	size_t total = sizeof(s0) + sizeof(s1) + sizeof(s2);

	(void)state;
	t_fill(s0, sizeof(s0), 10);
	t_fill(s1, sizeof(s1), 11);
	t_fill(s2, sizeof(s2), 12);
	memset(dst, T_GUARD, sizeof(dst));
	t_pair_open(&t);
	assert_int_equal(shim_sdma_open(t.ctx, 4, &eng), 0);
	assert_int_equal(shim_tid_register(t.ctx, dst, sizeof(dst), &h), 0);
	memset(&req, 0, sizeof(req));
	req.tmpl = t_tmpl(t.peer, 5);
	req.iov[0] = (struct iovec){.iov_base = s0, .iov_len = sizeof(s0)};
	req.iov[1] = (struct iovec){.iov_base = s1, .iov_len = sizeof(s1)};
	req.iov[2] = (struct iovec){.iov_base = s2, .iov_len = sizeof(s2)};
	req.iovcnt = 3;
	req.tid = h;
	req.tid_off = off;
	req.len = total;
	req.cookie = 5;
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), 0);
	assert_int_equal(t_run(&t, eng, 1, &cookie, &status, &perr, NULL), 1);
	assert_int_equal(status, 0);
	assert_int_equal(perr, 0);
	assert_memory_equal(dst + off, s0, sizeof(s0));
	assert_memory_equal(dst + off + sizeof(s0), s1, sizeof(s1));
	assert_memory_equal(dst + off + sizeof(s0) + sizeof(s1), s2, sizeof(s2));
	for (size_t i = 0; i < off; i++)
		assert_int_equal(dst[i], T_GUARD);
	for (size_t i = off + total; i < sizeof(dst); i++)
		assert_int_equal(dst[i], T_GUARD);

	/* a request that runs past the TID: every packet is refused by the
	 * receiver, nothing is written outside the registration */
	memset(dst, T_GUARD, sizeof(dst));
	req.tid_off = sizeof(dst) - 1000;
	req.cookie = 6;
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), 0);
	assert_int_equal(t_run(&t, eng, 1, &cookie, &status, &perr, NULL), 1);
	assert_int_equal(status, 0); /* the sender cannot know */
	assert_true(perr > 0);
	for (size_t i = 0; i < sizeof(dst); i++)
		assert_int_equal(dst[i], T_GUARD);
	assert_int_equal(shim_tid_release(t.ctx, h), 0);
	shim_sdma_close(eng);
	t_pair_close(&t);
}

static void test_sdma_args_full(void **state)
{
	static uint8_t src[4096];
	struct shim_sdma *eng;
	struct shim_sdma_req req;
	struct t_pair t;
	uint64_t cookie;
	int status;

	(void)state;
	t_pair_open(&t);
	assert_int_equal(shim_sdma_open(NULL, 4, &eng), -EINVAL);
	assert_int_equal(shim_sdma_open(t.ctx, 4, NULL), -EINVAL);
	assert_int_equal(shim_sdma_open(t.ctx, 3, &eng), -EINVAL);
	assert_int_equal(shim_sdma_open(t.ctx, 1u << 20, &eng), -EINVAL);
	assert_int_equal(shim_sdma_open(t.ctx, 4, &eng), 0);

	req = t_req(t.peer, 0, 0, src, 100, 1);
	assert_int_equal(shim_sdma_submit(NULL, t.peer, &req), -EINVAL);
	assert_int_equal(shim_sdma_submit(eng, NULL, &req), -EINVAL);
	assert_int_equal(shim_sdma_submit(eng, t.peer, NULL), -EINVAL);
	req.len = 99; /* len != sum of iov lens */
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), -EINVAL);
	req.len = 100;
	req.iovcnt = SHIM_SDMA_IOV_MAX + 1;
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), -EINVAL);
	req.iovcnt = 1;
	req.iov[0].iov_base = NULL;
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), -EINVAL);
	req.iov[0].iov_base = src;
	req.tid_off = UINT64_MAX - 50;
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), -EINVAL);
	req.tid_off = 0;
	assert_int_equal(shim_sdma_busy(eng), 0);
	assert_int_equal(shim_sdma_progress(NULL), -EINVAL);
	assert_int_equal(shim_sdma_reap(NULL, &cookie, &status), -EINVAL);
	assert_int_equal(shim_sdma_reap(eng, NULL, &status), -EINVAL);
	assert_int_equal(shim_sdma_reap(eng, &cookie, NULL), -EINVAL);
	assert_int_equal(shim_sdma_busy(NULL), 0);

	/* ring full: -EAGAIN until a completion is reaped, even when the
	 * engine has finished them all */
	for (uint32_t i = 0; i < 4; i++) {
		req.cookie = i;
		assert_int_equal(shim_sdma_submit(eng, t.peer, &req), 0);
	}
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), -EAGAIN);
	assert_int_equal(shim_sdma_busy(eng), 4);
	assert_int_equal(shim_sdma_progress(eng), 4);
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), -EAGAIN);
	assert_int_equal(shim_sdma_reap(eng, &cookie, &status), 1);
	assert_int_equal(cookie, 0);
	assert_int_equal(shim_sdma_busy(eng), 3);
	req.cookie = 4;
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), 0);
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), -EAGAIN);
	shim_sdma_close(eng); /* with requests outstanding */
	shim_sdma_close(NULL);
	t_pair_close(&t);
}

/* Completions in submit order, zero-length ones included; packets of
 * requests to one peer arrive in submit order. */
static void test_sdma_fifo(void **state)
{
	enum { N = 8, LOGMAX = 256 };
	static const size_t lens[N] = {5000, 0, 1024, 1, 0, 3333, 64, 2048};
	static uint8_t src[N][5000], dst[N][5000];
	uint32_t h[N], ltid[LOGMAX], lmsg[LOGMAX];
	uint64_t loff[LOGMAX], cookies[N];
	struct t_log log = {.max = LOGMAX, .tid = ltid, .off = loff, .msgid = lmsg};
	int statuses[N], perr = 0;
	struct shim_sdma *eng;
	struct t_pair t;

	(void)state;
	t_pair_open(&t);
	assert_int_equal(shim_sdma_open(t.ctx, 8, &eng), 0);
	for (uint32_t i = 0; i < N; i++) {
		struct shim_sdma_req req;

		t_fill(src[i], sizeof(src[i]), 100 + i);
		memset(dst[i], 0, sizeof(dst[i]));
		assert_int_equal(shim_tid_register(t.ctx, dst[i], sizeof(dst[i]), &h[i]), 0);
		req = t_req(t.peer, h[i], 0, src[i], lens[i], 1000 + i);
		assert_int_equal(shim_sdma_submit(eng, t.peer, &req), 0);
	}
	/* a zero-length request behind others is not completed early */
	uint64_t c;
	int st;
	assert_int_equal(shim_sdma_reap(eng, &c, &st), 0);
	assert_int_equal(t_run(&t, eng, N, cookies, statuses, &perr, &log), N);
	assert_int_equal(perr, 0);
	for (uint32_t i = 0; i < N; i++) {
		assert_int_equal(cookies[i], 1000 + i);
		assert_int_equal(statuses[i], 0);
		assert_memory_equal(dst[i], src[i], lens[i]);
		if (lens[i] < sizeof(dst[i]))
			assert_int_equal(dst[i][lens[i]], 0);
	}
	/* packet order: by request, then by offset, and MTU-sized */
	uint32_t expect = 0;
	for (uint32_t i = 0; i < N; i++)
		expect += (uint32_t)((lens[i] + T_MTU - 1) / T_MTU);
	assert_int_equal(log.n, expect);
	for (uint32_t k = 1; k < log.n; k++) {
		assert_true(lmsg[k] >= lmsg[k - 1]);
		if (lmsg[k] == lmsg[k - 1]) {
			assert_int_equal(ltid[k], ltid[k - 1]);
			assert_int_equal(loff[k], loff[k - 1] + T_MTU);
		} else {
			assert_int_equal(loff[k], 0);
		}
	}
	for (uint32_t i = 0; i < N; i++)
		assert_int_equal(shim_tid_release(t.ctx, h[i]), 0);
	shim_sdma_close(eng);
	t_pair_close(&t);
}

/* A zero-length request at the head completes with no packet and no
 * progress call. */
static void test_sdma_zero(void **state)
{
	struct shim_sdma *eng;
	struct shim_sdma_req req;
	struct t_pair t;
	uint64_t cookie = 0;
	int status = 1;

	(void)state;
	t_pair_open(&t);
	assert_int_equal(shim_sdma_open(t.ctx, 2, &eng), 0);
	req = t_req(t.peer, SHIM_TID_NONE, 0, NULL, 0, 77);
	assert_int_equal(shim_sdma_submit(eng, t.peer, &req), 0);
	assert_int_equal(shim_sdma_busy(eng), 1);
	assert_int_equal(shim_sdma_reap(eng, &cookie, &status), 1);
	assert_int_equal(cookie, 77);
	assert_int_equal(status, 0);
	assert_int_equal(shim_sdma_busy(eng), 0);
	assert_null(shim_rx_peek(t.rx));
	assert_int_equal(shim_sdma_progress(eng), 0);
	assert_null(shim_rx_peek(t.rx));
	/* many laps of a 2-entry ring */
	for (uint32_t i = 0; i < 100; i++) {
		req.cookie = i;
		assert_int_equal(shim_sdma_submit(eng, t.peer, &req), 0);
		assert_int_equal(shim_sdma_reap(eng, &cookie, &status), 1);
		assert_int_equal(cookie, i);
	}
	shim_sdma_close(eng);
	t_pair_close(&t);
}

/* The receiving process dies while a request waits for credits: the
 * request ends with -EPIPE within a bounded time instead of hanging. */
static void test_sdma_peer_death(void **state)
{
	const size_t len = 256u << 10;
	uint8_t *src = malloc(len);
	struct shim_dev *dev;
	struct shim_ctx *mine;
	struct shim_sdma *eng;
	struct shim_peer *peer;
	struct shim_sdma_req req;
	struct shim_addr addr;
	int up[2], down[2], status = 0;
	uint64_t cookie = 0;
	pid_t pid;

	(void)state;
	assert_non_null(src);
	t_fill(src, len, 5);
	assert_int_equal(shim_dev_open(&t_params, &dev), 0);
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &mine, NULL, NULL), 0);
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* child: own a receive context, never drain it, die when told
		 * (without closing it, like a crash) */
		struct pollfd pfd = {.fd = down[0], .events = POLLIN};
		struct shim_ctx *c = NULL;
		struct shim_addr a;

		close(down[1]);
		close(up[0]);
		memset(&a, 0, sizeof(a));
		if (shim_ctx_open(dev, T_UNIT, &c, NULL, NULL) == 0)
			shim_ctx_addr(c, &a);
		if (write(up[1], &a, sizeof(a)) != (ssize_t)sizeof(a))
			_exit(1);
		poll(&pfd, 1, (int)(T_DEADLINE_S * 1000));
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	assert_int_equal(read(up[0], &addr, sizeof(addr)), (ssize_t)sizeof(addr));
	close(up[0]);
	assert_int_equal(addr.pid, (uint32_t)pid);
	assert_int_equal(shim_peer_open(dev, &addr, &peer), 0);
	assert_int_equal(shim_sdma_open(mine, 4, &eng), 0);
	req = t_req(peer, 1u << 16, 0, src, len, 99);
	assert_int_equal(shim_sdma_submit(eng, peer, &req), 0);
	/* fill the peer's queue; while its owner lives the request waits */
	for (int i = 0; i < 4096; i++)
		shim_sdma_progress(eng);
	assert_int_equal(shim_sdma_reap(eng, &cookie, &status), 0);
	assert_true(shim_peer_alive(peer));

	close(down[1]); /* the child exits */
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	double end = t_now() + T_DEADLINE_S;
	int got = 0;
	while (!got && t_now() < end) {
		shim_sdma_progress(eng);
		got = shim_sdma_reap(eng, &cookie, &status);
	}
	assert_int_equal(got, 1);
	assert_int_equal(cookie, 99);
	assert_int_equal(status, -EPIPE);
	assert_int_equal(shim_sdma_busy(eng), 0);

	/* the engine is still usable for live peers */
	struct shim_peer *self;
	struct shim_addr me;
	shim_ctx_addr(mine, &me);
	assert_int_equal(shim_peer_open(dev, &me, &self), 0);
	req = t_req(self, 0, 0, NULL, 0, 100);
	assert_int_equal(shim_sdma_submit(eng, self, &req), 0);
	assert_int_equal(shim_sdma_reap(eng, &cookie, &status), 1);
	assert_int_equal(cookie, 100);
	assert_int_equal(status, 0);

	/* the child's segment is abandoned: remove it */
	char name[SHIM_NAME_MAX];
	assert_int_equal(shim_name_segment(name, sizeof(name), addr.uid, addr.unit, addr.ctx), 0);
	shm_unlink(name);
	shim_sdma_close(eng);
	shim_peer_close(self);
	shim_peer_close(peer);
	shim_ctx_close(mine);
	shim_dev_close(dev);
	free(src);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tid_cache),
		cmocka_unit_test(test_tid_evict),
		cmocka_unit_test(test_tid_model),
		cmocka_unit_test(test_tid_place),
		cmocka_unit_test(test_tid_bind),
		cmocka_unit_test(test_tid_free_reuse),
		cmocka_unit_test(test_sdma_states),
		cmocka_unit_test(test_sdma_large),
		cmocka_unit_test(test_sdma_iov),
		cmocka_unit_test(test_sdma_args_full),
		cmocka_unit_test(test_sdma_fifo),
		cmocka_unit_test(test_sdma_zero),
		cmocka_unit_test(test_sdma_peer_death),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
