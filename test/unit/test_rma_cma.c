/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_rma_cma.c - large RMA reads and writes by the target's Cross
 * Memory Attach (from FI_OPX_RMA_CMA bytes) through a loopback endpoint:
 * one CMA copy checked like chunks (data, CQ data, refusals leave memory
 * as it was), the chunk fallback where the target may not use CMA, the
 * pipeline of several requests in flight, and forged CMA requests that
 * must never touch a region.  Keys, chunked RMA, counters and fences are
 * in test_rma.c; what both share is rma_fixture.c.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rma_fixture.h"
#include "opx_drop.h"
#include "opx_rma.h"

static int rma_cma_state(struct fx_env *e)
{
	struct opx_av *av = OPX_CONTAINER_OF(e->av, struct opx_av, av_fid);

	return av->table[e->self].rma_cma;
}

/* Large reads and writes from FI_OPX_RMA_CMA bytes: one CMA copy by the
 * target, checked like chunks (data, CQ data, refusals leave memory as it
 * was), and, where the target may not use CMA, the same operations by
 * chunks, in posting order. */
static void test_rma_cma(void **state)
{
	DIRECT_OFF();
	(void)state;
	struct fx_env e;
	struct fid_mr *mr, *ro;
	size_t thr = opx_env.rma_cma, len = 1u << 20, cap = 2 * len;
	uint8_t *tgt = malloc(cap), *ref = malloc(cap), *src = malloc(cap), *dst = malloc(cap);
	bool rndv_cma = opx_env.rndv_cma;
	int ctx, ctx2;

	assert_non_null(tgt);
	assert_non_null(ref);
	assert_non_null(src);
	assert_non_null(dst);
	assert_true(thr > opx_env.mtu);
	for (int refuse = 0; refuse < 2; refuse++) {
		opx_env.rndv_cma = !refuse; /* the target's switch */
		rma_open(&e, 0);
		assert_int_equal(fi_mr_reg(e.domain, tgt, cap, FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
					   6, 0, &mr, NULL),
				 0);
		assert_int_equal(fi_mr_reg(e.domain, tgt, len, FI_REMOTE_READ, 0, 7, 0, &ro, NULL),
				 0);
		assert_int_equal(rma_cma_state(&e), 0);
		/* around the threshold, contiguous and in pieces */
		size_t sizes[] = {thr - 1, thr, thr + 1, len + 5};
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			size_t n = sizes[i], off = 1 + i * 5;
			struct iovec w[3] = {{src, n / 3}, {src + n / 3, n / 3},
					     {src + 2 * (n / 3), n - 2 * (n / 3)}};
			struct fi_cq_data_entry rd = {0};

			memset(tgt, 0xee, cap);
			fill(src, n, (unsigned)i + 30);
			assert_int_equal(fi_writev(e.ep, w, NULL, 3, e.self, off, 6, &ctx), 0);
			assert_int_equal(rma_wait(&e, &ctx, NULL), 0);
			assert_memory_equal(tgt + off, src, n);
			assert_int_equal(tgt[off - 1], 0xee);
			assert_int_equal(tgt[off + n], 0xee);
			memset(dst, 0, cap);
			assert_int_equal(fi_read(e.ep, dst, n, NULL, e.self, off, 6, &ctx), 0);
			assert_int_equal(rma_wait(&e, &ctx, NULL), 0);
			assert_memory_equal(dst, src, n);
			assert_int_equal(dst[n], 0);
			fill(src, n, (unsigned)i + 60);
			assert_int_equal(fi_writedata(e.ep, src, n, NULL, 0x5150 + i, e.self, off, 6,
						      &ctx),
					 0);
			assert_int_equal(rma_wait(&e, &ctx, &rd), 0);
			for (int k = 0; k < 1000 && !rd.flags; k++) {
				if (fi_cq_read(e.cq, &rd, 1) != 1)
					rd.flags = 0;
			}
			assert_true(rd.flags & FI_REMOTE_CQ_DATA);
			assert_int_equal(rd.data, 0x5150 + i);
			assert_int_equal(rd.len, n);
			assert_memory_equal(tgt + off, src, n);
		}
		/* the first large operation told the initiator which way works;
		 * over the udp wire (test_rma_udp.sh) CMA is never even tried */
		assert_int_equal(rma_cma_state(&e),
				 opx_env.wire == SHIM_WIRE_UDP ? 0 : refuse ? -1 : 1);

		/* refused: out of range, read-only, bad key; memory unchanged */
		fill(tgt, cap, 77);
		memcpy(ref, tgt, cap);
		fill(src, cap, 78);
		assert_int_equal(fi_write(e.ep, src, len, NULL, e.self, len + 1, 6, &ctx), 0);
		assert_int_equal(rma_wait(&e, &ctx, NULL), FI_EINVAL);
		assert_int_equal(fi_write(e.ep, src, len, NULL, e.self, 0, 7, &ctx), 0);
		assert_int_equal(rma_wait(&e, &ctx, NULL), FI_EACCES);
		assert_int_equal(fi_read(e.ep, dst, len, NULL, e.self, 0, 99, &ctx), 0);
		assert_int_equal(rma_wait(&e, &ctx, NULL), FI_EACCES);
		assert_memory_equal(tgt, ref, cap);
		fi_close(&ro->fid);
		fi_close(&mr->fid);
		fx_close(&e);

		/* WAW across a fallback: a large write to an untried address
		 * whose target refuses CMA, then a small one over its start
		 * posted at once: the small one lands last */
		rma_open(&e, 0);
		assert_int_equal(fi_mr_reg(e.domain, tgt, cap, FI_REMOTE_WRITE, 0, 6, 0, &mr, NULL),
				 0);
		fill(src, len, 90);
		memset(dst, 0x5a, 64);
		assert_int_equal(fi_write(e.ep, src, len, NULL, e.self, 0, 6, &ctx), 0);
		assert_int_equal(fi_write(e.ep, dst, 64, NULL, e.self, 0, 6, &ctx2), 0);
		assert_int_equal(rma_wait(&e, &ctx, NULL), 0);
		assert_int_equal(rma_wait(&e, &ctx2, NULL), 0);
		assert_memory_equal(tgt, dst, 64);
		assert_memory_equal(tgt + 64, src + 64, len - 64);
		fi_close(&mr->fid);
		fx_close(&e);
	}
	opx_env.rndv_cma = rndv_cma;
	free(tgt);
	free(ref);
	free(src);
	free(dst);
	DIRECT_RESTORE();
}

/* Pipelined CMA writes: once CMA has worked with an address, large writes
 * go out back to back, each written when its grant comes.  Overlapping
 * ones (WAW), a writedata among them, then a small write and a large
 * read over them all still take effect in posting order; also when the
 * target starts refusing CMA in the middle of the pipeline (the refused
 * write and every pipelined one behind it go back to chunks, in order,
 * ahead of what was posted after them). */
static void test_rma_cma_pipeline(void **state)
{
	DIRECT_OFF();
	enum { K = 8, PAGE = 4096 };
	size_t thr = opx_env.rma_cma, big = 3 * thr + 17, cap = big + K * PAGE;
	bool rndv_cma = opx_env.rndv_cma, udp = opx_env.wire == SHIM_WIRE_UDP;
	uint8_t *tgt = malloc(cap), *ref = malloc(cap), *dst = malloc(cap), *src[K], small[100];
	int ctx[K + 2];

	(void)state;
	assert_non_null(tgt);
	assert_non_null(ref);
	assert_non_null(dst);
	for (int k = 0; k < K; k++) {
		src[k] = malloc(big);
		assert_non_null(src[k]);
	}
	for (int refuse = 0; refuse < 2; refuse++) {
		struct fx_env e;
		struct fid_mr *mr;
		int done = 0, cqdata = 0;
		struct timespec t0, t;

		rma_open(&e, 0);
		assert_int_equal(fi_mr_reg(e.domain, tgt, cap, FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
					   6, 0, &mr, NULL),
				 0);
		memset(tgt, 0, cap);
		memset(ref, 0, cap);
		/* CMA works with this address: later large writes pipeline */
		fill(src[0], big, 1);
		assert_int_equal(fi_write(e.ep, src[0], big, NULL, e.self, 0, 6, &ctx[0]), 0);
		assert_int_equal(rma_wait(&e, &ctx[0], NULL), 0);
		memcpy(ref, src[0], big);
		assert_int_equal(rma_cma_state(&e), udp ? 0 : 1);
		if (refuse)
			opx_env.rndv_cma = false; /* the target's switch, read per request */
		for (int k = 0; k < K; k++) {
			size_t off = (size_t)k * PAGE + (size_t)k;
			ssize_t rc;

			fill(src[k], big, 10u + (unsigned)k + 20u * (unsigned)refuse);
			if (k == 3)
				rc = fi_writedata(e.ep, src[k], big, NULL, 0x700 + k, e.self, off, 6,
						  &ctx[k]);
			else
				rc = fi_write(e.ep, src[k], big, NULL, e.self, off, 6, &ctx[k]);
			assert_int_equal(rc, 0);
			memcpy(ref + off, src[k], big);
		}
		memset(small, 0xa5, sizeof(small));
		assert_int_equal(fi_write(e.ep, small, sizeof(small), NULL, e.self,
					  (K - 1) * PAGE + 5, 6, &ctx[K]),
				 0);
		memcpy(ref + (K - 1) * PAGE + 5, small, sizeof(small));
		memset(dst, 0, cap);
		assert_int_equal(fi_read(e.ep, dst, cap, NULL, e.self, 0, 6, &ctx[K + 1]), 0);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		while (done < K + 2) {
			struct fi_cq_data_entry c;
			ssize_t n = fi_cq_read(e.cq, &c, 1);

			if (n == 1 && (c.flags & FI_REMOTE_CQ_DATA)) {
				assert_int_equal(c.data, 0x703);
				cqdata++;
			} else if (n == 1) {
				assert_true((int *)c.op_context >= ctx &&
					    (int *)c.op_context < ctx + K + 2);
				done++;
			} else {
				assert_int_equal(n, -FI_EAGAIN);
			}
			clock_gettime(CLOCK_MONOTONIC, &t);
			assert_true(t.tv_sec - t0.tv_sec < 20);
		}
		for (int k = 0; k < 1000 && !cqdata; k++) {
			struct fi_cq_data_entry c;

			if (fi_cq_read(e.cq, &c, 1) == 1 && (c.flags & FI_REMOTE_CQ_DATA))
				cqdata++;
		}
		assert_int_equal(cqdata, 1);
		assert_memory_equal(tgt, ref, cap);
		assert_memory_equal(dst, ref, cap);
		assert_int_equal(rma_cma_state(&e), udp ? 0 : refuse ? -1 : 1);
		opx_env.rndv_cma = rndv_cma;
		fi_close(&mr->fid);
		fx_close(&e);
	}
	for (int k = 0; k < K; k++)
		free(src[k]);
	free(tgt);
	free(ref);
	free(dst);
	DIRECT_RESTORE();
}

/* Forged CMA requests (a hostile peer's packets into the target's
 * context): a payload of the wrong size, no or too many pieces, pieces
 * that do not add up to the length or would wrap the sum.  Each is
 * dropped and counted (so is the error answer that reaches us as the
 * forged source), and the region is left as it was. */
static void test_rma_cma_forged(void **state)
{
	DIRECT_OFF();
	(void)state;
	struct fx_env e;
	struct fid_mr *mr;
	struct shim_peer *peer;
	static uint8_t tgt[1 << 16], ref[1 << 16], src[1 << 16];
	struct opx_ep *ep;
	struct opx_fabric *fab;

	rma_open(&e, 0);
	ep = opx_ep_of(e.ep);
	fab = OPX_CONTAINER_OF(e.fabric, struct opx_fabric, fabric_fid);
	assert_int_equal(shim_peer_open(fab->dev, &ep->addr, &peer), 0);
	assert_int_equal(fi_mr_reg(e.domain, tgt, sizeof(tgt), FI_REMOTE_READ | FI_REMOTE_WRITE,
				   0, 8, 0, &mr, NULL),
			 0);
	fill(tgt, sizeof(tgt), 40);
	memcpy(ref, tgt, sizeof(tgt));
	fill(src, sizeof(src), 41);
	enum { PAYLEN, NONE, MANY, SUM, WRAP, NCASES };
	for (int c = 0; c < NCASES; c++) {
		struct opx_rma_cma_req q = {.len = sizeof(src), .iov_count = 1};
		uint32_t paylen = sizeof(q);
		struct shim_pio_resv r = {0};
		struct shim_rhq_entry *ent;
		uint64_t before = opx_drop_count(ep, OPX_DROP_PROTO);

		q.iov_base[0] = (uintptr_t)src;
		q.iov_len[0] = sizeof(src);
		switch (c) {
		case PAYLEN: paylen = 8; break;
		case NONE: q.iov_count = 0; break;
		case MANY: q.iov_count = OPX_IOV_LIMIT + 1; break;
		case SUM: q.iov_len[0] = sizeof(src) + 4096; break; /* reads past src */
		default:
			q.iov_count = 2;
			q.iov_base[1] = (uintptr_t)src;
			q.iov_len[0] = sizeof(src) / 2;
			q.iov_len[1] = UINT64_MAX - sizeof(src) / 2 + 1; /* sum wraps to 0 */
			break;
		}
		assert_int_equal(shim_pio_reserve(peer, 1, paylen, &r), 0);
		memcpy(r.egr, &q, paylen);
		ent = shim_pio_entry(peer, &r, 0);
		opx_ep_hdr_init(&ent->hdr, ep, peer, OPX_OP_RMA_WRITE, OPX_PF_CMA, paylen,
				(uint32_t)sizeof(src), 0, 0);
		ent->hdr.p.u64[0] = 8;
		ent->hdr.p.u64[1] = 12345 | (1ULL << 63);
		shim_pio_publish(peer, &r, 0, shim_rhf_egr(peer, &r, 0));
		for (int k = 0; k < 10; k++)
			(void)fi_cq_read(e.cq, NULL, 0);
		/* the request, then the answer to it that nobody asked for */
		if (opx_drop_count(ep, OPX_DROP_PROTO) < before + 2)
			fail_msg("forged CMA request %d was not dropped", c);
		if (memcmp(tgt, ref, sizeof(tgt)))
			fail_msg("forged CMA request %d changed the region", c);
	}
	fi_close(&mr->fid);
	shim_peer_close(peer);
	fx_close(&e);
	DIRECT_RESTORE();
}

/* FI_RMA_EVENT: remote counters on the endpoint and on a region. */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rma_cma),
		cmocka_unit_test(test_rma_cma_pipeline),
		cmocka_unit_test(test_rma_cma_forged),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
