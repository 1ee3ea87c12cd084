/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_tid.c - unit tests of the software SuperNIC's expected receive
 * (TID) table: the registration cache (hits, references, LRU eviction,
 * invalidation, generations, a random run against a reference model),
 * placing TID packets inside a registration and nowhere else, binding a
 * registration to its sender, and a freed buffer's address used again.
 * The SDMA engine that feeds the table is in test_sdma.c; what both
 * share is shim_fixture.c.
 *
 * TID packets are made by hand and placed through the context's own
 * ring (no SDMA).  Contexts are opened on unit 2 of 8 (see
 * shim_fixture.h) so concurrent suites do not collide.  Every loop is
 * bounded in count.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shim_fixture.h"

const int t_unit = T_UNITS - 6;
const uint16_t t_jkey = 0x5344;

/* ---------------------------------------------------------------------
 * Helpers
 */
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
	ret = shim_tid_place(t->ctx, e);
	shim_rx_release(t->rx, e);
	return ret;
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
	assert_int_equal(shim_tid_place(t.ctx, NULL), -EINVAL);
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
	assert_int_equal(shim_tid_place(t.ctx, &fake), -EINVAL);
	fake.rhf = SHIM_RHF_TID; /* payload neither eager nor empty */
	assert_int_equal(shim_tid_place(t.ctx, &fake), -EINVAL);
	fake.rhf = SHIM_RHF_TID | SHIM_RHF_EGR | (T_EGR / SHIM_BLOCK - 1);
	fake.hdr.paylen = 2 * SHIM_BLOCK; /* runs past the eager ring */
	assert_int_equal(shim_tid_place(t.ctx, &fake), -EINVAL);
	fake.rhf = SHIM_RHF_TID | SHIM_RHF_EGR | SHIM_RHF_EGRIDX_MASK;
	fake.hdr.paylen = 1;
	assert_int_equal(shim_tid_place(t.ctx, &fake), -EINVAL);
	fake.rhf = SHIM_RHF_TID | SHIM_RHF_EGR;
	fake.hdr.paylen = 0xffffffffu;
	assert_int_equal(shim_tid_place(t.ctx, &fake), -EINVAL);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tid_cache),
		cmocka_unit_test(test_tid_evict),
		cmocka_unit_test(test_tid_model),
		cmocka_unit_test(test_tid_place),
		cmocka_unit_test(test_tid_bind),
		cmocka_unit_test(test_tid_free_reuse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
