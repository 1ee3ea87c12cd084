/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_shim_ring.c - unit tests of the driver shim's receive rings (shm
 * wire): many laps of the header and eager rings, credits (full rings,
 * batched credit return, eager lap skips), the bounds of a payload in
 * the eager ring, concurrent producers (threads and processes: every
 * packet exactly once, in order per producer, intact), and sleeping on
 * an empty ring until a packet wakes the owner.  The device, contexts,
 * peers and ABI structures are tested in test_shim.c; what both share is
 * shim_fixture.c.
 *
 * Rings are tiny (see shim_fixture.h) so that every test crosses many
 * laps and hits the credit limits quickly.  Contexts are opened on unit
 * 3 of 8 (test_shim uses unit 7, the provider unit 0) so concurrent
 * suites do not collide.  Every loop is bounded in count and in time.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shim_fixture.h"

#define T_NPROD 4
#define T_NPKT 3000

const int t_unit = T_UNITS - 5;
const uint16_t t_jkey = 0x4a4b;

/* ---------------------------------------------------------------------
 * Helpers
 */
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
		cmocka_unit_test(test_ring_laps),
		cmocka_unit_test(test_ring_hdrq_full),
		cmocka_unit_test(test_ring_prefaulted),
		cmocka_unit_test(test_ring_credit_batch),
		cmocka_unit_test(test_ring_egr_full),
		cmocka_unit_test(test_ring_egr_skip),
		cmocka_unit_test(test_rx_payload_bounds),
		cmocka_unit_test(test_mp_threads),
		cmocka_unit_test(test_mp_procs),
		cmocka_unit_test(test_sleep_wake),
	};

	/* a producer writing to a context whose owner died must not kill us */
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
