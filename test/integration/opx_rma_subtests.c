/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rma_subtests.c - what the initiators of opx_rma_test run against
 * the target (see opx_rma_test.c for the harness and the target's side,
 * opx_rma_test.h for what they share).  Child 0 runs them all in this
 * order, every child runs hammer():
 *   - sweep: write/read/writev/readv/writedata 0 B .. 64 MiB around every
 *     threshold, the target checking its memory after each write;
 *   - atomics: every op x datatype x call against a reference computed
 *     here; atomics_max: the largest count fi_*atomicvalid allows;
 *   - inject_window: an fi_inject_write behind a window the stalled
 *     target keeps full, its buffer overwritten at once;
 *   - refused: bad key, out of range, missing access, closed key: error
 *     completions, the target's memory unchanged;
 *   - hammer: concurrent fetch-add and compare-swap increments.
 */
#include <complex.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "atomic_ref.h"
#include "opx_rma_test.h"

void sweep(void)
{
	static const size_t base_sizes[] = {0, 1, 7, 8, 15, 16, 17, 63, 64, 65};
	static const size_t pts[] = {4096, 8192, 16384, 65536, 131072, 262144, 1u << 20, 16u << 20};
	size_t sizes[64], ns = 0;
	uint8_t *src = malloc(BIG + BIG_PAD), *dst = malloc(BIG + BIG_PAD);
	int ctx;

	if (!src || !dst)
		DIE("malloc");
	for (size_t i = 0; i < sizeof(base_sizes) / sizeof(base_sizes[0]); i++)
		sizes[ns++] = base_sizes[i];
	for (size_t i = 0; i < sizeof(pts) / sizeof(pts[0]); i++) {
		sizes[ns++] = pts[i] - 1;
		sizes[ns++] = pts[i];
		sizes[ns++] = pts[i] + 1;
	}
	sizes[ns++] = BIG;
	for (size_t i = 0; i < ns; i++) {
		size_t len = sizes[i], off = len == BIG ? 0 : (i * 13) % 256;
		uint32_t seed = (uint32_t)(i * 3 + 1);
		uint64_t ra = su.base[R_BIG] + off;

		/* contiguous write, checked at the target, read back */
		fill(src, len, seed);
		POST(fi_write(me.ep, src, len, NULL, tgt, ra, su.key[R_BIG], &ctx));
		expect_err(wait_comp(&ctx), 0, "write");
		if (ask((struct cmd){.op = 'V', .seed = seed, .off = off, .len = len}) != 'k')
			DIE("target memory wrong after a %zu-byte write at %zu", len, off);
		memset(dst, 0, len + 1);
		POST(fi_read(me.ep, dst, len, NULL, tgt, ra, su.key[R_BIG], &ctx));
		expect_err(wait_comp(&ctx), 0, "read");
		if (memcmp(dst, src, len) || dst[len] != 0)
			DIE("read of %zu bytes at %zu differs", len, off);

		/* three-piece writev, two-piece readv */
		seed += 1000;
		fill(src, len, seed);
		struct iovec w[3] = {{src, len / 3}, {src + len / 3, len / 3},
				     {src + 2 * (len / 3), len - 2 * (len / 3)}};
		struct iovec r[2] = {{dst, len / 2}, {dst + len / 2, len - len / 2}};
		POST(fi_writev(me.ep, w, NULL, 3, tgt, ra, su.key[R_BIG], &ctx));
		expect_err(wait_comp(&ctx), 0, "writev");
		if (ask((struct cmd){.op = 'V', .seed = seed, .off = off, .len = len}) != 'k')
			DIE("target memory wrong after a %zu-byte writev", len);
		memset(dst, 0, len);
		POST(fi_readv(me.ep, r, NULL, 2, tgt, ra, su.key[R_BIG], &ctx));
		expect_err(wait_comp(&ctx), 0, "readv");
		if (memcmp(dst, src, len))
			DIE("readv of %zu bytes differs", len);

		/* writedata: data checked at the target (in order) */
		if (len <= (1u << 20) + 1) {
			seed += 1000;
			fill(src, len, seed);
			POST(fi_writedata(me.ep, src, len, NULL, 0xD000 + ndata, tgt, ra,
					  su.key[R_BIG], &ctx));
			expect_err(wait_comp(&ctx), 0, "writedata");
			ndata++;
			if (ask((struct cmd){.op = 'V', .seed = seed, .off = off, .len = len}) != 'k')
				DIE("target memory wrong after a %zu-byte writedata", len);
		}
	}
	free(src);
	free(dst);
	printf("[%d] sweep: %zu sizes 0 .. %u B, write/read/writev/readv/writedata ok\n",
	       (int)getpid(), ns, BIG);
}

/* ---- atomics: against the reference model (test/common/atomic_ref.h) ---- */
void atomics(void)
{
	int ctx, n = 0;
	uint64_t ra = su.base[R_ATOM] + 64; /* 0..63: the shared counters */

	for (int dt = 0; dt < FI_DATATYPE_LAST; dt++) {
		for (int op = 0; op < FI_ATOMIC_OP_LAST; op++) {
			for (int k = 0; k < 3; k++) {
				uint8_t init[NEL * 32], s[NEL * 32], c[NEL * 32], r[NEL * 32],
					back[NEL * 32];
				size_t cnt = 0, bytes = NEL * ref_size(dt);
				int v = k == 0   ? fi_atomicvalid(me.ep, dt, op, &cnt)
					: k == 1 ? fi_fetch_atomicvalid(me.ep, dt, op, &cnt)
						 : fi_compare_atomicvalid(me.ep, dt, op, &cnt);

				if ((v == 0) != ref_valid(k, op, dt))
					DIE("valid(kind %d op %d dt %d) = %d", k, op, dt, v);
				if (v)
					continue;
				for (int i = 0; i < NEL; i++) {
					ref_put(dt, init, i, V_D[i]);
					ref_put(dt, s, i, V_S[i]);
					ref_put(dt, c, i, V_C[i]);
				}
				POST(fi_write(me.ep, init, bytes, NULL, tgt, ra, su.key[R_ATOM], &ctx));
				expect_err(wait_comp(&ctx), 0, "atomic setup write");
				if (k == 0)
					POST(fi_atomic(me.ep, s, NEL, NULL, tgt, ra, su.key[R_ATOM], dt,
						       op, &ctx));
				else if (k == 1)
					POST(fi_fetch_atomic(me.ep, s, NEL, NULL, r, NULL, tgt, ra,
							     su.key[R_ATOM], dt, op, &ctx));
				else
					POST(fi_compare_atomic(me.ep, s, NEL, NULL, c, NULL, r, NULL,
							       tgt, ra, su.key[R_ATOM], dt, op,
							       &ctx));
				expect_err(wait_comp(&ctx), 0, "atomic");
				POST(fi_read(me.ep, back, bytes, NULL, tgt, ra, su.key[R_ATOM], &ctx));
				expect_err(wait_comp(&ctx), 0, "atomic read back");
				for (int i = 0; i < NEL; i++) {
					if (!ref_same(dt, back, i, ref_op(op, V_D[i], V_S[i], V_C[i])))
						DIE("kind %d op %d dt %d element %d: target wrong", k,
						    op, dt, i);
					if (k && !ref_same(dt, r, i, V_D[i]))
						DIE("kind %d op %d dt %d element %d: fetched wrong", k,
						    op, dt, i);
				}
				n++;
			}
		}
	}
	printf("[%d] atomics: %d op x datatype x call combinations ok\n", (int)getpid(), n);
}

/* The largest count fi_*atomicvalid allows, for each kind of call: what
 * one call may carry must arrive whole on every wire (a udp path's
 * datagrams may be smaller than the provider's MTU). */
void atomics_max(void)
{
	uint64_t ra = su.base[R_BIG];
	int ctx;

	for (int k = 0; k < 3; k++) {
		int op = k == 2 ? FI_CSWAP : FI_SUM;
		size_t cnt = 0;
		int v = k == 0   ? fi_atomicvalid(me.ep, FI_UINT64, op, &cnt)
			: k == 1 ? fi_fetch_atomicvalid(me.ep, FI_UINT64, op, &cnt)
				 : fi_compare_atomicvalid(me.ep, FI_UINT64, op, &cnt);
		size_t bytes = cnt * sizeof(uint64_t);
		uint64_t *d = malloc(bytes), *sv = malloc(bytes), *c = malloc(bytes),
			 *r = malloc(bytes), *back = malloc(bytes);

		if (v || !cnt || !d || !sv || !c || !r || !back)
			DIE("kind %d: valid %d count %zu", k, v, cnt);
		for (size_t i = 0; i < cnt; i++) {
			d[i] = i * 3;
			sv[i] = 1000000 + i;
			c[i] = i % 3 ? d[i] : ~d[i]; /* two in three compare equal */
		}
		POST(fi_write(me.ep, d, bytes, NULL, tgt, ra, su.key[R_BIG], &ctx));
		expect_err(wait_comp(&ctx), 0, "max atomic setup write");
		memset(r, 0xee, bytes);
		if (k == 0)
			POST(fi_atomic(me.ep, sv, cnt, NULL, tgt, ra, su.key[R_BIG], FI_UINT64, op,
				       &ctx));
		else if (k == 1)
			POST(fi_fetch_atomic(me.ep, sv, cnt, NULL, r, NULL, tgt, ra, su.key[R_BIG],
					     FI_UINT64, op, &ctx));
		else
			POST(fi_compare_atomic(me.ep, sv, cnt, NULL, c, NULL, r, NULL, tgt, ra,
					       su.key[R_BIG], FI_UINT64, op, &ctx));
		expect_err(wait_comp(&ctx), 0, "max-count atomic");
		POST(fi_read(me.ep, back, bytes, NULL, tgt, ra, su.key[R_BIG], &ctx));
		expect_err(wait_comp(&ctx), 0, "max atomic read back");
		for (size_t i = 0; i < cnt; i++) {
			uint64_t want = k == 2 ? (c[i] == d[i] ? sv[i] : d[i]) : d[i] + sv[i];

			if (back[i] != want)
				DIE("kind %d, %zu elements: element %zu is %llu, want %llu", k,
				    cnt, i, (unsigned long long)back[i], (unsigned long long)want);
			if (k && r[i] != d[i])
				DIE("kind %d, %zu elements: fetched %zu wrong", k, cnt, i);
		}
		printf("[%d] atomics: %s of %zu uint64 ok\n", (int)getpid(),
		       k == 0 ? "atomic" : k == 1 ? "fetch" : "compare", cnt);
		free(d);
		free(sv);
		free(c);
		free(r);
		free(back);
	}
}

/* fi_inject_write returns before the data is sent, and the buffer is the
 * caller's again at once, even when the operation needs several chunks
 * (a udp path's MTU is smaller than inject_size) and the window is
 * nearly full: the target stalls while 60 one-chunk writes fill it, so
 * the inject cannot leave whole; the buffer is overwritten right after
 * the call, then read back. */
void inject_window(void)
{
	enum { NW = 60 };
	static uint8_t small[64], buf[8192], back[8192];
	size_t len = me.info->tx_attr->inject_size < sizeof(buf) ? me.info->tx_attr->inject_size
								  : sizeof(buf);
	uint64_t ra = su.base[R_BIG] + (1u << 20); /* the sweep is over: free */
	int ctx[NW], rctx, got = 0;
	bool seen[NW] = {false};

	fill(buf, len, 901);
	if (ask((struct cmd){.op = 'S'}) != 'k')
		DIE("target did not stall");
	for (int i = 0; i < NW; i++)
		POST(fi_write(me.ep, small, sizeof(small), NULL, tgt, su.base[R_BIG], su.key[R_BIG],
			      &ctx[i]));
	POST(fi_inject_write(me.ep, buf, len, tgt, ra, su.key[R_BIG]));
	memset(buf, 0xa5, len);
	while (got < NW) {
		struct fi_cq_data_entry c;
		ssize_t n = fi_cq_read(me.cq, &c, 1);

		if (n == 1) {
			int i = (int)((int *)c.op_context - ctx);

			if (i < 0 || i >= NW || seen[i])
				DIE("unexpected completion %p", c.op_context);
			seen[i] = true;
			got++;
		} else if (n != -FI_EAGAIN) {
			DIE("fi_cq_read %zd while filling the window", n);
		}
		check_deadline();
	}
	/* read after write: executed after the inject's last chunk */
	POST(fi_read(me.ep, back, len, NULL, tgt, ra, su.key[R_BIG], &rctx));
	expect_err(wait_comp(&rctx), 0, "read after inject");
	fill(buf, len, 901);
	if (memcmp(back, buf, len))
		DIE("a %zu-byte fi_inject_write behind a full window wrote what the buffer held "
		    "after the call",
		    len);
	printf("[%d] inject: %zu-byte fi_inject_write behind a nearly full window ok\n",
	       (int)getpid(), len);
}

void refused(void)
{
	/* src has one byte more than the regions: the write longer than the
	 * region below must be refused by the target, not read past src */
	static uint8_t src[SMALL + 1], dst[SMALL];
	uint64_t one = 1, res;
	int ctx;

	fill(src, sizeof(src), 77);
	/* bad key */
	POST(fi_write(me.ep, src, 64, NULL, tgt, su.base[R_BIG], su.key[R_BIG] + 1000, &ctx));
	expect_err(wait_comp(&ctx), FI_EACCES, "write with a bad key");
	POST(fi_read(me.ep, dst, 64, NULL, tgt, su.base[R_RO], su.key[R_RO] + 1000, &ctx));
	expect_err(wait_comp(&ctx), FI_EACCES, "read with a bad key");
	/* out of range: straddling the end, past it, below the start */
	POST(fi_write(me.ep, src, 64, NULL, tgt, su.base[R_WO] + SMALL - 32, su.key[R_WO], &ctx));
	expect_err(wait_comp(&ctx), FI_EINVAL, "write straddling the end");
	POST(fi_write(me.ep, src, SMALL + 1, NULL, tgt, su.base[R_WO], su.key[R_WO], &ctx));
	expect_err(wait_comp(&ctx), FI_EINVAL, "write longer than the region");
	POST(fi_read(me.ep, dst, 8, NULL, tgt, su.base[R_RO] + SMALL + 8, su.key[R_RO], &ctx));
	expect_err(wait_comp(&ctx), FI_EINVAL, "read past the end");
	/* large ones (one CMA request, or chunks checked whole at the first) */
	static uint8_t big[1u << 20];
	fill(big, sizeof(big), 79);
	POST(fi_write(me.ep, big, sizeof(big), NULL, tgt,
		      su.base[R_BIG] + BIG + BIG_PAD - sizeof(big) / 2, su.key[R_BIG], &ctx));
	expect_err(wait_comp(&ctx), FI_EINVAL, "large write straddling the end");
	POST(fi_read(me.ep, big, sizeof(big), NULL, tgt,
		     su.base[R_BIG] + BIG + BIG_PAD - sizeof(big) + 1, su.key[R_BIG], &ctx));
	expect_err(wait_comp(&ctx), FI_EINVAL, "large read straddling the end");
	if (virt) {
		POST(fi_write(me.ep, src, 8, NULL, tgt, su.base[R_WO] - 8, su.key[R_WO], &ctx));
		expect_err(wait_comp(&ctx), FI_EINVAL, "write below the start");
	}
	/* missing access */
	POST(fi_write(me.ep, src, 64, NULL, tgt, su.base[R_RO], su.key[R_RO], &ctx));
	expect_err(wait_comp(&ctx), FI_EACCES, "write to a read-only region");
	POST(fi_read(me.ep, dst, 64, NULL, tgt, su.base[R_WO], su.key[R_WO], &ctx));
	expect_err(wait_comp(&ctx), FI_EACCES, "read from a write-only region");
	POST(fi_atomic(me.ep, &one, 1, NULL, tgt, su.base[R_RO], su.key[R_RO], FI_UINT64, FI_SUM,
		       &ctx));
	expect_err(wait_comp(&ctx), FI_EACCES, "atomic on a read-only region");
	POST(fi_fetch_atomic(me.ep, &one, 1, NULL, &res, NULL, tgt, su.base[R_WO], su.key[R_WO],
			     FI_UINT64, FI_SUM, &ctx));
	expect_err(wait_comp(&ctx), FI_EACCES, "fetch atomic on a write-only region");
	/* a large atomic (several chunks where datagrams are small)
	 * straddling the end: refused whole, no element applied */
	static uint64_t ones[1024];
	size_t cnt = 0;
	if (fi_atomicvalid(me.ep, FI_UINT64, FI_SUM, &cnt) || cnt * 8 <= SMALL)
		DIE("atomic count %zu", cnt);
	cnt = cnt > 1024 ? 1024 : cnt;
	for (size_t i = 0; i < cnt; i++)
		ones[i] = 1;
	POST(fi_atomic(me.ep, ones, cnt, NULL, tgt, su.base[R_WO] + 8, su.key[R_WO], FI_UINT64,
		       FI_SUM, &ctx));
	expect_err(wait_comp(&ctx), FI_EINVAL, "large atomic straddling the end");
	if (ask((struct cmd){.op = 'U'}) != 'k')
		DIE("refused operations changed the target's memory");
	/* allowed ones on the same regions work */
	POST(fi_read(me.ep, dst, 64, NULL, tgt, su.base[R_RO], su.key[R_RO], &ctx));
	expect_err(wait_comp(&ctx), 0, "read of the read-only region");
	/* a key closed while we hold it */
	POST(fi_write(me.ep, src, 64, NULL, tgt, su.base[R_DOOMED], su.key[R_DOOMED], &ctx));
	expect_err(wait_comp(&ctx), 0, "write before close");
	if (ask((struct cmd){.op = 'X'}) != 'k')
		DIE("target could not close the region");
	fill(src, sizeof(src), 78);
	POST(fi_write(me.ep, src, 64, NULL, tgt, su.base[R_DOOMED], su.key[R_DOOMED], &ctx));
	expect_err(wait_comp(&ctx), FI_EACCES, "write to a closed key");
	POST(fi_read(me.ep, dst, 64, NULL, tgt, su.base[R_DOOMED], su.key[R_DOOMED], &ctx));
	expect_err(wait_comp(&ctx), FI_EACCES, "read of a closed key");
	if (ask((struct cmd){.op = 'U'}) != 'k')
		DIE("a closed key's region changed");
	printf("[%d] refused: bad key, range, access and closed key give errors, memory unchanged\n",
	       (int)getpid());
}

void hammer(void)
{
	uint64_t one = 1, old, cur = 0, res;
	int ctx, tries = 0;

	for (int i = 0; i < NINC; i++) {
		POST(fi_fetch_atomic(me.ep, &one, 1, NULL, &old, NULL, tgt, su.base[R_ATOM],
				     su.key[R_ATOM], FI_UINT64, FI_SUM, &ctx));
		expect_err(wait_comp(&ctx), 0, "fetch-add");
	}
	for (int i = 0; i < NCAS;) {
		uint64_t next = cur + 1;
		POST(fi_compare_atomic(me.ep, &next, 1, NULL, &cur, NULL, &res, NULL, tgt,
				       su.base[R_ATOM] + 8, su.key[R_ATOM], FI_UINT64, FI_CSWAP,
				       &ctx));
		expect_err(wait_comp(&ctx), 0, "compare-swap");
		if (res == cur)
			i++;
		cur = res == cur ? next : res;
		if (++tries > 1000000)
			DIE("compare-swap never succeeds");
	}
	printf("[%d] hammer: %d fetch-adds, %d compare-swap increments (%d tries)\n", (int)getpid(),
	       NINC, NCAS, tries);
}
