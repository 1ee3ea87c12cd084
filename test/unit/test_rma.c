/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_rma.c - memory-region keys and RMA through a loopback endpoint
 * (the endpoint is initiator and target: its own progress answers its
 * requests).  Sizes are swept around the inline, MTU and chunk limits;
 * every transfer is checked byte for byte, and every refused access is
 * checked to leave the target's memory unchanged.  Also many operations
 * in flight, FI_RMA_EVENT counters and FI_FENCE.  Large transfers by the
 * target's Cross Memory Attach are in test_rma_cma.c; what both share is
 * rma_fixture.c.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rma_fixture.h"
#include "opx_rma.h"

/* Lookups as the target side makes them, with the domain lock they
 * expect (a debug build asserts it). */
static struct opx_mr *mr_find(struct opx_domain *d, uint64_t key)
{
	struct opx_mr *mr;

	opx_lock_acquire(&d->lock);
	mr = opx_mr_find_locked(d, key);
	opx_lock_release(&d->lock);
	return mr;
}

static int mr_resolve(struct opx_domain *d, uint64_t key, uint64_t addr, size_t len, uint64_t need,
		      struct iovec *out, size_t *outcnt)
{
	int ret;

	opx_lock_acquire(&d->lock);
	ret = opx_mr_resolve_locked(d, key, addr, len, need, out, outcnt, NULL);
	opx_lock_release(&d->lock);
	return ret;
}

/* ---------------------------------------------------------------------
 * Keys.
 */
static void test_mr_keys_hash(void **state)
{
	(void)state;
	struct fx_env e;
	enum { N = 1000 };
	static struct fid_mr *mr[N];
	static char buf[N];
	struct opx_domain *d;

	rma_open(&e, 0);
	d = OPX_CONTAINER_OF(e.domain, struct opx_domain, domain_fid);
	/* user keys with a stride, the kind that collide when masked */
	for (int i = 0; i < N; i++)
		assert_int_equal(fi_mr_reg(e.domain, buf + i, 1, FI_REMOTE_WRITE, 0,
					   (uint64_t)i << 12, 0, &mr[i], NULL),
				 0);
	for (int i = 0; i < N; i++)
		assert_ptr_equal(mr_find(d, (uint64_t)i << 12), fi_mr_desc(mr[i]));
	assert_null(mr_find(d, 1));
	for (int i = 0; i < N; i += 2)
		assert_int_equal(fi_close(&mr[i]->fid), 0);
	for (int i = 0; i < N; i++) {
		if (i % 2)
			assert_ptr_equal(mr_find(d, (uint64_t)i << 12), fi_mr_desc(mr[i]));
		else
			assert_null(mr_find(d, (uint64_t)i << 12));
	}
	for (int i = 1; i < N; i += 2)
		assert_int_equal(fi_close(&mr[i]->fid), 0);
	fx_close(&e);
}

static void test_mr_prov_keys(void **state)
{
	(void)state;
	struct fx_env e;
	struct fid_mr *a, *b;
	char buf[16];

	rma_open(&e, FI_MR_PROV_KEY | FI_MR_VIRT_ADDR);
	/* requested keys are ignored with FI_MR_PROV_KEY: same request twice */
	assert_int_equal(fi_mr_reg(e.domain, buf, 8, FI_REMOTE_READ, 0, 7, 0, &a, NULL), 0);
	assert_int_equal(fi_mr_reg(e.domain, buf, 8, FI_REMOTE_READ, 0, 7, 0, &b, NULL), 0);
	assert_int_not_equal(fi_mr_key(a), fi_mr_key(b));
	assert_int_not_equal(fi_mr_key(a), 0);
	fi_close(&a->fid);
	fi_close(&b->fid);
	fx_close(&e);
}

static void test_mr_resolve(void **state)
{
	(void)state;
	struct fx_env e;
	struct fid_mr *mr;
	static uint8_t buf[256];
	struct iovec v[2] = {{buf, 100}, {buf + 128, 100}};
	struct iovec out[OPX_IOV_LIMIT];
	size_t n;
	struct opx_domain *d;

	/* offsets, a region of two pieces */
	rma_open(&e, 0);
	d = OPX_CONTAINER_OF(e.domain, struct opx_domain, domain_fid);
	assert_int_equal(fi_mr_regv(e.domain, v, 2, FI_REMOTE_READ, 0, 9, 0, &mr, NULL), 0);
	assert_int_equal(mr_resolve(d, 9, 90, 20, FI_REMOTE_READ, out, &n), 0);
	assert_int_equal(n, 2);
	assert_ptr_equal(out[0].iov_base, buf + 90);
	assert_int_equal(out[0].iov_len, 10);
	assert_ptr_equal(out[1].iov_base, buf + 128);
	assert_int_equal(out[1].iov_len, 10);
	assert_int_equal(mr_resolve(d, 9, 0, 200, FI_REMOTE_READ, out, &n), 0);
	assert_int_equal(mr_resolve(d, 9, 200, 0, FI_REMOTE_READ, out, &n), 0);
	assert_int_equal(mr_resolve(d, 9, 1, 200, FI_REMOTE_READ, out, &n), -FI_EINVAL);
	assert_int_equal(mr_resolve(d, 9, 201, 0, FI_REMOTE_READ, out, &n), -FI_EINVAL);
	assert_int_equal(mr_resolve(d, 9, UINT64_MAX, 2, FI_REMOTE_READ, out, &n), -FI_EINVAL);
	assert_int_equal(mr_resolve(d, 9, 8, SIZE_MAX, FI_REMOTE_READ, out, &n), -FI_EINVAL);
	assert_int_equal(mr_resolve(d, 9, 0, 8, FI_REMOTE_WRITE, out, &n), -FI_EACCES);
	assert_int_equal(mr_resolve(d, 10, 0, 8, FI_REMOTE_READ, out, &n), -FI_EACCES);
	fi_close(&mr->fid);
	assert_int_equal(mr_resolve(d, 9, 0, 8, FI_REMOTE_READ, out, &n), -FI_EACCES);
	fx_close(&e);

	/* virtual addresses */
	rma_open(&e, FI_MR_VIRT_ADDR);
	d = OPX_CONTAINER_OF(e.domain, struct opx_domain, domain_fid);
	assert_int_equal(fi_mr_reg(e.domain, buf + 16, 64, FI_REMOTE_WRITE, 0, 3, 0, &mr, NULL), 0);
	assert_int_equal(
		mr_resolve(d, 3, (uint64_t)(uintptr_t)(buf + 20), 60, FI_REMOTE_WRITE, out, &n), 0);
	assert_ptr_equal(out[0].iov_base, buf + 20);
	assert_int_equal(
		mr_resolve(d, 3, (uint64_t)(uintptr_t)(buf + 15), 1, FI_REMOTE_WRITE, out, &n),
		-FI_EINVAL);
	assert_int_equal(
		mr_resolve(d, 3, (uint64_t)(uintptr_t)(buf + 20), 61, FI_REMOTE_WRITE, out, &n),
		-FI_EINVAL);
	assert_int_equal(mr_resolve(d, 3, 4, 1, FI_REMOTE_WRITE, out, &n), -FI_EINVAL);
	fi_close(&mr->fid);
	fx_close(&e);
}

/* ---------------------------------------------------------------------
 * Data path, loopback.
 */
static void rma_sweep(int mr_mode)
{
	struct fx_env e;
	struct fid_mr *mr;
	size_t mtu = opx_env.mtu;
	size_t sizes[] = {0, 1, 15, 16, 17, 63, 64, 65, mtu - 1, mtu, mtu + 1, 2 * mtu + 3,
			  64 * mtu + 1, (1u << 20) + 3};
	size_t cap = (1u << 20) + 64 + 8;
	uint8_t *tgt = malloc(cap), *src = malloc(cap), *dst = malloc(cap);
	uint64_t wcnt = 0, rcnt = 0;
	int ctx;

	assert_non_null(tgt);
	assert_non_null(src);
	assert_non_null(dst);
	rma_open(&e, mr_mode);
	assert_int_equal(fi_mr_reg(e.domain, tgt, cap, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 77, 0,
				   &mr, NULL),
			 0);
	uint64_t base = (mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)tgt : 0;
	uint64_t key = fi_mr_key(mr);

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t len = sizes[i], off = i * 3 % 61;
		unsigned seed = (unsigned)i + 1;

		/* contiguous write, then read back */
		memset(tgt, 0xee, cap);
		fill(src, len, seed);
		assert_int_equal(fi_write(e.ep, src, len, NULL, e.self, base + off, key, &ctx), 0);
		assert_int_equal(rma_wait(&e, &ctx, NULL), 0);
		wcnt++;
		assert_memory_equal(tgt + off, src, len);
		assert_int_equal(tgt[off + len], 0xee);
		if (off)
			assert_int_equal(tgt[off - 1], 0xee);
		memset(dst, 0, cap);
		assert_int_equal(fi_read(e.ep, dst, len, NULL, e.self, base + off, key, &ctx), 0);
		assert_int_equal(rma_wait(&e, &ctx, NULL), 0);
		rcnt++;
		assert_memory_equal(dst, src, len);

		/* iov write of three pieces, iov read of two */
		struct iovec w[3] = {{src, len / 3}, {src + len / 3, len / 3},
				     {src + 2 * (len / 3), len - 2 * (len / 3)}};
		struct iovec r[2] = {{dst, len / 2}, {dst + len / 2, len - len / 2}};
		fill(src, len, seed + 100);
		assert_int_equal(fi_writev(e.ep, w, NULL, 3, e.self, base + off, key, &ctx), 0);
		assert_int_equal(rma_wait(&e, &ctx, NULL), 0);
		assert_memory_equal(tgt + off, src, len);
		memset(dst, 0, cap);
		assert_int_equal(fi_readv(e.ep, r, NULL, 2, e.self, base + off, key, &ctx), 0);
		assert_int_equal(rma_wait(&e, &ctx, NULL), 0);
		assert_memory_equal(dst, src, len);
		wcnt++;
		rcnt++;

		/* writedata: the CQ data and length land in the target's CQ */
		struct fi_cq_data_entry rd = {0};
		fill(src, len, seed + 200);
		assert_int_equal(fi_writedata(e.ep, src, len, NULL, 0xabc0 + i, e.self, base + off,
					      key, &ctx),
				 0);
		assert_int_equal(rma_wait(&e, &ctx, &rd), 0);
		wcnt++;
		for (int k = 0; k < 1000 && !rd.flags; k++) {
			if (fi_cq_read(e.cq, &rd, 1) != 1)
				rd.flags = 0;
		}
		assert_true(rd.flags & FI_REMOTE_CQ_DATA);
		assert_true(rd.flags & FI_REMOTE_WRITE);
		assert_int_equal(rd.data, 0xabc0 + i);
		assert_int_equal(rd.len, len);
		assert_memory_equal(tgt + off, src, len);
	}
	/* inject write: no completion, the counter counts it */
	fill(src, 8, 5);
	assert_int_equal(fi_inject_write(e.ep, src, 8, e.self, base + 3, key), 0);
	wcnt++;
	for (int k = 0; k < 100000 && fi_cntr_read(e.wcntr) < wcnt; k++)
		;
	assert_int_equal(fi_cntr_read(e.wcntr), wcnt);
	assert_int_equal(fi_cntr_read(e.rcntr), rcnt);
	assert_memory_equal(tgt + 3, src, 8);
	fi_close(&mr->fid);
	fx_close(&e);
	free(tgt);
	free(src);
	free(dst);
}

static void test_rma_sweep_offset(void **state)
{
	(void)state;
	rma_sweep(0);
}

static void test_rma_sweep_virt(void **state)
{
	(void)state;
	rma_sweep(FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED);
}

/* Bad key, range and access: error completion, target unchanged. */
static void test_rma_refused(void **state)
{
	(void)state;
	struct fx_env e;
	struct fid_mr *rw, *ro, *wo;
	static uint8_t tgt[4096], ref[4096], src[4096], dst[4096];
	int ctx;

	rma_open(&e, 0);
	fill(tgt, sizeof(tgt), 9);
	memcpy(ref, tgt, sizeof(tgt));
	fill(src, sizeof(src), 10);
	assert_int_equal(fi_mr_reg(e.domain, tgt, 1024, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 1, 0,
				   &rw, NULL),
			 0);
	assert_int_equal(fi_mr_reg(e.domain, tgt + 1024, 1024, FI_REMOTE_READ, 0, 2, 0, &ro, NULL),
			 0);
	assert_int_equal(fi_mr_reg(e.domain, tgt + 2048, 1024, FI_REMOTE_WRITE, 0, 3, 0, &wo, NULL),
			 0);
	/* bad key */
	assert_int_equal(fi_write(e.ep, src, 16, NULL, e.self, 0, 99, &ctx), 0);
	assert_int_equal(rma_wait(&e, &ctx, NULL), FI_EACCES);
	/* out of range, straddling the end, and past it */
	assert_int_equal(fi_write(e.ep, src, 16, NULL, e.self, 1020, 1, &ctx), 0);
	assert_int_equal(rma_wait(&e, &ctx, NULL), FI_EINVAL);
	assert_int_equal(fi_write(e.ep, src, 4000, NULL, e.self, 0, 1, &ctx), 0);
	assert_int_equal(rma_wait(&e, &ctx, NULL), FI_EINVAL);
	assert_int_equal(fi_read(e.ep, dst, 16, NULL, e.self, 1 << 20, 1, &ctx), 0);
	assert_int_equal(rma_wait(&e, &ctx, NULL), FI_EINVAL);
	/* missing access */
	assert_int_equal(fi_write(e.ep, src, 16, NULL, e.self, 0, 2, &ctx), 0);
	assert_int_equal(rma_wait(&e, &ctx, NULL), FI_EACCES);
	assert_int_equal(fi_read(e.ep, dst, 16, NULL, e.self, 0, 3, &ctx), 0);
	assert_int_equal(rma_wait(&e, &ctx, NULL), FI_EACCES);
	assert_memory_equal(tgt, ref, sizeof(tgt));
	assert_int_equal(fi_cntr_readerr(e.wcntr), 4);
	assert_int_equal(fi_cntr_readerr(e.rcntr), 2);
	/* allowed ones still work */
	assert_int_equal(fi_read(e.ep, dst, 16, NULL, e.self, 8, 2, &ctx), 0);
	assert_int_equal(rma_wait(&e, &ctx, NULL), 0);
	assert_memory_equal(dst, tgt + 1024 + 8, 16);
	/* a closed key fails at once, and the memory stays as it was */
	assert_int_equal(fi_close(&wo->fid), 0);
	assert_int_equal(fi_write(e.ep, src, 16, NULL, e.self, 0, 3, &ctx), 0);
	assert_int_equal(rma_wait(&e, &ctx, NULL), FI_EACCES);
	assert_memory_equal(tgt, ref, sizeof(tgt));
	fi_close(&rw->fid);
	fi_close(&ro->fid);
	fx_close(&e);
}

/* Memory that is not there (opx_mr.c): without FI_MR_ALLOCATED the whole
 * address space may be registered, as MPICH does for a dynamic window
 * (base NULL, length UINTPTR_MAX, absolute addresses); a request into a
 * hole, a read-only page or across into either fails with FI_EFAULT, the
 * target lives on and no byte of the range is written; mapped memory works
 * at every size and through atomics. */
static void test_mr_whole_space(void **state)
{
	(void)state;
	const size_t pg = (size_t)sysconf(_SC_PAGESIZE), np = 40;
	static uint8_t src[96 * 1024], dst[96 * 1024];
	const int modes[2] = {0, FI_MR_VIRT_ADDR};
	struct fx_env e;
	struct fid_mr *mr;
	uint64_t one = 1, old = 0;
	int ctx;

	/* promised FI_MR_ALLOCATED: refused, as is a range that wraps */
	rma_open(&e, FI_MR_ALLOCATED);
	assert_int_equal(fi_mr_reg(e.domain, NULL, UINTPTR_MAX, FI_REMOTE_WRITE, 0, 5, 0, &mr, NULL),
			 -FI_EINVAL);
	fx_close(&e);

	for (int m = 0; m < 2; m++) {
		uint8_t *a = mmap(NULL, np * pg, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		uint8_t *hole = a + 20 * pg, *ro = a + 30 * pg;
		uint64_t base = (uint64_t)(uintptr_t)a;

		assert_ptr_not_equal(a, MAP_FAILED);
		assert_int_equal(munmap(hole, pg), 0);
		assert_int_equal(mprotect(ro, pg, PROT_READ), 0);
		rma_open(&e, modes[m]);
		assert_int_equal(fi_mr_reg(e.domain, a + 16, UINTPTR_MAX, FI_REMOTE_WRITE, 0, 4, 0,
					   &mr, NULL),
				 -FI_EINVAL);
		assert_int_equal(fi_mr_reg(e.domain, NULL, UINTPTR_MAX,
					   FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 5, 0, &mr, NULL),
				 0);
		memset(a, 0x5a, 20 * pg);
		/* mapped: small, a page crossing, and large (chunks, CMA) */
		for (size_t len = 8; len <= sizeof(src); len *= 4) {
			fill(src, len, (unsigned)len);
			assert_int_equal(fi_write(e.ep, src, len, NULL, e.self, base + 100, 5, &ctx), 0);
			assert_int_equal(rma_wait(&e, &ctx, NULL), 0);
			assert_memory_equal(a + 100, src, len);
			memset(dst, 0, len);
			assert_int_equal(fi_read(e.ep, dst, len, NULL, e.self, base + 100, 5, &ctx), 0);
			assert_int_equal(rma_wait(&e, &ctx, NULL), 0);
			assert_memory_equal(dst, src, len);
		}
		memset(a, 0x5a, 20 * pg);
		assert_int_equal(fi_atomic(e.ep, &one, 1, NULL, e.self, base + 8 * pg, 5, FI_UINT64,
					   FI_SUM, &ctx),
				 0);
		assert_int_equal(rma_wait(&e, &ctx, NULL), 0);
		assert_int_equal(*(uint64_t *)(a + 8 * pg), 0x5a5a5a5a5a5a5a5bull);
		/* the hole: in it, and writes ending in it, small and large */
		memset(a, 0x5a, 20 * pg);
		fill(src, sizeof(src), 3);
		assert_int_equal(fi_write(e.ep, src, 8, NULL, e.self, base + 20 * pg + 64, 5, &ctx),
				 0);
		assert_int_equal(rma_wait(&e, &ctx, NULL), FI_EFAULT);
		assert_int_equal(fi_read(e.ep, dst, 8, NULL, e.self, base + 20 * pg, 5, &ctx), 0);
		assert_int_equal(rma_wait(&e, &ctx, NULL), FI_EFAULT);
		assert_int_equal(fi_write(e.ep, src, 16, NULL, e.self, base + 20 * pg - 8, 5, &ctx),
				 0);
		assert_int_equal(rma_wait(&e, &ctx, NULL), FI_EFAULT);
		assert_int_equal(fi_fetch_atomic(e.ep, &one, 1, NULL, &old, NULL, e.self,
						 base + 20 * pg + 8, 5, FI_UINT64, FI_SUM, &ctx),
				 0);
		assert_int_equal(rma_wait(&e, &ctx, NULL), FI_EFAULT);
		/* these refusals wrote nothing before the hole */
		for (size_t i = 16 * pg; i < 20 * pg; i++)
			assert_int_equal(a[i], 0x5a);
		/* large ones fail too (what came before the hole may be written) */
		assert_int_equal(fi_write(e.ep, src, 3 * pg, NULL, e.self, base + 18 * pg, 5, &ctx),
				 0);
		assert_int_not_equal(rma_wait(&e, &ctx, NULL), 0);
		assert_int_equal(fi_write(e.ep, src, sizeof(src), NULL, e.self, base + 4 * pg, 5,
					 &ctx),
				 0);
		assert_int_not_equal(rma_wait(&e, &ctx, NULL), 0);
		/* a read-only page: read, never written */
		assert_int_equal(fi_read(e.ep, dst, 8, NULL, e.self, base + 30 * pg, 5, &ctx), 0);
		assert_int_equal(rma_wait(&e, &ctx, NULL), 0);
		assert_int_equal(fi_write(e.ep, src, 8, NULL, e.self, base + 30 * pg, 5, &ctx), 0);
		assert_int_equal(rma_wait(&e, &ctx, NULL), FI_EFAULT);
		assert_int_equal(fi_atomic(e.ep, &one, 1, NULL, e.self, base + 30 * pg, 5, FI_UINT64,
					   FI_SUM, &ctx),
				 0);
		assert_int_equal(rma_wait(&e, &ctx, NULL), FI_EFAULT);
		/* and the endpoint still works */
		assert_int_equal(fi_write(e.ep, src, 8, NULL, e.self, base, 5, &ctx), 0);
		assert_int_equal(rma_wait(&e, &ctx, NULL), 0);
		assert_memory_equal(a, src, 8);
		fi_close(&mr->fid);
		fx_close(&e);
		munmap(a, np * pg);
	}
}

/* Many operations in flight at once, more than the window. */
static void test_rma_many(void **state)
{
	(void)state;
	struct fx_env e;
	struct fid_mr *mr;
	enum { N = 300 };
	static uint64_t tgt[N], src[N];
	int ctx[N];
	int done = 0;

	rma_open(&e, 0);
	assert_int_equal(fi_mr_reg(e.domain, tgt, sizeof(tgt), FI_REMOTE_WRITE, 0, 5, 0, &mr, NULL),
			 0);
	for (int i = 0; i < N; i++) {
		src[i] = 0x1234567800000000ULL + (uint64_t)i;
		ssize_t rc;
		while ((rc = fi_write(e.ep, &src[i], 8, NULL, e.self, (uint64_t)i * 8, 5, &ctx[i])) ==
		       -FI_EAGAIN) {
			struct fi_cq_data_entry c;
			if (fi_cq_read(e.cq, &c, 1) == 1)
				done++;
		}
		assert_int_equal(rc, 0);
	}
	for (int k = 0; k < 10000000 && done < N; k++) {
		struct fi_cq_data_entry c;
		if (fi_cq_read(e.cq, &c, 1) == 1)
			done++;
	}
	assert_int_equal(done, N);
	assert_memory_equal(tgt, src, sizeof(src));
	fi_close(&mr->fid);
	fx_close(&e);
}

/* FI_FENCE: refused while earlier one-sided operations are outstanding,
 * accepted once they completed; the fenced read sees the earlier write. */
static void test_rma_fence(void **state)
{
	DIRECT_OFF();
	(void)state;
	struct fx_env e;
	struct fid_mr *mr;
	size_t len = 4u << 20;
	uint8_t *tgt = calloc(1, len), *src = malloc(len), *dst = calloc(1, len);
	size_t cma = opx_env.rma_cma;
	int c1, c2;

	/* chunks: a CMA write is served within one progress pass */
	opx_env.rma_cma = 0;
	assert_non_null(tgt);
	assert_non_null(src);
	assert_non_null(dst);
	rma_open(&e, 0);
	assert_int_equal(fi_mr_reg(e.domain, tgt, len, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 4, 0,
				   &mr, NULL),
			 0);
	fill(src, len, 3);
	assert_int_equal(fi_write(e.ep, src, len, NULL, e.self, 0, 4, &c1), 0);
	struct iovec v = {dst, len};
	struct fi_rma_iov r = {.addr = 0, .len = len, .key = 4};
	struct fi_msg_rma m = {.msg_iov = &v, .iov_count = 1, .addr = e.self, .rma_iov = &r,
			       .rma_iov_count = 1, .context = &c2};
	/* 512 chunks, at most 64 unanswered: one progress pass cannot finish it */
	assert_int_equal(fi_readmsg(e.ep, &m, FI_FENCE | FI_COMPLETION), -FI_EAGAIN);
	assert_int_equal(rma_wait(&e, &c1, NULL), 0);
	assert_int_equal(fi_readmsg(e.ep, &m, FI_FENCE | FI_COMPLETION), 0);
	assert_int_equal(rma_wait(&e, &c2, NULL), 0);
	assert_memory_equal(dst, src, len);
	fi_close(&mr->fid);
	fx_close(&e);
	free(tgt);
	free(src);
	free(dst);
	opx_env.rma_cma = cma;
	DIRECT_RESTORE();
}

/* What the initiator learnt about CMA with the loopback address. */
static void test_rma_event(void **state)
{
	(void)state;
	struct fx_env e;
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC};
	struct fid_cntr *rw, *rr, *mc;
	struct fid_mr *mr, *other;
	static uint8_t tgt[64 * 1024], buf[64 * 1024], t2[64];
	uint64_t one = 1, res;
	int ctx;

	rma_open(&e, 0);
	assert_int_equal(fi_cntr_open(e.domain, &ca, &rw, NULL), 0);
	assert_int_equal(fi_cntr_open(e.domain, &ca, &rr, NULL), 0);
	assert_int_equal(fi_cntr_open(e.domain, &ca, &mc, NULL), 0);
	/* the loopback endpoint is already enabled: binding must refuse */
	assert_int_equal(fi_ep_bind(e.ep, &rw->fid, FI_REMOTE_WRITE), -FI_EOPBADSTATE);
	assert_int_equal(fi_close(&rw->fid), 0);
	assert_int_equal(fi_close(&rr->fid), 0);
	assert_int_equal(fi_close(&mc->fid), 0);
	fx_close(&e);

	/* again, binding the remote counters before enabling */
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE};
	char addr[64];
	size_t addrlen = sizeof(addr);

	memset(&e, 0, sizeof(e));
	assert_int_equal(fx_getinfo(NULL, FI_RMA | FI_ATOMIC | FI_RMA_EVENT, &e.info), 0);
	assert_true(e.info->caps & FI_RMA_EVENT);
	assert_int_equal(fx_prov()->fabric(e.info->fabric_attr, &e.fabric, NULL), 0);
	assert_int_equal(fi_domain(e.fabric, e.info, &e.domain, NULL), 0);
	assert_int_equal(fi_av_open(e.domain, &av_attr, &e.av, NULL), 0);
	assert_int_equal(fi_cq_open(e.domain, &cq_attr, &e.cq, NULL), 0);
	assert_int_equal(fi_cntr_open(e.domain, &ca, &rw, NULL), 0);
	assert_int_equal(fi_cntr_open(e.domain, &ca, &rr, NULL), 0);
	assert_int_equal(fi_cntr_open(e.domain, &ca, &mc, NULL), 0);
	assert_int_equal(fi_endpoint(e.domain, e.info, &e.ep, NULL), 0);
	assert_int_equal(fi_ep_bind(e.ep, &e.av->fid, 0), 0);
	assert_int_equal(fi_ep_bind(e.ep, &e.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	assert_int_equal(fi_ep_bind(e.ep, &rw->fid, FI_REMOTE_WRITE), 0);
	assert_int_equal(fi_ep_bind(e.ep, &rr->fid, FI_REMOTE_READ), 0);
	assert_int_equal(fi_ep_bind(e.ep, &rw->fid, FI_REMOTE_WRITE), -FI_EINVAL);
	assert_int_equal(fi_enable(e.ep), 0);
	assert_int_equal(fi_getname(&e.ep->fid, addr, &addrlen), 0);
	assert_int_equal(fi_av_insert(e.av, addr, 1, &e.self, 0, NULL), 1);

	assert_int_equal(fi_mr_reg(e.domain, tgt, sizeof(tgt), FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
				   1, 0, &mr, NULL),
			 0);
	assert_int_equal(fi_mr_reg(e.domain, t2, sizeof(t2), FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 2,
				   0, &other, NULL),
			 0);
	assert_int_equal(fi_mr_bind(mr, &mc->fid, FI_REMOTE_WRITE), 0);
	assert_int_equal(fi_mr_bind(mr, &mc->fid, FI_SEND), -FI_EBADFLAGS);
	assert_int_equal(fi_mr_enable(mr), 0);
	/* a multi-chunk write counts once */
	assert_int_equal(fi_write(e.ep, buf, sizeof(buf), NULL, e.self, 0, 1, &ctx), 0);
	assert_int_equal(rma_wait(&e, &ctx, NULL), 0);
	assert_int_equal(fi_read(e.ep, buf, sizeof(buf), NULL, e.self, 0, 1, &ctx), 0);
	assert_int_equal(rma_wait(&e, &ctx, NULL), 0);
	assert_int_equal(fi_atomic(e.ep, &one, 1, NULL, e.self, 0, 1, FI_UINT64, FI_SUM, &ctx), 0);
	assert_int_equal(rma_wait(&e, &ctx, NULL), 0);
	assert_int_equal(fi_fetch_atomic(e.ep, NULL, 1, NULL, &res, NULL, e.self, 0, 1, FI_UINT64,
					 FI_ATOMIC_READ, &ctx),
			 0);
	assert_int_equal(rma_wait(&e, &ctx, NULL), 0);
	assert_int_equal(res, 1);
	/* another region: the endpoint counts it, the first region's does not */
	assert_int_equal(fi_write(e.ep, buf, 8, NULL, e.self, 0, 2, &ctx), 0);
	assert_int_equal(rma_wait(&e, &ctx, NULL), 0);
	/* refused: counted nowhere */
	assert_int_equal(fi_write(e.ep, buf, 8, NULL, e.self, 1 << 20, 1, &ctx), 0);
	assert_int_equal(rma_wait(&e, &ctx, NULL), FI_EINVAL);
	assert_int_equal(fi_cntr_wait(rw, 3, 5000), 0);
	assert_int_equal(fi_cntr_read(rw), 3);
	assert_int_equal(fi_cntr_read(rr), 2);
	assert_int_equal(fi_cntr_read(mc), 2);
	/* the counter is in use while the region is bound to it */
	assert_int_equal(fi_close(&mc->fid), -FI_EBUSY);
	fi_close(&mr->fid);
	fi_close(&other->fid);
	fi_close(&e.ep->fid);
	e.ep = NULL;
	assert_int_equal(fi_close(&mc->fid), 0);
	fi_close(&rw->fid);
	fi_close(&rr->fid);
	fx_close(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mr_keys_hash),
		cmocka_unit_test(test_mr_prov_keys),
		cmocka_unit_test(test_mr_resolve),
		cmocka_unit_test(test_rma_sweep_offset),
		cmocka_unit_test(test_rma_sweep_virt),
		cmocka_unit_test(test_rma_refused),
		cmocka_unit_test(test_mr_whole_space),
		cmocka_unit_test(test_rma_many),
		cmocka_unit_test(test_rma_event),
		cmocka_unit_test(test_rma_fence),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
