/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_shim.c - unit tests of the driver shim (software SuperNIC, shm
 * wire).  Rings are tiny (64 header entries, 16 KiB eager, 1 KiB MTU) so
 * that every test crosses many laps and hits the credit limits quickly.
 *
 * Contexts are opened on the last unit so that other suites running on
 * the same host (unit 0 by default) do not disturb the context-number
 * assertions.  Every loop is bounded in count and in time.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../driver-shim/shim_internal.h"

#define T_MTU 1024u
#define T_HDRQ 64u
#define T_EGR (16u * 1024u)
#define T_EGR_BLOCKS (T_EGR / SHIM_BLOCK)
#define T_UNITS ((int)SHIM_MAX_UNITS)
#define T_UNIT (T_UNITS - 1)
#define T_JKEY 0x4a4b
#define T_DEADLINE_S 30

#define T_NPROD 4
#define T_NPKT 3000

/* ---------------------------------------------------------------------
 * Helpers
 */
static double t_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint32_t t_rand(uint32_t *s)
{
	/* xorshift32: reproducible sequences without libc state */
	uint32_t x = *s;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*s = x;
	return x;
}

static uint8_t t_pat(uint32_t src, uint32_t seq, uint32_t i)
{
	return (uint8_t)(src * 131u + seq * 7u + i);
}

static struct shim_dev_params t_params(void)
{
	struct shim_dev_params p = {
		.num_units = T_UNITS,
		.force_unit = -1,
		.mtu = T_MTU,
		.hdrq_cnt = T_HDRQ,
		.egr_bytes = T_EGR,
		.jkey = T_JKEY,
	};
	return p;
}

static struct shim_dev *t_dev_open(void)
{
	struct shim_dev_params p = t_params();
	struct shim_dev *dev = NULL;

	assert_int_equal(shim_dev_open(&p, &dev), 0);
	assert_non_null(dev);
	return dev;
}

/* Source whose packets are header-only. */
#define T_SRC_HDR 0xffffu

/* Payload length for packet seq of source src: a mix of empty, inline
 * and eager sizes up to the MTU. */
static uint32_t t_len(uint32_t src, uint32_t seq)
{
	uint32_t v = (src * 2654435761u) ^ (seq * 40503u);

	if (src == T_SRC_HDR)
		return 0;
	switch (v % 4) {
	case 0:
		return v % (SHIM_INLINE_MAX + 1);
	case 1:
		return T_MTU;
	default:
		return (v >> 3) % (T_MTU + 1);
	}
}

static void t_fill_hdr(struct shim_pkt_hdr *h, const struct shim_peer *p, uint32_t src,
		       uint32_t seq, uint32_t len)
{
	memset(h, 0, sizeof(*h));
	h->opcode = 1;
	h->jkey = p->jkey;
	h->dlid = p->lid;
	h->dctx = p->ctx;
	h->paylen = len;
	h->psn = seq;
	h->tag = src;
}

/* Fill and publish entry i of a reservation with the pattern of (src,
 * seq); the payload goes inline when it fits, else at eager offset off. */
static void t_put(struct shim_peer *p, const struct shim_pio_resv *r, uint32_t i, uint32_t off,
		  uint32_t src, uint32_t seq)
{
	struct shim_rhq_entry *e = shim_pio_entry(p, r, i);
	uint32_t len = t_len(src, seq);
	bool inl = len <= SHIM_INLINE_MAX;
	uint8_t *dst = inl ? e->hdr.p.inl : r->egr + off;

	t_fill_hdr(&e->hdr, p, src, seq, len);
	for (uint32_t k = 0; k < len; k++)
		dst[k] = t_pat(src, seq, k);
	shim_pio_publish(p, r, i, inl ? 0 : shim_rhf_egr(p, r, off));
}

/* Send packet seq of src: 0, -EAGAIN or -EMSGSIZE.  No cmocka asserts,
 * so forked children can use it. */
static int t_send(struct shim_peer *p, uint32_t src, uint32_t seq)
{
	uint32_t len = t_len(src, seq);
	struct shim_pio_resv r;
	int ret;

	ret = shim_pio_reserve(p, 1, len <= SHIM_INLINE_MAX ? 0 : len, &r);
	if (!ret)
		t_put(p, &r, 0, 0, src, seq);
	return ret;
}

/* Check one received entry against the pattern; 0 when intact. */
static int t_check(const struct shim_rx *rx, const struct shim_rhq_entry *e, uint32_t *src,
		   uint32_t *seq)
{
	const uint8_t *pl = shim_rx_payload(rx, e);
	uint32_t s = (uint32_t)e->hdr.tag, q = e->hdr.psn;

	if (!pl || e->hdr.jkey != T_JKEY || e->hdr.dctx != rx->ctx)
		return -1;
	if ((e->hdr.paylen > SHIM_INLINE_MAX) != !!(e->rhf & SHIM_RHF_EGR))
		return -1;
	if (e->hdr.paylen != t_len(s, q))
		return -1;
	for (uint32_t i = 0; i < e->hdr.paylen; i++)
		if (pl[i] != t_pat(s, q, i))
			return -1;
	*src = s;
	*seq = q;
	return 0;
}

struct t_pair {
	struct shim_dev *dev;
	struct shim_ctx *ctx;
	struct shim_rx *rx;
	struct shim_addr addr;
	struct shim_peer *peer;
};

static void t_pair_open(struct t_pair *t)
{
	memset(t, 0, sizeof(*t));
	t->dev = t_dev_open();
	assert_int_equal(shim_ctx_open(t->dev, T_UNIT, &t->ctx, NULL, NULL), 0);
	t->rx = shim_ctx_rx(t->ctx);
	assert_ptr_equal((void *)t->rx, (void *)t->ctx);
	shim_ctx_addr(t->ctx, &t->addr);
	assert_int_equal(shim_peer_open(t->dev, &t->addr, &t->peer), 0);
}

static void t_pair_close(struct t_pair *t)
{
	shim_peer_close(t->peer);
	shim_ctx_close(t->ctx);
	shim_dev_close(t->dev);
}

/* Where the next context-number search on T_UNIT starts (normally
 * random per process, then just past the last number taken). */
static void t_cursor(struct shim_dev *dev, unsigned int n)
{
	atomic_store(&dev->ctx_next[T_UNIT], n % SHIM_MAX_CTXTS);
}

static bool t_seg_exists(unsigned int unit, unsigned int ctx)
{
	char name[SHIM_NAME_MAX];
	int fd;

	shim_name_segment(name, sizeof(name), (uint32_t)getuid(), unit, ctx);
	fd = shm_open(name, O_RDONLY, 0);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* Bytes of the mapping that starts at addr that this process has page
 * table entries for (the Rss of its /proc/self/smaps record), or -1. */
static long t_rss(const void *addr)
{
	char line[512];
	unsigned long start, end;
	long kb = -1;
	bool in = false;
	FILE *f = fopen("/proc/self/smaps", "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &start, &end) == 2)
			in = start == (unsigned long)(uintptr_t)addr;
		else if (in && sscanf(line, "Rss: %ld kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb < 0 ? -1 : kb * 1024;
}

/* ---------------------------------------------------------------------
 * Device model
 */
static void test_dev_refcount(void **state)
{
	struct shim_dev *a = t_dev_open(), *b = t_dev_open();
	struct shim_unit_info ui;

	(void)state;
	assert_ptr_equal(a, b);
	assert_int_equal(shim_dev_num_units(a), T_UNITS);
	assert_int_not_equal(shim_dev_host_id(a), 0);
	for (int u = 0; u < T_UNITS; u++) {
		assert_int_equal(shim_dev_unit_info(a, u, &ui), 0);
		assert_int_equal(ui.unit, u);
		assert_int_equal(ui.port, 1);
		assert_int_equal(ui.state, 1);
		assert_int_equal(ui.mtu, T_MTU);
		assert_true(ui.lid > 0 && ui.lid < 0xC000);
		assert_true(ui.numa_node >= 0);
	}
	/* LIDs: distinct between units, and between hosts of one subnet up
	 * to a /16: the low 16 bits of the host's IPv4 address, times the
	 * unit count, plus the unit */
	uint32_t ip = ntohl(shim_host_ipv4());
	for (int u = 0; u < T_UNITS; u++) {
		struct shim_unit_info uj;

		assert_int_equal(shim_dev_unit_info(a, u, &ui), 0);
		for (int v = u + 1; v < T_UNITS; v++) {
			assert_int_equal(shim_dev_unit_info(a, v, &uj), 0);
			assert_int_not_equal(ui.lid, uj.lid);
		}
		if ((ip >> 24) != 127)
			assert_int_equal(ui.lid, 1 + ((ip & 0xffffu) * T_UNITS + (uint32_t)u) % 0xBFFEu);
	}
	assert_int_equal(shim_dev_unit_info(a, T_UNITS, &ui), -EINVAL);
	assert_int_equal(shim_dev_unit_info(a, -1, &ui), -EINVAL);
	assert_int_equal(shim_dev_unit_info(a, 0, NULL), -EINVAL);
	assert_int_equal(shim_dev_num_units(NULL), -EINVAL);
	int sel = shim_dev_select_unit(a);
	assert_true(sel >= 0 && sel < T_UNITS);
	shim_dev_close(b);
	shim_dev_close(a);
	shim_dev_close(NULL);
}

static void test_dev_params(void **state)
{
	struct shim_dev_params p;
	struct shim_dev *dev = NULL;

	(void)state;
	assert_int_equal(shim_dev_open(NULL, &dev), -EINVAL);
	p = t_params();
	assert_int_equal(shim_dev_open(&p, NULL), -EINVAL);
#define T_BAD(field, val)                                                                          \
	do {                                                                                       \
		p = t_params();                                                                    \
		p.field = (val);                                                                   \
		assert_int_equal(shim_dev_open(&p, &dev), -EINVAL);                                \
	} while (0)
	T_BAD(num_units, T_UNITS + 1);
	T_BAD(num_units, -1);
	T_BAD(mtu, 100);
	T_BAD(mtu, 32);
	T_BAD(mtu, SHIM_MTU_MAX + 64);
	T_BAD(hdrq_cnt, 100);
	T_BAD(hdrq_cnt, 32);
	T_BAD(hdrq_cnt, 131072);
	T_BAD(egr_bytes, 3 * 4096);
	T_BAD(egr_bytes, 2048); /* < 4 MTU */
	T_BAD(egr_bytes, 1u << 31);
#undef T_BAD
	/* zero means default */
	memset(&p, 0, sizeof(p));
	p.force_unit = -1;
	assert_int_equal(shim_dev_open(&p, &dev), 0);
	struct shim_unit_info ui;
	assert_int_equal(shim_dev_num_units(dev), 1);
	assert_int_equal(shim_dev_unit_info(dev, 0, &ui), 0);
	assert_int_equal(ui.mtu, SHIM_MTU_DEFAULT);
	assert_int_equal(shim_dev_select_unit(dev), 0);
	shim_dev_close(dev);
}

static void test_dev_force_unit(void **state)
{
	struct shim_dev_params p = t_params();
	struct shim_dev *dev;

	(void)state;
	p.force_unit = 2;
	assert_int_equal(shim_dev_open(&p, &dev), 0);
	assert_int_equal(shim_dev_select_unit(dev), 2);
	shim_dev_close(dev);
	p.num_units = 2;
	p.force_unit = 5;
	assert_int_equal(shim_dev_open(&p, &dev), 0);
	assert_int_equal(shim_dev_select_unit(dev), -EINVAL);
	shim_dev_close(dev);
	assert_int_equal(shim_dev_select_unit(NULL), -EINVAL);
}

/* ---------------------------------------------------------------------
 * Rings and credits, single thread
 */

/* Many laps of both rings with multi-packet reservations, partial
 * consumption and eager lap skips; every payload checked. */
static void test_ring_laps(void **state)
{
	struct t_pair t;
	uint32_t rnd = 12345, sent = 0, recvd = 0, skips = 0, blocks = 0;
	const uint32_t total = 20000;

	(void)state;
	t_pair_open(&t);
	while (recvd < total) {
		/* produce a burst of 1..3-packet reservations until short of
		 * credits */
		while (sent < total) {
			uint32_t np = 1 + t_rand(&rnd) % 3, off[3], egr = 0, nblk;
			struct shim_pio_resv r = {0};
			uint64_t tail;
			int ret;

			if (np > total - sent)
				np = total - sent;
			for (uint32_t i = 0; i < np; i++) {
				uint32_t len = t_len(0, sent + i);

				off[i] = egr;
				if (len > SHIM_INLINE_MAX)
					egr += shim_egr_blocks_for(len) * SHIM_BLOCK;
			}
			nblk = shim_egr_blocks_for(egr);
			tail = atomic_load(&t.peer->ctl->tail);
			ret = shim_pio_reserve(t.peer, np, egr, &r);
			if (ret == -EAGAIN)
				break;
			assert_int_equal(ret, 0);
			assert_int_equal(r.hdr_pos, (uint32_t)tail);
			if (nblk) {
				uint32_t et = (uint32_t)(tail >> 32);

				if ((et & (T_EGR_BLOCKS - 1)) + nblk > T_EGR_BLOCKS) {
					assert_int_equal(r.egr_idx, 0);
					skips++;
				} else {
					assert_int_equal(r.egr_idx, et & (T_EGR_BLOCKS - 1));
				}
				blocks += nblk;
			} else {
				assert_null(r.egr);
			}
			for (uint32_t i = 0; i < np; i++)
				t_put(t.peer, &r, i, off[i], 0, sent + i);
			sent += np;
		}
		/* consume a random part (at least one) of what is there */
		uint32_t want = 1 + t_rand(&rnd) % (2 * T_HDRQ);
		for (uint32_t k = 0; k < want; k++) {
			struct shim_rhq_entry *e = shim_rx_peek(t.rx);
			uint32_t src, seq;

			if (!e)
				break;
			assert_int_equal(t_check(t.rx, e, &src, &seq), 0);
			assert_int_equal(src, 0);
			assert_int_equal(seq, recvd);
			shim_rx_release(t.rx, e);
			recvd++;
		}
		assert_true(recvd <= sent);
	}
	assert_null(shim_rx_peek(t.rx));
	assert_true(sent / T_HDRQ > 100);         /* header laps */
	assert_true(blocks / T_EGR_BLOCKS > 100); /* eager laps */
	assert_true(skips > 10);
	/* consumer caught up: all credits back */
	assert_int_equal(atomic_load(&t.rx->ctl->hdr_head), (uint32_t)atomic_load(&t.rx->ctl->tail));
	assert_int_equal(atomic_load(&t.rx->ctl->egr_head),
			 (uint32_t)(atomic_load(&t.rx->ctl->tail) >> 32));
	t_pair_close(&t);
}

static void t_drain_one(struct t_pair *t)
{
	struct shim_rhq_entry *e = shim_rx_peek(t->rx);

	assert_non_null(e);
	shim_rx_release(t->rx, e);
}

static void test_ring_hdrq_full(void **state)
{
	struct shim_pio_resv r;
	struct t_pair t;
	uint64_t nocredit;

	(void)state;
	t_pair_open(&t);
	/* larger than the ring: never satisfiable, not "retry" */
	assert_int_equal(shim_pio_reserve(t.peer, T_HDRQ + 1, 0, &r), -EMSGSIZE);
	assert_int_equal(shim_pio_reserve(t.peer, 1, T_EGR + 1, &r), -EMSGSIZE);
	assert_int_equal(atomic_load(&t.rx->ctl->tail), 0);
	for (uint32_t i = 0; i < T_HDRQ; i++)
		assert_int_equal(t_send(t.peer, T_SRC_HDR, i), 0);
	nocredit = atomic_load(&t.rx->ctl->tx_nocredit);
	assert_int_equal(t_send(t.peer, T_SRC_HDR, T_HDRQ), -EAGAIN);
	assert_int_equal(atomic_load(&t.rx->ctl->tx_nocredit), nocredit + 1);
	/* a multi-packet reservation that would fit an empty ring is also
	 * refused, and leaves the tail alone */
	uint64_t tail = atomic_load(&t.rx->ctl->tail);
	assert_int_equal(shim_pio_reserve(t.peer, 2, 0, &r), -EAGAIN);
	assert_int_equal(atomic_load(&t.rx->ctl->tail), tail);
	/* credit return */
	t_drain_one(&t);
	assert_int_equal(t_send(t.peer, T_SRC_HDR, T_HDRQ), 0);
	assert_int_equal(t_send(t.peer, T_SRC_HDR, T_HDRQ + 1), -EAGAIN);
	for (uint32_t i = 0; i < T_HDRQ; i++)
		t_drain_one(&t);
	assert_null(shim_rx_peek(t.rx));
	assert_int_equal(shim_pio_reserve(t.peer, T_HDRQ, T_EGR, &r), 0);
	t_pair_close(&t);
}

/* A context's own segment and a peer's mapping of it are faulted in when
 * they are opened, not one page at a time by the first packets (a rank
 * with many peers on few cores spent its first few hundred collectives
 * in page faults). */
static void test_ring_prefaulted(void **state)
{
	struct t_pair t;
	size_t want;
#ifdef MADV_POPULATE_WRITE
	long page = sysconf(_SC_PAGESIZE);
	void *probe = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	(void)state;
	assert_true(probe != MAP_FAILED);
	if (madvise(probe, (size_t)page, MADV_POPULATE_WRITE)) {
		munmap(probe, (size_t)page);
		skip(); /* kernel before 5.14: best effort does nothing */
	}
	munmap(probe, (size_t)page);
#else
	(void)state;
	skip(); /* headers without it: the shim does not prefault */
#endif
	t_pair_open(&t);
	want = t.peer->map_len < SHIM_PREFAULT_MAX ? t.peer->map_len : SHIM_PREFAULT_MAX;
	assert_true(t_rss(t.peer->ctl) >= (long)want);
	want = t.ctx->map_len < SHIM_PREFAULT_MAX ? t.ctx->map_len : SHIM_PREFAULT_MAX;
	assert_true(t_rss(t.ctx->map) >= (long)want);
	t_pair_close(&t);
}

/* shim_rx_consume returns credits in batches: a full ring stays full
 * until SHIM_CREDIT_BATCH entries were consumed or the consumer flushes,
 * and shim_rx_release (consume + flush) returns them at once. */
static void test_ring_credit_batch(void **state)
{
	struct t_pair t;
	struct shim_rhq_entry *e;
	uint32_t i, sent = 0;

	(void)state;
	t_pair_open(&t);
	for (i = 0; i < T_HDRQ; i++)
		assert_int_equal(t_send(t.peer, T_SRC_HDR, sent++), 0);
	/* fewer than a batch consumed: still no credit for the sender */
	for (i = 0; i + 1 < SHIM_CREDIT_BATCH; i++) {
		assert_non_null(e = shim_rx_peek(t.rx));
		shim_rx_consume(t.rx, e);
	}
	assert_int_equal(atomic_load(&t.rx->ctl->hdr_head), 0);
	assert_int_equal(t_send(t.peer, T_SRC_HDR, sent), -EAGAIN);
	/* the batch's last entry publishes the whole batch */
	assert_non_null(e = shim_rx_peek(t.rx));
	shim_rx_consume(t.rx, e);
	assert_int_equal(atomic_load(&t.rx->ctl->hdr_head), SHIM_CREDIT_BATCH);
	for (i = 0; i < SHIM_CREDIT_BATCH; i++)
		assert_int_equal(t_send(t.peer, T_SRC_HDR, sent++), 0);
	assert_int_equal(t_send(t.peer, T_SRC_HDR, sent), -EAGAIN);
	/* a consumer that stops early flushes what it took */
	assert_non_null(e = shim_rx_peek(t.rx));
	shim_rx_consume(t.rx, e);
	assert_int_equal(t_send(t.peer, T_SRC_HDR, sent), -EAGAIN);
	shim_rx_credit_flush(t.rx);
	assert_int_equal(atomic_load(&t.rx->ctl->hdr_head), SHIM_CREDIT_BATCH + 1);
	assert_int_equal(t_send(t.peer, T_SRC_HDR, sent++), 0);
	/* release returns a single entry's credit at once */
	t_drain_one(&t);
	assert_int_equal(atomic_load(&t.rx->ctl->hdr_head), SHIM_CREDIT_BATCH + 2);
	assert_int_equal(t_send(t.peer, T_SRC_HDR, sent++), 0);
	t_pair_close(&t);
}

/* Publish one eager packet of len bytes (header fields the consumer's
 * release needs); returns the reserve result. */
static int t_send_egr(struct t_pair *t, uint32_t len, struct shim_pio_resv *r)
{
	int ret = shim_pio_reserve(t->peer, 1, len, r);

	if (ret)
		return ret;
	t_fill_hdr(&shim_pio_entry(t->peer, r, 0)->hdr, t->peer, 0, 0, len);
	shim_pio_publish(t->peer, r, 0, shim_rhf_egr(t->peer, r, 0));
	return 0;
}

static void test_ring_egr_full(void **state)
{
	const uint32_t per = T_MTU / SHIM_BLOCK, fit = T_EGR_BLOCKS / per;
	struct shim_pio_resv r;
	struct t_pair t;

	(void)state;
	t_pair_open(&t);
	assert_true(fit < T_HDRQ); /* eager runs out first */
	for (uint32_t i = 0; i < fit; i++)
		assert_int_equal(t_send_egr(&t, T_MTU, &r), 0);
	assert_int_equal(t_send_egr(&t, T_MTU, &r), -EAGAIN);
	assert_int_equal(t_send_egr(&t, 1, &r), -EAGAIN);
	/* header-only packets still have credits */
	assert_int_equal(t_send(t.peer, T_SRC_HDR, 0), 0);
	t_drain_one(&t);
	assert_int_equal(t_send_egr(&t, T_MTU, &r), 0);
	assert_int_equal(r.egr_idx, 0); /* second lap starts at block 0 */
	assert_int_equal(t_send_egr(&t, T_MTU, &r), -EAGAIN);

	/* credits follow the consumer's eager head block for block */
	for (uint32_t i = 1; i < fit; i++)
		t_drain_one(&t);
	t_drain_one(&t); /* header-only entry */
	assert_int_equal(t_send_egr(&t, T_EGR - T_MTU, &r), 0);
	assert_int_equal(r.egr_idx, per);
	assert_int_equal(t_send_egr(&t, SHIM_BLOCK, &r), -EAGAIN);
	t_drain_one(&t); /* frees [0, per) of the third lap */
	assert_int_equal(t_send_egr(&t, 2 * T_MTU, &r), -EAGAIN);
	t_drain_one(&t); /* frees the rest */
	assert_int_equal(t_send_egr(&t, T_EGR, &r), 0);
	assert_int_equal(r.egr_idx, 0);
	t_drain_one(&t);
	assert_null(shim_rx_peek(t.rx));
	t_pair_close(&t);
}

/* A reservation that does not fit before the ring end skips to the next
 * lap start; the skipped tail counts as used until the consumer passes
 * it, so the skip never overwrites unconsumed data. */
static void test_ring_egr_skip(void **state)
{
	struct shim_pio_resv r;
	struct t_pair t;

	(void)state;
	t_pair_open(&t);
	assert_int_equal(t_send_egr(&t, 200 * SHIM_BLOCK, &r), 0); /* [0, 200) */
	/* 100 blocks: skip to 256; [0, 100) of lap 2 still holds lap 1 */
	assert_int_equal(t_send_egr(&t, 100 * SHIM_BLOCK, &r), -EAGAIN);
	t_drain_one(&t);
	assert_int_equal(t.rx->egr_head, 200);
	assert_int_equal(t_send_egr(&t, 100 * SHIM_BLOCK, &r), 0);
	assert_int_equal(r.egr_idx, 0);
	assert_int_equal((uint32_t)(atomic_load(&t.rx->ctl->tail) >> 32), 356);
	/* [100, 250) would fit before the end but overlaps credits */
	assert_int_equal(t_send_egr(&t, 150 * SHIM_BLOCK, &r), -EAGAIN);
	assert_int_equal(t_send_egr(&t, 100 * SHIM_BLOCK, &r), 0);
	assert_int_equal(r.egr_idx, 100);
	/* the consumer follows the skip from the index it finds */
	t_drain_one(&t);
	assert_int_equal(t.rx->egr_head, 356);
	t_drain_one(&t);
	assert_int_equal(t.rx->egr_head, 456);
	assert_int_equal(atomic_load(&t.rx->ctl->egr_head), 456);
	assert_null(shim_rx_peek(t.rx));
	t_pair_close(&t);
}

/* ---------------------------------------------------------------------
 * Header validation primitives
 */
static void test_rx_payload_bounds(void **state)
{
	struct shim_rhq_entry e;
	struct t_pair t;

	(void)state;
	t_pair_open(&t);
	memset(&e, 0, sizeof(e));
	e.hdr.paylen = SHIM_INLINE_MAX;
	assert_ptr_equal(shim_rx_payload(t.rx, &e), e.hdr.p.inl);
	e.hdr.paylen = SHIM_INLINE_MAX + 1;
	assert_null(shim_rx_payload(t.rx, &e));
	e.hdr.paylen = 0x80000000u;
	assert_null(shim_rx_payload(t.rx, &e));

	e.rhf = SHIM_RHF_EGR | (T_EGR_BLOCKS - 1);
	e.hdr.paylen = SHIM_BLOCK;
	assert_ptr_equal(shim_rx_payload(t.rx, &e), t.rx->egr + (T_EGR - SHIM_BLOCK));
	e.hdr.paylen = SHIM_BLOCK + 1; /* runs past the ring end */
	assert_null(shim_rx_payload(t.rx, &e));
	e.rhf = SHIM_RHF_EGR | T_EGR_BLOCKS; /* index out of range */
	e.hdr.paylen = 1;
	assert_null(shim_rx_payload(t.rx, &e));
	e.rhf = SHIM_RHF_EGR | SHIM_RHF_EGRIDX_MASK;
	assert_null(shim_rx_payload(t.rx, &e));
	e.rhf = SHIM_RHF_EGR;
	e.hdr.paylen = T_EGR;
	assert_ptr_equal(shim_rx_payload(t.rx, &e), t.rx->egr);
	e.hdr.paylen = T_EGR + 1;
	assert_null(shim_rx_payload(t.rx, &e));
	e.hdr.paylen = 0x10000000u;
	assert_null(shim_rx_payload(t.rx, &e));
	t_pair_close(&t);
}

/* ---------------------------------------------------------------------
 * Concurrent producers
 */

/* Consume until every producer's packets arrived or the deadline; checks
 * exactly-once, per-producer order and payloads. */
static void t_consume_all(struct shim_rx *rx, int nprod, uint32_t npkt, double deadline)
{
	uint32_t next[T_NPROD] = {0}, total = 0;

	while (total < (uint32_t)nprod * npkt) {
		struct shim_rhq_entry *e = shim_rx_peek(rx);
		uint32_t src, seq;

		if (!e) {
			assert_true(t_now() < deadline);
			sched_yield();
			continue;
		}
		assert_int_equal(t_check(rx, e, &src, &seq), 0);
		assert_true(src < (uint32_t)nprod);
		assert_int_equal(seq, next[src]); /* in order, no loss, no dup */
		next[src]++;
		total++;
		shim_rx_release(rx, e);
	}
	assert_null(shim_rx_peek(rx));
	for (int i = 0; i < nprod; i++)
		assert_int_equal(next[i], npkt);
}

struct t_prod {
	struct shim_peer *peer;
	uint32_t src;
	double deadline;
	int err;
	pthread_t thr;
};

static int t_produce(struct shim_peer *peer, uint32_t src, double deadline)
{
	for (uint32_t seq = 0; seq < T_NPKT; seq++) {
		int ret;

		while ((ret = t_send(peer, src, seq)) == -EAGAIN) {
			if (t_now() > deadline)
				return -ETIMEDOUT;
			sched_yield();
		}
		if (ret)
			return ret;
	}
	return 0;
}

static void *t_prod_main(void *arg)
{
	struct t_prod *p = arg;

	p->err = t_produce(p->peer, p->src, p->deadline);
	return NULL;
}

static void test_mp_threads(void **state)
{
	struct t_prod prod[T_NPROD];
	double deadline = t_now() + T_DEADLINE_S;
	struct t_pair t;

	(void)state;
	t_pair_open(&t);
	for (int i = 0; i < T_NPROD; i++) {
		/* one peer each: cached credit heads are per-sender state */
		assert_int_equal(shim_peer_open(t.dev, &t.addr, &prod[i].peer), 0);
		prod[i].src = (uint32_t)i;
		prod[i].deadline = deadline;
		prod[i].err = 0;
	}
	for (int i = 0; i < T_NPROD; i++)
		assert_int_equal(pthread_create(&prod[i].thr, NULL, t_prod_main, &prod[i]), 0);
	t_consume_all(t.rx, T_NPROD, T_NPKT, deadline);
	for (int i = 0; i < T_NPROD; i++) {
		pthread_join(prod[i].thr, NULL);
		assert_int_equal(prod[i].err, 0);
		shim_peer_close(prod[i].peer);
	}
	t_pair_close(&t);
}

static void test_mp_procs(void **state)
{
	double deadline = t_now() + T_DEADLINE_S;
	pid_t pids[T_NPROD];
	struct t_pair t;

	(void)state;
	t_pair_open(&t);
	for (int i = 0; i < T_NPROD; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			/* child: no cmocka asserts here, only an exit code */
			struct shim_dev_params p = t_params();
			struct shim_dev *dev;
			struct shim_peer *peer;
			int ret;

			if (shim_dev_open(&p, &dev))
				_exit(2);
			if (shim_peer_open(dev, &t.addr, &peer))
				_exit(3);
			ret = t_produce(peer, (uint32_t)i, deadline);
			shim_peer_close(peer);
			shim_dev_close(dev);
			_exit(ret ? 4 : 0);
		}
	}
	t_consume_all(t.rx, T_NPROD, T_NPKT, deadline);
	for (int i = 0; i < T_NPROD; i++) {
		int st = 0;

		assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	}
	t_pair_close(&t);
}

/* ---------------------------------------------------------------------
 * Context assignment
 */
static void test_ctx_assign(void **state)
{
	struct shim_ctx *a, *b;
	struct shim_dev *dev = t_dev_open();
	struct shim_addr aa, ba;

	(void)state;
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &a, NULL, NULL), 0);
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &b, NULL, NULL), 0);
	shim_ctx_addr(a, &aa);
	shim_ctx_addr(b, &ba);
	assert_int_not_equal(aa.ctx, ba.ctx);
	assert_int_not_equal(aa.nonce, ba.nonce);
	assert_int_equal(aa.unit, T_UNIT);
	assert_int_equal(aa.uid, getuid());
	assert_int_equal(aa.pid, getpid());
	assert_int_equal(aa.host_id, shim_dev_host_id(dev));
	assert_true(t_seg_exists(T_UNIT, aa.ctx));

	/* owner-only permissions whatever the umask */
	char name[SHIM_NAME_MAX];
	struct stat st;
	shim_name_segment(name, sizeof(name), aa.uid, aa.unit, aa.ctx);
	int fd = shm_open(name, O_RDONLY, 0);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	close(fd);

	/* a forked child closing its inherited copy leaves it alone */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		shim_ctx_close(a);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_true(t_seg_exists(T_UNIT, aa.ctx));
	assert_int_equal(atomic_load(&shim_ctx_rx(a)->ctl->ready), 1);

	shim_ctx_close(a);
	assert_false(t_seg_exists(T_UNIT, aa.ctx));
	errno = 0;
	assert_true(shm_open(name, O_RDONLY, 0) < 0 && errno == ENOENT);
	/* a freed number is handed out again when the search reaches it */
	uint16_t freed = aa.ctx;
	t_cursor(dev, freed);
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &a, NULL, NULL), 0);
	shim_ctx_addr(a, &aa);
	assert_int_equal(aa.ctx, freed);
	shim_ctx_close(a);
	shim_ctx_close(b);
	assert_false(t_seg_exists(T_UNIT, ba.ctx));

	assert_int_equal(shim_ctx_open(dev, T_UNITS, &a, NULL, NULL), -EINVAL);
	assert_int_equal(shim_ctx_open(dev, -1, &a, NULL, NULL), -EINVAL);
	assert_int_equal(shim_ctx_open(NULL, 0, &a, NULL, NULL), -EINVAL);
	assert_int_equal(shim_ctx_open(dev, 0, NULL, NULL, NULL), -EINVAL);
	shim_dev_close(dev);
}

/* A child opens a context and reports its address.  With stay NULL it
 * dies at once without closing (a stale segment stays behind); else it
 * lives until *stay, the write end of a pipe, is written or closed, then
 * closes the context properly.  Returns the child's pid. */
static pid_t t_child_ctx(struct shim_dev *dev, int *stay, struct shim_addr *out)
{
	int up[2], down[2];
	pid_t pid;

	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct pollfd pfd = {.fd = down[0], .events = POLLIN};
		struct shim_ctx *c = NULL;
		struct shim_addr a;

		close(down[1]);
		memset(&a, 0, sizeof(a));
		if (shim_ctx_open(dev, T_UNIT, &c, NULL, NULL) == 0)
			shim_ctx_addr(c, &a);
		if (write(up[1], &a, sizeof(a)) != (ssize_t)sizeof(a))
			_exit(1);
		if (!stay)
			_exit(0);
		poll(&pfd, 1, T_DEADLINE_S * 1000);
		shim_ctx_close(c);
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	assert_int_equal(read(up[0], out, sizeof(*out)), (ssize_t)sizeof(*out));
	close(up[0]);
	assert_int_equal(out->pid, (uint32_t)pid);
	assert_true(t_seg_exists(T_UNIT, out->ctx));
	if (stay) {
		*stay = down[1];
	} else {
		close(down[1]);
		assert_int_equal(waitpid(pid, NULL, 0), pid);
	}
	return pid;
}

static void test_ctx_stale_owner(void **state)
{
	struct shim_dev *dev = t_dev_open();
	struct shim_addr dead, mine;
	struct shim_peer *peer;
	struct shim_ctx *c;
	uint64_t reclaimed;

	(void)state;
	t_child_ctx(dev, NULL, &dead);
	/* a peer that mapped it sees the owner gone */
	assert_int_equal(shim_peer_open(dev, &dead, &peer), 0);
	assert_false(shim_peer_alive(peer));
	shim_peer_wake(peer); /* nobody listens: ignored */
	shim_peer_close(peer);

	reclaimed = atomic_load(&dev->stale_reclaimed);
	t_cursor(dev, dead.ctx);
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
	shim_ctx_addr(c, &mine);
	assert_int_equal(mine.ctx, dead.ctx); /* reclaimed, not skipped */
	assert_int_not_equal(mine.nonce, dead.nonce);
	assert_int_equal(atomic_load(&dev->stale_reclaimed), reclaimed + 1);
	/* the old address is now stale */
	assert_int_equal(shim_peer_open(dev, &dead, &peer), -ESTALE);
	shim_ctx_close(c);
	shim_dev_close(dev);
}

/* Hand-made leftovers: a garbage segment is reclaimed only once old;
 * a valid-looking ctl naming an exited pid is reclaimed at once.  (A live
 * owner is never reclaimed: test_ctx_live_not_reused.) */
static void test_ctx_stale_garbage(void **state)
{
	struct shim_dev *dev = t_dev_open();
	char name[SHIM_NAME_MAX], junk[SHIM_CTL_PAD];
	struct shim_ctx *c;
	struct shim_addr a;
	unsigned int n;
	int fd;

	(void)state;
	/* find a free number */
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
	shim_ctx_addr(c, &a);
	n = a.ctx;
	shim_ctx_close(c);
	t_cursor(dev, n);
	shim_name_segment(name, sizeof(name), (uint32_t)getuid(), T_UNIT, n);

	/* young garbage: skipped */
	memset(junk, 0xa5, sizeof(junk));
	fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
	shim_ctx_addr(c, &a);
	assert_int_not_equal(a.ctx, n);
	shim_ctx_close(c);

	/* the same garbage, one minute old: reclaimed */
	struct timespec ts[2];
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= 60;
	ts[1] = ts[0];
	assert_int_equal(futimens(fd, ts), 0);
	close(fd);
	t_cursor(dev, n);
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
	shim_ctx_addr(c, &a);
	assert_int_equal(a.ctx, n);
	shim_ctx_close(c);

	/* a fake but well-formed ctl whose owner pid has exited */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	struct shim_rcv_ctl *ctl;
	fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, SHIM_CTL_PAD), 0);
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(ctl != MAP_FAILED);
	ctl->owner_pid = (uint32_t)pid;
	ctl->magic = SHIM_CTL_MAGIC;
	munmap(ctl, sizeof(*ctl));
	close(fd);
	t_cursor(dev, n);
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
	shim_ctx_addr(c, &a);
	assert_int_equal(a.ctx, n);

	shim_ctx_close(c);
	shim_dev_close(dev);
}

static void test_ctx_live_not_reused(void **state)
{
	struct shim_dev *dev = t_dev_open();
	struct shim_addr live, mine;
	struct shim_peer *peer;
	struct shim_ctx *c;
	int stay, st = 0;
	pid_t pid;

	(void)state;
	pid = t_child_ctx(dev, &stay, &live);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
		shim_ctx_addr(c, &mine);
		assert_int_not_equal(mine.ctx, live.ctx);
		shim_ctx_close(c);
	}
	assert_int_equal(shim_peer_open(dev, &live, &peer), 0);
	assert_true(shim_peer_alive(peer));
	shim_peer_close(peer);

	close(stay);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_false(t_seg_exists(T_UNIT, live.ctx)); /* its close removed it */
	assert_int_equal(shim_peer_open(dev, &live, &peer), -ENOENT);
	shim_dev_close(dev);
}

/* ---------------------------------------------------------------------
 * Peers and ABI structures
 */
static void test_peer_errors(void **state)
{
	struct shim_peer *peer = NULL;
	struct shim_addr bad;
	struct t_pair t;

	(void)state;
	t_pair_open(&t);
	assert_int_equal(t.peer->lid, t.addr.lid);
	assert_int_equal(t.peer->ctx, t.addr.ctx);
	assert_int_equal(t.peer->jkey, T_JKEY);
	assert_int_equal(t.peer->mtu, T_MTU);
	assert_int_equal(t.peer->hdrq_cnt, T_HDRQ);
	assert_int_equal(t.peer->egr_blocks, T_EGR_BLOCKS);
	assert_int_equal(t.peer->refcnt, 1);
	assert_true(shim_peer_alive(t.peer));

	bad = t.addr;
	bad.nonce ^= 0x5a5a;
	assert_int_equal(shim_peer_open(t.dev, &bad, &peer), -ESTALE);
	bad = t.addr;
	bad.ctx = SHIM_MAX_CTXTS - 1;
	assert_false(t_seg_exists(T_UNIT, bad.ctx));
	assert_int_equal(shim_peer_open(t.dev, &bad, &peer), -ENOENT);
	bad = t.addr;
	bad.host_id ^= 1;
	assert_int_equal(shim_peer_open(t.dev, &bad, &peer), -EHOSTUNREACH);
	bad = t.addr;
	bad.ctx = SHIM_MAX_CTXTS;
	assert_int_equal(shim_peer_open(t.dev, &bad, &peer), -EINVAL);
	assert_int_equal(shim_peer_open(NULL, &t.addr, &peer), -EINVAL);
	assert_int_equal(shim_peer_open(t.dev, NULL, &peer), -EINVAL);
	assert_int_equal(shim_peer_open(t.dev, &t.addr, NULL), -EINVAL);

	/* ABI major mismatch, then not ready */
	uint32_t ver = t.rx->ctl->abi_version;
	t.rx->ctl->abi_version = (SHIM_ABI_MAJOR + 1) << 16;
	assert_int_equal(shim_peer_open(t.dev, &t.addr, &peer), -EPROTO);
	t.rx->ctl->abi_version = ver | 7; /* any minor is fine */
	assert_int_equal(shim_peer_open(t.dev, &t.addr, &peer), 0);
	shim_peer_close(peer);
	t.rx->ctl->abi_version = ver;
	uint64_t seg = t.rx->ctl->seg_size;
	t.rx->ctl->seg_size = seg * 2; /* larger than the segment */
	assert_int_equal(shim_peer_open(t.dev, &t.addr, &peer), -EPROTO);
	t.rx->ctl->seg_size = seg;
	atomic_store(&t.rx->ctl->ready, 0);
	assert_int_equal(shim_peer_open(t.dev, &t.addr, &peer), -EAGAIN);
	assert_false(shim_peer_alive(t.peer));
	atomic_store(&t.rx->ctl->ready, 1);
	assert_true(shim_peer_alive(t.peer));

	/* shared peer: the last close unmaps */
	t.peer->refcnt++;
	shim_peer_close(t.peer);
	assert_int_equal(t.peer->refcnt, 1);
	shim_peer_close(NULL);
	assert_false(shim_peer_alive(NULL));

	assert_non_null(shim_strerror(-ESTALE));
	assert_string_not_equal(shim_strerror(-ESTALE), shim_strerror(-ENOENT));
	assert_string_equal(shim_strerror(-12345), "unknown shim error");
	t_pair_close(&t);
}

static void test_hfi1_info(void **state)
{
	struct shim_dev *dev = t_dev_open();
	struct hfi1_ctxt_info ci;
	struct hfi1_base_info bi;
	struct shim_unit_info ui;
	struct shim_ctx *c;
	struct shim_rx *rx;

	(void)state;
	memset(&ci, 0xff, sizeof(ci));
	memset(&bi, 0xff, sizeof(bi));
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, &ci, &bi), 0);
	rx = shim_ctx_rx(c);
	assert_int_equal(shim_dev_unit_info(dev, T_UNIT, &ui), 0);
	assert_true(ci.runtime_flags & HFI1_CAP_SDMA);
	assert_true(ci.runtime_flags & HFI1_CAP_NODROP_RHQ_FULL);
	assert_int_equal(ci.rcvegr_size, T_MTU);
	assert_int_equal(ci.num_active, T_UNITS);
	assert_int_equal(ci.unit, T_UNIT);
	assert_int_equal(ci.ctxt, rx->ctx);
	assert_int_equal(ci.subctxt, 0);
	assert_int_equal(ci.credits, T_EGR_BLOCKS);
	assert_int_equal(ci.numa_node, ui.numa_node);
	assert_int_equal(ci.rec_cpu, 0xffff);
	assert_int_equal(ci.send_ctxt, rx->ctx);
	assert_int_equal(ci.egrtids, T_EGR / T_MTU);
	assert_int_equal(ci.rcvhdrq_cnt, T_HDRQ);
	assert_int_equal(ci.rcvhdrq_entsize, 64);
	assert_int_equal(ci.sdma_ring_size, SHIM_SDMA_RING_DEFAULT);
	assert_int_equal(ci.rcvtids, SHIM_TID_MAX);

	assert_int_equal(bi.hw_version, SHIM_ABI_VERSION);
	assert_int_equal(bi.sw_version, (HFI1_USER_SWMAJOR << 16) | HFI1_USER_SWMINOR);
	assert_int_equal(bi.jkey, T_JKEY);
	assert_int_equal(bi.bthqp, 0x80);
	assert_int_equal(bi.sc_credits_addr, (uintptr_t)&rx->ctl->hdr_head);
	assert_int_equal(bi.rcvhdr_bufbase, (uintptr_t)rx->hdrq);
	assert_int_equal(bi.rcvegr_bufbase, (uintptr_t)rx->egr);
	assert_int_equal(bi.status_bufbase, (uintptr_t)rx->ctl);
	assert_int_equal(bi.pio_bufbase, 0);
	assert_int_equal(bi.user_regbase, 0);

	/* the fast-path view agrees with the control block */
	assert_int_equal(rx->lid, ui.lid);
	assert_int_equal(rx->ctl->lid, ui.lid);
	assert_int_equal(rx->egr_mask, T_EGR_BLOCKS - 1);
	assert_int_not_equal(rx->ctl->owner_start, 0);
	assert_int_equal(rx->ctl->seg_size, SHIM_CTL_PAD + T_HDRQ * 64 + T_EGR +
						    SHIM_CLAIM_SLOTS * sizeof(struct shim_claim) +
						    SHIM_RGN_SLOTS * sizeof(struct shim_rgn));
	assert_int_equal(rx->ctl->claim_off, SHIM_CTL_PAD + T_HDRQ * 64 + T_EGR);
	assert_int_equal(rx->ctl->claim_cnt, SHIM_CLAIM_SLOTS);
	assert_int_equal(rx->ctl->rgn_off,
			 rx->ctl->claim_off + SHIM_CLAIM_SLOTS * sizeof(struct shim_claim));
	assert_int_equal(rx->ctl->rgn_cnt, SHIM_RGN_SLOTS);
	shim_ctx_close(c);
	shim_dev_close(dev);
}

/* ---------------------------------------------------------------------
 * Sleep and wake-up
 */
static void *t_wake_main(void *arg)
{
	struct shim_peer *p = arg;

	usleep(20000); /* let the main thread block in poll() */
	t_send(p, 1, 0);
	return NULL;
}

static void test_sleep_wake(void **state)
{
	struct pollfd pfd;
	struct t_pair t;
	pthread_t thr;

	(void)state;
	t_pair_open(&t);
	pfd.fd = shim_ctx_wait_fd(t.ctx);
	pfd.events = POLLIN;
	assert_true(pfd.fd >= 0);
	assert_int_equal(shim_ctx_wait_fd(NULL), -EINVAL);
	assert_int_equal(shim_ctx_sleep_arm(NULL), -EINVAL);

	assert_int_equal(shim_ctx_sleep_arm(t.ctx), 0);
	assert_int_equal(poll(&pfd, 1, 0), 0);
	assert_int_equal(pthread_create(&thr, NULL, t_wake_main, t.peer), 0);
	assert_int_equal(poll(&pfd, 1, 5000), 1);
	assert_true(pfd.revents & POLLIN);
	pthread_join(thr, NULL);
	shim_ctx_sleep_disarm(t.ctx);
	assert_int_equal(poll(&pfd, 1, 0), 0); /* drained */
	assert_int_equal(atomic_load(&t.rx->ctl->sleeping), 0);

	/* a pending entry refuses the sleep */
	assert_int_equal(shim_ctx_sleep_arm(t.ctx), -EAGAIN);
	assert_int_equal(atomic_load(&t.rx->ctl->sleeping), 0);
	uint32_t src, seq;
	struct shim_rhq_entry *e = shim_rx_peek(t.rx);
	assert_non_null(e);
	assert_int_equal(t_check(t.rx, e, &src, &seq), 0);
	shim_rx_release(t.rx, e);

	/* not sleeping: a publish sends nothing */
	assert_int_equal(t_send(t.peer, 1, 1), 0);
	assert_int_equal(poll(&pfd, 1, 0), 0);
	e = shim_rx_peek(t.rx);
	assert_non_null(e);
	shim_rx_release(t.rx, e);
	assert_int_equal(shim_ctx_sleep_arm(t.ctx), 0);
	shim_ctx_sleep_disarm(t.ctx);
	t_pair_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dev_refcount),
		cmocka_unit_test(test_dev_params),
		cmocka_unit_test(test_dev_force_unit),
		cmocka_unit_test(test_ring_laps),
		cmocka_unit_test(test_ring_hdrq_full),
		cmocka_unit_test(test_ring_prefaulted),
		cmocka_unit_test(test_ring_credit_batch),
		cmocka_unit_test(test_ring_egr_full),
		cmocka_unit_test(test_ring_egr_skip),
		cmocka_unit_test(test_rx_payload_bounds),
		cmocka_unit_test(test_mp_threads),
		cmocka_unit_test(test_mp_procs),
		cmocka_unit_test(test_ctx_assign),
		cmocka_unit_test(test_ctx_stale_owner),
		cmocka_unit_test(test_ctx_stale_garbage),
		cmocka_unit_test(test_ctx_live_not_reused),
		cmocka_unit_test(test_peer_errors),
		cmocka_unit_test(test_hfi1_info),
		cmocka_unit_test(test_sleep_wake),
	};

	/* a producer writing to a context whose owner died must not kill us */
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
