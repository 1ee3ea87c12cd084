/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_rma.c - memory-region keys and RMA through a loopback endpoint
 * (the endpoint is initiator and target: its own progress answers its
 * requests).  Sizes are swept around the inline, MTU and chunk limits;
 * every transfer is checked byte for byte, and every refused access is
 * checked to leave the target's memory unchanged.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fi_rma.h>

#include "fixture.h"
#include "opx_ep.h"
#include "opx_rma.h"

struct rma_env {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_cntr *wcntr, *rcntr;
	struct fid_ep *ep;
	fi_addr_t self;
};

static void rma_close(struct rma_env *e)
{
	if (e->ep)
		fi_close(&e->ep->fid);
	if (e->wcntr)
		fi_close(&e->wcntr->fid);
	if (e->rcntr)
		fi_close(&e->rcntr->fid);
	if (e->cq)
		fi_close(&e->cq->fid);
	if (e->av)
		fi_close(&e->av->fid);
	if (e->domain)
		fi_close(&e->domain->fid);
	if (e->fabric)
		fi_close(&e->fabric->fid);
	if (e->info)
		fi_freeinfo(e->info);
	memset(e, 0, sizeof(*e));
}

/* Loopback endpoint on a domain opened with mr_mode. */
static void rma_open(struct rma_env *e, int mr_mode)
{
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE};
	struct fi_cntr_attr cntr_attr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
	char addr[64];
	size_t addrlen = sizeof(addr);

	memset(e, 0, sizeof(*e));
	assert_int_equal(fx_getinfo(NULL, FI_RMA | FI_TAGGED, &e->info), 0);
	assert_true(e->info->caps & FI_RMA);
	assert_true(e->info->caps & FI_REMOTE_WRITE);
	e->info->domain_attr->mr_mode = mr_mode;
	assert_int_equal(fx_prov()->fabric(e->info->fabric_attr, &e->fabric, NULL), 0);
	assert_int_equal(fi_domain(e->fabric, e->info, &e->domain, NULL), 0);
	assert_int_equal(fi_av_open(e->domain, &av_attr, &e->av, NULL), 0);
	assert_int_equal(fi_cq_open(e->domain, &cq_attr, &e->cq, NULL), 0);
	assert_int_equal(fi_cntr_open(e->domain, &cntr_attr, &e->wcntr, NULL), 0);
	assert_int_equal(fi_cntr_open(e->domain, &cntr_attr, &e->rcntr, NULL), 0);
	assert_int_equal(fi_endpoint(e->domain, e->info, &e->ep, NULL), 0);
	assert_int_equal(fi_ep_bind(e->ep, &e->av->fid, 0), 0);
	assert_int_equal(fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV), 0);
	assert_int_equal(fi_ep_bind(e->ep, &e->wcntr->fid, FI_WRITE), 0);
	assert_int_equal(fi_ep_bind(e->ep, &e->rcntr->fid, FI_READ), 0);
	assert_int_equal(fi_enable(e->ep), 0);
	assert_int_equal(fi_getname(&e->ep->fid, addr, &addrlen), 0);
	assert_int_equal(fi_av_insert(e->av, addr, 1, &e->self, 0, NULL), 1);
}

/* The tests of the target-driven protocols (chunks, the target's CMA)
 * turn the initiator's direct copies off (test_rgn.c tests those); the
 * sweeps run with them as configured. */
#define DIRECT_OFF()                                                                               \
	size_t direct_w = opx_env.rma_direct_write, direct_r = opx_env.rma_direct_read;            \
	opx_env.rma_direct_write = opx_env.rma_direct_read = 0
#define DIRECT_RESTORE()                                                                           \
	(opx_env.rma_direct_write = direct_w, opx_env.rma_direct_read = direct_r)

/* Wait for one completion (or error) with context ctx; returns 0 or the
 * positive error code.  Remote-CQ-data entries met on the way are
 * stored in *rdata (if not NULL). */
static int rma_wait(struct rma_env *e, void *ctx, struct fi_cq_data_entry *rdata)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct fi_cq_data_entry c;
		ssize_t n = fi_cq_read(e->cq, &c, 1);

		if (n == 1) {
			if (c.flags & FI_REMOTE_CQ_DATA) {
				if (rdata)
					*rdata = c;
				continue;
			}
			assert_ptr_equal(c.op_context, ctx);
			return 0;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			assert_int_equal(fi_cq_readerr(e->cq, &err, 0), 1);
			assert_ptr_equal(err.op_context, ctx);
			return err.err;
		}
		assert_int_equal(n, -FI_EAGAIN);
		clock_gettime(CLOCK_MONOTONIC, &t);
		assert_true(t.tv_sec - t0.tv_sec < 20);
	}
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}

/* ---------------------------------------------------------------------
 * Keys.
 */
static void test_mr_keys_hash(void **state)
{
	(void)state;
	struct rma_env e;
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
		assert_ptr_equal(opx_mr_find_locked(d, (uint64_t)i << 12), fi_mr_desc(mr[i]));
	assert_null(opx_mr_find_locked(d, 1));
	for (int i = 0; i < N; i += 2)
		assert_int_equal(fi_close(&mr[i]->fid), 0);
	for (int i = 0; i < N; i++) {
		if (i % 2)
			assert_ptr_equal(opx_mr_find_locked(d, (uint64_t)i << 12), fi_mr_desc(mr[i]));
		else
			assert_null(opx_mr_find_locked(d, (uint64_t)i << 12));
	}
	for (int i = 1; i < N; i += 2)
		assert_int_equal(fi_close(&mr[i]->fid), 0);
	rma_close(&e);
}

static void test_mr_prov_keys(void **state)
{
	(void)state;
	struct rma_env e;
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
	rma_close(&e);
}

static void test_mr_resolve(void **state)
{
	(void)state;
	struct rma_env e;
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
	assert_int_equal(opx_mr_resolve_locked(d, 9, 90, 20, FI_REMOTE_READ, out, &n, NULL), 0);
	assert_int_equal(n, 2);
	assert_ptr_equal(out[0].iov_base, buf + 90);
	assert_int_equal(out[0].iov_len, 10);
	assert_ptr_equal(out[1].iov_base, buf + 128);
	assert_int_equal(out[1].iov_len, 10);
	assert_int_equal(opx_mr_resolve_locked(d, 9, 0, 200, FI_REMOTE_READ, out, &n, NULL), 0);
	assert_int_equal(opx_mr_resolve_locked(d, 9, 200, 0, FI_REMOTE_READ, out, &n, NULL), 0);
	assert_int_equal(opx_mr_resolve_locked(d, 9, 1, 200, FI_REMOTE_READ, out, &n, NULL), -FI_EINVAL);
	assert_int_equal(opx_mr_resolve_locked(d, 9, 201, 0, FI_REMOTE_READ, out, &n, NULL), -FI_EINVAL);
	assert_int_equal(opx_mr_resolve_locked(d, 9, UINT64_MAX, 2, FI_REMOTE_READ, out, &n, NULL),
			 -FI_EINVAL);
	assert_int_equal(opx_mr_resolve_locked(d, 9, 8, SIZE_MAX, FI_REMOTE_READ, out, &n, NULL),
			 -FI_EINVAL);
	assert_int_equal(opx_mr_resolve_locked(d, 9, 0, 8, FI_REMOTE_WRITE, out, &n, NULL), -FI_EACCES);
	assert_int_equal(opx_mr_resolve_locked(d, 10, 0, 8, FI_REMOTE_READ, out, &n, NULL), -FI_EACCES);
	fi_close(&mr->fid);
	assert_int_equal(opx_mr_resolve_locked(d, 9, 0, 8, FI_REMOTE_READ, out, &n, NULL), -FI_EACCES);
	rma_close(&e);

	/* virtual addresses */
	rma_open(&e, FI_MR_VIRT_ADDR);
	d = OPX_CONTAINER_OF(e.domain, struct opx_domain, domain_fid);
	assert_int_equal(fi_mr_reg(e.domain, buf + 16, 64, FI_REMOTE_WRITE, 0, 3, 0, &mr, NULL), 0);
	assert_int_equal(opx_mr_resolve_locked(d, 3, (uint64_t)(uintptr_t)(buf + 20), 60,
					       FI_REMOTE_WRITE, out, &n, NULL),
			 0);
	assert_ptr_equal(out[0].iov_base, buf + 20);
	assert_int_equal(opx_mr_resolve_locked(d, 3, (uint64_t)(uintptr_t)(buf + 15), 1,
					       FI_REMOTE_WRITE, out, &n, NULL),
			 -FI_EINVAL);
	assert_int_equal(opx_mr_resolve_locked(d, 3, (uint64_t)(uintptr_t)(buf + 20), 61,
					       FI_REMOTE_WRITE, out, &n, NULL),
			 -FI_EINVAL);
	assert_int_equal(opx_mr_resolve_locked(d, 3, 4, 1, FI_REMOTE_WRITE, out, &n, NULL), -FI_EINVAL);
	fi_close(&mr->fid);
	rma_close(&e);
}

/* ---------------------------------------------------------------------
 * Data path, loopback.
 */
static void rma_sweep(int mr_mode)
{
	struct rma_env e;
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
	rma_close(&e);
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
	struct rma_env e;
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
	rma_close(&e);
}

/* Many operations in flight at once, more than the window. */
static void test_rma_many(void **state)
{
	(void)state;
	struct rma_env e;
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
	rma_close(&e);
}

/* FI_FENCE: refused while earlier one-sided operations are outstanding,
 * accepted once they completed; the fenced read sees the earlier write. */
static void test_rma_fence(void **state)
{
	DIRECT_OFF();
	(void)state;
	struct rma_env e;
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
	rma_close(&e);
	free(tgt);
	free(src);
	free(dst);
	opx_env.rma_cma = cma;
	DIRECT_RESTORE();
}

/* What the initiator learnt about CMA with the loopback address. */
static int rma_cma_state(struct rma_env *e)
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
	struct rma_env e;
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
		rma_close(&e);

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
		rma_close(&e);
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
		struct rma_env e;
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
		rma_close(&e);
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
	struct rma_env e;
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
		uint64_t before = opx_ep_drops(ep, OPX_DROP_PROTO);

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
		opx_hdr_init(&ent->hdr, ep, peer, OPX_OP_RMA_WRITE, OPX_PF_CMA, paylen,
			     (uint32_t)sizeof(src), 0, 0);
		ent->hdr.p.u64[0] = 8;
		ent->hdr.p.u64[1] = 12345 | (1ULL << 63);
		shim_pio_publish(peer, &r, 0, shim_rhf_egr(peer, &r, 0));
		for (int k = 0; k < 10; k++)
			(void)fi_cq_read(e.cq, NULL, 0);
		/* the request, then the answer to it that nobody asked for */
		if (opx_ep_drops(ep, OPX_DROP_PROTO) < before + 2)
			fail_msg("forged CMA request %d was not dropped", c);
		if (memcmp(tgt, ref, sizeof(tgt)))
			fail_msg("forged CMA request %d changed the region", c);
	}
	fi_close(&mr->fid);
	shim_peer_close(peer);
	rma_close(&e);
	DIRECT_RESTORE();
}

/* FI_RMA_EVENT: remote counters on the endpoint and on a region. */
static void test_rma_event(void **state)
{
	(void)state;
	struct rma_env e;
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
	rma_close(&e);

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
	rma_close(&e);
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
		cmocka_unit_test(test_rma_many),
		cmocka_unit_test(test_rma_event),
		cmocka_unit_test(test_rma_fence),
		cmocka_unit_test(test_rma_cma),
		cmocka_unit_test(test_rma_cma_pipeline),
		cmocka_unit_test(test_rma_cma_forged),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
