/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_atomic.c - the atomic kernels against a reference computed here
 * (in int64, on small values every datatype represents exactly), for
 * every op x datatype, directly and through a loopback endpoint; and
 * fi_query_atomic / the *valid calls agreeing with what the data path
 * accepts.
 */
#include <complex.h>
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kernels),
		cmocka_unit_test(test_kernel_wrap),
		cmocka_unit_test_setup_teardown(test_query, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_loopback, fx_setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
