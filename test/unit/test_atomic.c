/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_atomic.c - the atomic kernels against a reference computed here
 * (in int64, on small values every datatype represents exactly), for
 * every op x datatype, directly and through a loopback endpoint;
 * fi_query_atomic / the *valid calls agreeing with what the data path
 * accepts; and large accumulates checked element by element: the largest
 * count a call takes and one element either side, every count up to it,
 * and 4 MiB streamed in calls posted back to back.
 */
#include <complex.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fi_atomic.h>

#include "atomic_ref.h"
#include "fixture.h"
#include "opx_ep.h"
#include "opx_rma.h"

#define NDT (FI_UINT128 + 1)
static size_t dsize(int dt)
{
	return opx_atomic_dt_size((enum fi_datatype)dt);
}

static void test_kernels(void **state)
{
	(void)state;
	int checked = 0;

	for (int dt = 0; dt < NDT; dt++) {
		for (int op = 0; op < FI_ATOMIC_OP_LAST; op++) {
			bool any = ref_valid(0, op, dt) || ref_valid(1, op, dt) ||
				   ref_valid(2, op, dt);
			uint8_t d[NEL * 32], s[NEL * 32], c[NEL * 32], r[NEL * 32];

			for (int k = 0; k < 3; k++)
				assert_int_equal(opx_atomic_valid(k, op, dt), ref_valid(k, op, dt));
			if (!any)
				continue;
			for (int i = 0; i < NEL; i++) {
				ref_put(dt, d, i, V_D[i]);
				ref_put(dt, s, i, V_S[i]);
				ref_put(dt, c, i, V_C[i]);
			}
			assert_int_equal(opx_atomic_apply(op, dt, d, s, c, r, NEL), 0);
			for (int i = 0; i < NEL; i++) {
				if (!ref_same(dt, d, i, ref_op(op, V_D[i], V_S[i], V_C[i])))
					fail_msg("op %d dt %d element %d", op, dt, i);
				assert_true(ref_same(dt, r, i, V_D[i]));
			}
			checked++;
		}
	}
	assert_true(checked > 200);
}

/* The kernels over many elements, every op x datatype and every count
 * around the vectorised kernels' block (OPX_AT_BLOCK, 8 elements) and
 * its multiples, plus one that is none of those: each element against
 * the reference, the fetched old values, and nothing written past the
 * count.  Values vary with a period (11) prime to the block, so an
 * element taken from the wrong place shows. */
static void test_kernel_blocks(void **state)
{
	(void)state;
	static const size_t counts[] = {1, 2, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 100};
	enum { MAXN = 100, PAD = 4 };
	int checked = 0;

	for (int dt = 0; dt < NDT; dt++) {
		size_t sz = dsize(dt);

		for (int op = 0; op < FI_ATOMIC_OP_LAST; op++) {
			if (!(ref_valid(0, op, dt) || ref_valid(1, op, dt) || ref_valid(2, op, dt)))
				continue;
			for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
				size_t n = counts[k];
				uint8_t d[(MAXN + PAD) * 32], s[(MAXN + PAD) * 32];
				uint8_t c[(MAXN + PAD) * 32], r[(MAXN + PAD) * 32];

				for (size_t i = 0; i < MAXN + PAD; i++) {
					ref_put(dt, d, (int)i, (int64_t)((i * 5 + 1) % 11));
					ref_put(dt, s, (int)i, (int64_t)((i * 3 + 2) % 11));
					ref_put(dt, c, (int)i, (int64_t)((i * 7) % 11));
				}
				memset(r, 0xa5, sizeof(r));
				assert_int_equal(opx_atomic_apply(op, dt, d, s, c, r, n), 0);
				for (size_t i = 0; i < MAXN + PAD; i++) {
					int64_t d0 = (int64_t)((i * 5 + 1) % 11);
					int64_t want = i < n ? ref_op(op, d0, (int64_t)((i * 3 + 2) % 11),
								      (int64_t)((i * 7) % 11))
							     : d0;

					if (!ref_same(dt, d, (int)i, want))
						fail_msg("op %d dt %d count %zu: element %zu", op, dt, n,
							 i);
					if (i < n && !ref_same(dt, r, (int)i, d0))
						fail_msg("op %d dt %d count %zu: fetched %zu", op, dt, n,
							 i);
				}
				for (size_t b = n * sz; b < sizeof(r); b++)
					if (r[b] != 0xa5)
						fail_msg("op %d dt %d count %zu: byte %zu past the result",
							 op, dt, n, b);
				checked++;
			}
		}
	}
	assert_true(checked > 2000);
}

/* Wrap-around, not undefined behaviour, for signed overflow. */
static void test_kernel_wrap(void **state)
{
	(void)state;
	int8_t a = 127, b = 1;
	int64_t x = INT64_MAX, y = 2;
	uint16_t u = 65535, v = 65535;

	assert_int_equal(opx_atomic_apply(FI_SUM, FI_INT8, &a, &b, NULL, NULL, 1), 0);
	assert_int_equal(a, -128);
	assert_int_equal(opx_atomic_apply(FI_PROD, FI_INT64, &x, &y, NULL, NULL, 1), 0);
	assert_int_equal(x, -2);
	assert_int_equal(opx_atomic_apply(FI_PROD, FI_UINT16, &u, &v, NULL, NULL, 1), 0);
	assert_int_equal(u, 1);
}

static void test_query(void **state)
{
	struct fx_env *e = *state;
	static const uint64_t kflags[3] = {0, FI_FETCH_ATOMIC, FI_COMPARE_ATOMIC};

	for (int dt = 0; dt < NDT + 2; dt++) {
		for (int op = 0; op < FI_ATOMIC_OP_LAST + 1; op++) {
			for (int k = 0; k < 3; k++) {
				struct fi_atomic_attr attr = {0};
				size_t count = 0;
				int q = fi_query_atomic(e->domain, dt, op, &attr, kflags[k]);
				int v = k == 0   ? fi_atomicvalid(e->ep, dt, op, &count)
					: k == 1 ? fi_fetch_atomicvalid(e->ep, dt, op, &count)
						 : fi_compare_atomicvalid(e->ep, dt, op, &count);
				bool ok = dt < NDT && op < FI_ATOMIC_OP_LAST && ref_valid(k, op, dt);

				assert_int_equal(q, ok ? 0 : -FI_EOPNOTSUPP);
				assert_int_equal(v, ok ? 0 : -FI_EOPNOTSUPP);
				if (ok) {
					assert_int_equal(attr.size, dsize(dt));
					assert_int_equal(attr.count, count);
					assert_true(count >= 1);
				}
			}
		}
	}
}

/* Through the endpoint: every valid op x datatype x call, and the
 * invalid ones refused by the data path exactly when query refuses. */
static void test_loopback(void **state)
{
	struct fx_env *e = *state;
	static uint8_t tgt[NEL * 32];
	struct fid_mr *mr;
	int ctx, n = 0;

	assert_int_equal(fi_mr_reg(e->domain, tgt, sizeof(tgt), FI_REMOTE_READ | FI_REMOTE_WRITE,
				   0, 11, 0, &mr, NULL),
			 0);
	for (int dt = 0; dt < NDT; dt++) {
		for (int op = 0; op < FI_ATOMIC_OP_LAST; op++) {
			for (int k = 0; k < 3; k++) {
				uint8_t s[NEL * 32], c[NEL * 32], r[NEL * 32];
				ssize_t rc;

				for (int i = 0; i < NEL; i++) {
					ref_put(dt, tgt, i, V_D[i]);
					ref_put(dt, s, i, V_S[i]);
					ref_put(dt, c, i, V_C[i]);
				}
				memset(r, 0xa5, sizeof(r));
				if (k == 0)
					rc = fi_atomic(e->ep, s, NEL, NULL, e->self, 0, 11, dt, op,
						       &ctx);
				else if (k == 1)
					rc = fi_fetch_atomic(e->ep, s, NEL, NULL, r, NULL, e->self,
							     0, 11, dt, op, &ctx);
				else
					rc = fi_compare_atomic(e->ep, s, NEL, NULL, c, NULL, r,
							       NULL, e->self, 0, 11, dt, op, &ctx);
				if (!ref_valid(k, op, dt)) {
					assert_int_equal(rc, -FI_EOPNOTSUPP);
					continue;
				}
				assert_int_equal(rc, 0);
				struct fi_cq_tagged_entry ce;
				struct timespec t0, t;
				clock_gettime(CLOCK_MONOTONIC, &t0);
				while ((rc = fi_cq_read(e->cq, &ce, 1)) == -FI_EAGAIN) {
					clock_gettime(CLOCK_MONOTONIC, &t);
					assert_true(t.tv_sec - t0.tv_sec < 10);
				}
				assert_int_equal(rc, 1);
				assert_ptr_equal(ce.op_context, &ctx);
				assert_true(ce.flags & FI_ATOMIC);
				for (int i = 0; i < NEL; i++) {
					if (!ref_same(dt, tgt, i, ref_op(op, V_D[i], V_S[i], V_C[i])))
						fail_msg("k %d op %d dt %d element %d", k, op, dt, i);
					if (k)
						assert_true(ref_same(dt, r, i, V_D[i]));
				}
				n++;
			}
		}
	}
	assert_true(n > 300);
	fi_close(&mr->fid);
}

/* ---- large accumulates ------------------------------------------------ */

/* Element values of the large accumulates: small enough for every
 * datatype (int8 included) to hold target + operand exactly, varied
 * enough that a misplaced or repeated element shows. */
static int64_t big_d(size_t i)
{
	return (int64_t)(i % 61);
}

static int64_t big_s(size_t i)
{
	return (int64_t)((i * 7 + 3) % 53) + 1;
}

/* Wait for the completion of context ctx (any order), bounded. */
static void big_wait(struct fx_env *e, void *ctx)
{
	struct fi_cq_tagged_entry ce;
	struct timespec t0, t;
	ssize_t rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((rc = fi_cq_read(e->cq, &ce, 1)) == -FI_EAGAIN) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		assert_true(t.tv_sec - t0.tv_sec < 10);
	}
	assert_int_equal(rc, 1);
	assert_ptr_equal(ce.op_context, ctx);
}

/* One accumulate of cnt elements at element off of the region (key 12),
 * plain (kind 0) or fetching (kind 1); returns the post's code and, when
 * it is 0, has waited for the completion. */
static ssize_t big_acc(struct fx_env *e, int kind, int dt, const uint8_t *src, uint8_t *res,
		       size_t off, size_t cnt)
{
	uint64_t addr = off * ref_size(dt);
	int ctx;
	ssize_t rc;

	if (kind == 0)
		rc = fi_atomic(e->ep, src, cnt, NULL, e->self, addr, 12, dt, FI_SUM, &ctx);
	else
		rc = fi_fetch_atomic(e->ep, src, cnt, NULL, res, NULL, e->self, addr, 12, dt,
				     FI_SUM, &ctx);
	if (!rc)
		big_wait(e, &ctx);
	return rc;
}

/* Every element of the target: [off, off + cnt) accumulated once, the
 * rest as it was. */
static void big_check(int dt, const uint8_t *tgt, size_t n, size_t off, size_t cnt,
		      const char *what)
{
	for (size_t i = 0; i < n; i++) {
		int64_t want = big_d(i) + (i >= off && i < off + cnt ? big_s(i - off) : 0);

		if (!ref_same(dt, tgt, (int)i, want))
			fail_msg("%s: dt %d count %zu at %zu: element %zu wrong", what, dt, cnt, off,
				 i);
	}
}

/* The largest accumulate a call takes (fi_atomicvalid's count: one MTU,
 * several datagrams on the udp wire, where it goes as several chunks of
 * whole elements) and one element either side, for each element size,
 * plain and fetching: count - 1 and count change exactly their elements
 * (and fetch the old values), count + 1 is refused with -FI_EINVAL and
 * changes nothing. */
static void test_large_max(void **state)
{
	struct fx_env *e = *state;
	static const int dts[] = {FI_UINT8, FI_INT16, FI_UINT32, FI_FLOAT, FI_INT64, FI_DOUBLE,
				  FI_UINT128};
	struct fid_mr *mr;
	size_t max8 = 0, room;
	uint8_t *tgt, *src, *res;

	assert_int_equal(fi_atomicvalid(e->ep, FI_UINT8, FI_SUM, &max8), 0);
	room = (max8 + 64) * 16; /* the largest call's bytes plus a margin, any size */
	tgt = malloc(room);
	src = malloc(room);
	res = malloc(room);
	assert_non_null(tgt);
	assert_non_null(src);
	assert_non_null(res);
	assert_int_equal(fi_mr_reg(e->domain, tgt, room, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 12,
				   0, &mr, NULL),
			 0);
	for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++) {
		int dt = dts[d];
		size_t sz = ref_size(dt), max = 0, fmax = 0, n = room / sz;

		assert_int_equal(fi_atomicvalid(e->ep, dt, FI_SUM, &max), 0);
		assert_int_equal(fi_fetch_atomicvalid(e->ep, dt, FI_SUM, &fmax), 0);
		assert_int_equal(max, fmax);
		assert_true(max >= 2 && max + 1 < n);
		for (int kind = 0; kind < 2; kind++) {
			for (size_t cnt = max - 1; cnt <= max + 1; cnt++) {
				/* odd offsets too: the elements need not start
				 * at the region's first byte */
				size_t off = cnt & 1;
				ssize_t rc;

				for (size_t i = 0; i < n; i++) {
					ref_put(dt, tgt, (int)i, big_d(i));
					ref_put(dt, src, (int)i, big_s(i));
				}
				memset(res, 0xa5, room);
				rc = big_acc(e, kind, dt, src, res, off, cnt);
				if (cnt > max) {
					assert_int_equal(rc, -FI_EINVAL);
					big_check(dt, tgt, n, off, 0, "refused");
					continue;
				}
				assert_int_equal(rc, 0);
				big_check(dt, tgt, n, off, cnt, kind ? "fetch" : "atomic");
				for (size_t i = 0; kind && i < cnt; i++)
					if (!ref_same(dt, res, (int)i, big_d(off + i)))
						fail_msg("dt %d count %zu: fetched element %zu wrong",
							 dt, cnt, i);
				/* the fetch wrote nothing past its count */
				for (size_t b = kind ? cnt * sz : 0; kind && b < room; b++)
					if (res[b] != 0xa5)
						fail_msg("dt %d count %zu: byte %zu past the result",
							 dt, cnt, b);
			}
		}
	}
	fi_close(&mr->fid);
	free(tgt);
	free(src);
	free(res);
}

/* Every count from 1 to the largest, 32-bit elements (MPI_SUM of ints,
 * what Open MPI's osc rdma accumulates): each chunk boundary of any path
 * (the udp wire's datagrams of whole elements) is crossed by one element
 * either way. */
static void test_large_counts(void **state)
{
	struct fx_env *e = *state;
	struct fid_mr *mr;
	size_t max = 0;
	uint32_t *tgt, *src;

	assert_int_equal(fi_atomicvalid(e->ep, FI_UINT32, FI_SUM, &max), 0);
	tgt = calloc(max + 1, sizeof(*tgt));
	src = calloc(max + 1, sizeof(*src));
	assert_non_null(tgt);
	assert_non_null(src);
	for (size_t i = 0; i <= max; i++)
		src[i] = (uint32_t)big_s(i);
	assert_int_equal(fi_mr_reg(e->domain, tgt, (max + 1) * sizeof(*tgt),
				   FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 12, 0, &mr, NULL),
			 0);
	for (size_t cnt = 1; cnt <= max; cnt++) {
		for (size_t i = 0; i <= max; i++)
			tgt[i] = (uint32_t)big_d(i);
		assert_int_equal(big_acc(e, 0, FI_UINT32, (const uint8_t *)src, NULL, 0, cnt), 0);
		big_check(FI_UINT32, (const uint8_t *)tgt, max + 1, 0, cnt, "sweep");
	}
	fi_close(&mr->fid);
	free(tgt);
	free(src);
}

/* A 4 MiB accumulate of 32-bit elements as an application streams it:
 * calls of the largest count posted back to back (-FI_EAGAIN: read the
 * CQ and post again), every completion counted, then every element
 * checked, twice over the same memory so a lost or repeated call shows. */
static void test_large_stream(void **state)
{
	struct fx_env *e = *state;
	const size_t n = (size_t)1 << 20;
	struct fid_mr *mr;
	size_t max = 0, posted = 0, done = 0;
	uint32_t *tgt, *src;
	int ctx;

	assert_int_equal(fi_atomicvalid(e->ep, FI_UINT32, FI_SUM, &max), 0);
	tgt = malloc(n * sizeof(*tgt));
	src = malloc(n * sizeof(*src));
	assert_non_null(tgt);
	assert_non_null(src);
	for (size_t i = 0; i < n; i++) {
		tgt[i] = (uint32_t)(i * 2654435761u);
		src[i] = (uint32_t)big_s(i) << 8 | (uint32_t)(i & 0xff);
	}
	assert_int_equal(fi_mr_reg(e->domain, tgt, n * sizeof(*tgt),
				   FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 12, 0, &mr, NULL),
			 0);
	for (int pass = 0; pass < 2; pass++) {
		for (size_t off = 0; off < n;) {
			size_t cnt = n - off < max ? n - off : max;
			ssize_t rc = fi_atomic(e->ep, src + off, cnt, NULL, e->self,
					       off * sizeof(*tgt), 12, FI_UINT32, FI_SUM, &ctx);
			struct fi_cq_tagged_entry ce[16];

			if (rc == 0) {
				posted++;
				off += cnt;
			} else {
				assert_int_equal(rc, -FI_EAGAIN);
			}
			rc = fi_cq_read(e->cq, ce, 16);
			if (rc > 0)
				done += (size_t)rc;
			else
				assert_int_equal(rc, -FI_EAGAIN);
		}
	}
	{
		struct timespec t0, t;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		while (done < posted) {
			struct fi_cq_tagged_entry ce[16];
			ssize_t rc = fi_cq_read(e->cq, ce, 16);

			if (rc > 0)
				done += (size_t)rc;
			else
				assert_int_equal(rc, -FI_EAGAIN);
			clock_gettime(CLOCK_MONOTONIC, &t);
			assert_true(t.tv_sec - t0.tv_sec < 20);
		}
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t want = (uint32_t)(i * 2654435761u) + 2 * src[i];

		if (tgt[i] != want)
			fail_msg("element %zu: %u, expected %u", i, tgt[i], want);
	}
	fi_close(&mr->fid);
	free(tgt);
	free(src);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kernels),
		cmocka_unit_test(test_kernel_blocks),
		cmocka_unit_test(test_kernel_wrap),
		cmocka_unit_test_setup_teardown(test_query, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_loopback, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_large_max, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_large_counts, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_large_stream, fx_setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
