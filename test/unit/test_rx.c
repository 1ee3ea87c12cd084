/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_rx.c - receive validation (prov/opx_rx.c, with the drop counters
 * of opx_drop.c and the packet checksum of opx_csum.c): forged packets
 * are dropped and counted once per reason, a multi-packet first packet
 * announcing more than the eager limit (1 TiB, 8 GiB) is dropped without
 * wedging the queue, a sender rewriting paylen after publication gets
 * one consistent length used for checks, buffer and copy, and with
 * FI_OPX_CHECKSUM a payload changed after publication is dropped, never
 * delivered (plus the CRC32C check value).
 *
 * A test plays a hostile sender of the same user: it maps the fixture
 * endpoint's receive context through the shim API, as any sender does,
 * and writes header entries and eager payloads of its own making.  The
 * endpoint progresses through fi_cq_read(count 0) and must drop and count
 * what is bad, deliver only what is good, and never wedge.  Every loop is
 * bounded in count and time.
 */
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "opx_csum.h"
#include "opx_drop.h"
#include "opx_ep.h"
#include "opx_rx.h"

#define TR_WAIT_MS 2000
#define TR_TAG 0x7e570000u

struct tr_env {
	struct fx_env fx;
	struct opx_ep *ep;
	struct shim_peer *peer; /* our own mapping of ep's receive context */
};

static uint8_t tr_pat(unsigned seed, size_t i)
{
	return (uint8_t)(seed * 151u + i * 13u + (i >> 8));
}

static void tr_fill(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = tr_pat(seed, i);
}

static size_t tr_check(const uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != tr_pat(seed, i))
			return i;
	return len;
}

static int tr_open(struct tr_env *t)
{
	struct opx_fabric *fab;

	memset(t, 0, sizeof(*t));
	if (fx_open(&t->fx, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED))
		return -1;
	t->ep = opx_ep_of(t->fx.ep);
	fab = OPX_CONTAINER_OF(t->fx.fabric, struct opx_fabric, fabric_fid);
	if (shim_peer_open(fab->dev, &t->ep->addr, &t->peer)) {
		fx_close(&t->fx);
		return -1;
	}
	return 0;
}

static void tr_close(struct tr_env *t)
{
	if (t->peer)
		shim_peer_close(t->peer);
	fx_close(&t->fx);
}

static int tr_setup(void **state)
{
	struct tr_env *t = calloc(1, sizeof(*t));

	if (!t || tr_open(t)) {
		free(t);
		return -1;
	}
	*state = t;
	return 0;
}

static int tr_teardown(void **state)
{
	struct tr_env *t = *state;

	tr_close(t);
	free(t);
	return 0;
}

/* A header the endpoint accepts as an eager tagged message. */
static struct shim_pkt_hdr tr_hdr(const struct tr_env *t, uint8_t op, uint32_t paylen, uint64_t tag)
{
	struct shim_pkt_hdr h;

	memset(&h, 0, sizeof(h));
	h.opcode = op;
	h.flags = OPX_PF_TAGGED;
	h.jkey = t->ep->jkey;
	h.slid = t->ep->addr.lid;
	h.sctx = t->ep->addr.ctx;
	h.dlid = t->ep->addr.lid;
	h.dctx = t->ep->addr.ctx;
	h.paylen = paylen;
	h.tag = tag;
	return h;
}

/* Publish one forged packet: header h, egr_len bytes of patterned eager
 * payload (none when 0), extra RHF bits.  Returns the published entry. */
static struct shim_rhq_entry *tr_forge(struct tr_env *t, const struct shim_pkt_hdr *h,
				       uint32_t egr_len, uint32_t rhf_extra, unsigned seed)
{
	struct shim_pio_resv r = {0};
	struct shim_rhq_entry *e;
	uint64_t end = fx_now_ms() + TR_WAIT_MS;
	int rc;

	while ((rc = shim_pio_reserve(t->peer, 1, egr_len, &r)) == -EAGAIN && fx_now_ms() < end)
		(void)fi_cq_read(t->fx.cq, NULL, 0);
	assert_int_equal(rc, 0);
	if (egr_len)
		tr_fill(r.egr, egr_len, seed);
	e = shim_pio_entry(t->peer, &r, 0);
	e->hdr = *h;
	shim_pio_publish(t->peer, &r, 0,
			 (egr_len ? shim_rhf_egr(t->peer, &r, 0) : 0) | rhf_extra);
	return e;
}

static void tr_progress(struct tr_env *t, int rounds)
{
	for (int i = 0; i < rounds; i++)
		assert_int_equal(fi_cq_read(t->fx.cq, NULL, 0), 0);
}

/* The completion of ctx (send completions and others are skipped);
 * returns false when it does not come within ms. */
static bool tr_wait(struct tr_env *t, void *ctx, struct fi_cq_tagged_entry *out, unsigned ms)
{
	uint64_t end = fx_now_ms() + ms;
	struct fi_cq_tagged_entry ent;

	while (fx_now_ms() <= end) {
		ssize_t n = fi_cq_read(t->fx.cq, &ent, 1);

		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee;

			memset(&ee, 0, sizeof(ee));
			assert_int_equal(fi_cq_readerr(t->fx.cq, &ee, 0), 1);
			fail_msg("error completion %d for %p", ee.err, ee.op_context);
		}
		if (n == 1 && ent.op_context == ctx) {
			if (out)
				*out = ent;
			return true;
		}
		if (n != 1)
			assert_int_equal(n, -FI_EAGAIN);
	}
	return false;
}

/* A real message from the endpoint to itself arrives intact: the context
 * is not wedged. */
static void tr_roundtrip(struct tr_env *t, size_t len, unsigned seed)
{
	uint8_t *sbuf = malloc(len ? len : 1), *rbuf = calloc(1, len ? len : 1);
	struct fi_cq_tagged_entry ent;
	struct fi_context rctx, sctx;
	uint64_t end = fx_now_ms() + TR_WAIT_MS;
	ssize_t rc;

	assert_non_null(sbuf);
	assert_non_null(rbuf);
	tr_fill(sbuf, len, seed);
	assert_int_equal(fi_trecv(t->fx.ep, rbuf, len, NULL, FI_ADDR_UNSPEC, TR_TAG + seed, 0, &rctx),
			 0);
	do {
		rc = fi_tsend(t->fx.ep, sbuf, len, NULL, t->fx.self, TR_TAG + seed, &sctx);
		if (rc == -FI_EAGAIN)
			(void)fi_cq_read(t->fx.cq, NULL, 0);
	} while (rc == -FI_EAGAIN && fx_now_ms() < end);
	assert_int_equal(rc, 0);
	if (!tr_wait(t, &rctx, &ent, TR_WAIT_MS))
		fail_msg("a good %zu-byte message after forged packets never arrived", len);
	assert_int_equal(ent.len, len);
	assert_int_equal(tr_check(rbuf, len, seed), len);
	free(sbuf);
	free(rbuf);
}

/* ---------------------------------------------------------------------
 * Item 14: one forged packet per drop reason, each counted once.
 */
static void tr_expect_drop(struct tr_env *t, enum opx_drop_reason why, uint64_t *total)
{
	tr_progress(t, 3);
	if (opx_drop_count(t->ep, why) != 1)
		fail_msg("reason '%s': %llu drops counted, expected 1", opx_drop_name(why),
			 (unsigned long long)opx_drop_count(t->ep, why));
	(*total)++;
	assert_int_equal(opx_drop_count(t->ep, OPX_DROP_MAX), *total);
}

static void test_drop_reasons(void **state)
{
	struct tr_env *t = *state;
	uint32_t mtu = t->ep->rx->mtu;
	struct shim_pkt_hdr h;
	uint64_t total = 0;

	for (int i = 0; i < OPX_DROP_MAX; i++)
		assert_int_equal(opx_drop_count(t->ep, (enum opx_drop_reason)i), 0);

	h = tr_hdr(t, OPX_OP_EAGER, 8, TR_TAG);
	tr_forge(t, &h, 0, SHIM_RHF_ERR_LEN, 0);
	tr_expect_drop(t, OPX_DROP_RHF_ERR, &total);

	h = tr_hdr(t, 0x7f, 8, TR_TAG);
	tr_forge(t, &h, 0, 0, 0);
	h.opcode = 0;
	tr_forge(t, &h, 0, 0, 0);
	tr_progress(t, 3);
	assert_int_equal(opx_drop_count(t->ep, OPX_DROP_OPCODE), 2);
	total += 2;

	h = tr_hdr(t, OPX_OP_EAGER, 8, TR_TAG);
	h.jkey ^= 0x100;
	tr_forge(t, &h, 0, 0, 0);
	tr_expect_drop(t, OPX_DROP_JKEY, &total);

	h = tr_hdr(t, OPX_OP_EAGER, 8, TR_TAG);
	h.dctx ^= 1;
	tr_forge(t, &h, 0, 0, 0);
	tr_expect_drop(t, OPX_DROP_DEST, &total);

	h = tr_hdr(t, OPX_OP_EAGER, 8, TR_TAG);
	h.flags |= 0x80;
	tr_forge(t, &h, 0, 0, 0);
	tr_expect_drop(t, OPX_DROP_FLAGS, &total);

	h = tr_hdr(t, OPX_OP_EAGER, mtu + 1, TR_TAG);
	tr_forge(t, &h, 0, 0, 0);
	tr_expect_drop(t, OPX_DROP_PAYLEN, &total);

	h = tr_hdr(t, OPX_OP_EAGER, SHIM_INLINE_MAX + 1, TR_TAG); /* inline, too long */
	tr_forge(t, &h, 0, 0, 0);
	tr_expect_drop(t, OPX_DROP_PAYLOAD, &total);

	h = tr_hdr(t, OPX_OP_EAGER, 256, TR_TAG);
	h.flags |= OPX_PF_CSUM;
	h.psn = 0x12345678u; /* not the CRC of this packet */
	tr_forge(t, &h, 256, 0, 0);
	tr_expect_drop(t, OPX_DROP_CSUM, &total);

	h = tr_hdr(t, OPX_OP_MP_FIRST, mtu, TR_TAG);
	h.p.u64[0] = mtu; /* total not above the first packet */
	tr_forge(t, &h, mtu, 0, 0);
	tr_expect_drop(t, OPX_DROP_MP_LEN, &total);

	h = tr_hdr(t, OPX_OP_MP_FIRST, mtu, TR_TAG);
	h.p.u64[0] = (uint64_t)1 << 40;
	tr_forge(t, &h, mtu, 0, 0);
	tr_expect_drop(t, OPX_DROP_MP_BOUND, &total);

	h = tr_hdr(t, OPX_OP_MP_NEXT, 64, TR_TAG);
	h.p.u64[0] = mtu; /* no reassembly in progress */
	tr_forge(t, &h, 64, 0, 0);
	tr_expect_drop(t, OPX_DROP_MP_SEQ, &total);

	h = tr_hdr(t, OPX_OP_RTS, 8, TR_TAG); /* payload is not an RTS */
	h.p.u64[0] = 1 << 20;
	tr_forge(t, &h, 8, 0, 0);
	tr_expect_drop(t, OPX_DROP_RTS, &total);

	h = tr_hdr(t, OPX_OP_DONE, 0, 0);
	h.p.u64[0] = 0xdeadbeef00001234ull; /* no such rendezvous */
	tr_forge(t, &h, 0, 0, 0);
	tr_expect_drop(t, OPX_DROP_PROTO, &total);

	/* every reason was exercised, and the context still works */
	for (int i = 0; i < OPX_DROP_MAX; i++)
		assert_true(opx_drop_count(t->ep, (enum opx_drop_reason)i) > 0);
	tr_roundtrip(t, 100, 1);
	tr_roundtrip(t, 3 * mtu + 5, 2);
	assert_int_equal(opx_drop_count(t->ep, OPX_DROP_MAX), total);
}

/* ---------------------------------------------------------------------
 * Item 12: a forged MP_FIRST claiming 1 TiB or 8 GiB is dropped and
 * counted; it never stays at the head of the queue.
 */
static void test_mp_first_huge(void **state)
{
	struct tr_env *t = *state;
	uint32_t mtu = t->ep->rx->mtu;
	struct fi_context pctx;
	struct shim_pkt_hdr h;
	uint8_t pend[200];

	/* nothing buffered yet: the bound used to let any size through */
	h = tr_hdr(t, OPX_OP_MP_FIRST, mtu, TR_TAG + 90);
	h.p.u64[0] = (uint64_t)1 << 40;
	h.msgid = 7;
	tr_forge(t, &h, mtu, 0, 3);
	tr_roundtrip(t, 64, 4);

	/* with an unexpected message already buffered */
	h = tr_hdr(t, OPX_OP_EAGER, sizeof(pend), TR_TAG + 91);
	tr_forge(t, &h, sizeof(pend), 0, 5);
	tr_progress(t, 2);
	h = tr_hdr(t, OPX_OP_MP_FIRST, mtu, TR_TAG + 92);
	h.p.u64[0] = (uint64_t)8 << 30;
	h.msgid = 8;
	tr_forge(t, &h, mtu, 0, 6);
	tr_roundtrip(t, 2 * mtu + 1, 7);
	assert_int_equal(opx_drop_count(t->ep, OPX_DROP_MP_BOUND), 2);

	/* the message buffered before is intact */
	memset(pend, 0, sizeof(pend));
	assert_int_equal(
		fi_trecv(t->fx.ep, pend, sizeof(pend), NULL, FI_ADDR_UNSPEC, TR_TAG + 91, 0, &pctx), 0);
	assert_true(tr_wait(t, &pctx, NULL, TR_WAIT_MS));
	assert_int_equal(tr_check(pend, sizeof(pend), 5), sizeof(pend));
}

/* ---------------------------------------------------------------------
 * Item 11: a sender rewriting paylen after publication.  The receiver
 * must use one value for its checks, its buffer size and its copy: the
 * message arrives with either length, with that many good bytes.
 */
struct tr_racer {
	_Atomic(struct shim_rhq_entry *) target;
	_Atomic uint64_t loops;
	_Atomic uint64_t hits; /* rounds of writes to a target */
	_Atomic bool stop;
	uint32_t a, b;
};

static void *tr_racer_main(void *arg)
{
	struct tr_racer *r = arg;
	uint64_t n = 0;

	while (!atomic_load(&r->stop)) {
		struct shim_rhq_entry *e = atomic_load(&r->target);

		if (e) {
			volatile uint32_t *pl = &e->hdr.paylen;

			for (int k = 0; k < 64; k++)
				*pl = (k & 1) ? r->a : r->b;
			atomic_fetch_add(&r->hits, 1);
		}
		atomic_store(&r->loops, ++n);
		if (!e)
			sched_yield();
	}
	return NULL;
}

/* Wait until the racer finished any write it may have started with the
 * previous target. */
static void tr_racer_quiesce(struct tr_racer *r)
{
	uint64_t l0 = atomic_load(&r->loops);
	uint64_t end = fx_now_ms() + TR_WAIT_MS;

	while (atomic_load(&r->loops) < l0 + 2 && fx_now_ms() < end)
		sched_yield();
}

/* The race itself, in a child process (exec'ed with TR_RACE_CHILD): on
 * code that reads paylen twice it corrupts the heap, and glibc's abort
 * then can hang on the malloc lock; the parent kills it at a deadline. */
#define TR_RACE_CHILD "--paylen-race-child"

static int tr_race_child(void)
{
	struct tr_env tenv, *t = &tenv;
	uint32_t mtu;
	struct tr_racer r;
	uint8_t *rbuf;
	uint64_t end;
	unsigned iters = 0, shorts = 0, longs = 0;
	pthread_t th;

	if (tr_open(t))
		return 10;
	mtu = t->ep->rx->mtu;
	/* same number of eager blocks, so the credit return cannot differ */
	r.a = mtu - (SHIM_BLOCK - 1);
	r.b = mtu;
	rbuf = malloc(mtu);
	if (!rbuf)
		return 11;
	atomic_init(&r.target, NULL);
	atomic_init(&r.loops, 0);
	atomic_init(&r.hits, 0);
	atomic_init(&r.stop, false);
	if (pthread_create(&th, NULL, tr_racer_main, &r))
		return 12;
	/* 3 s of racing from here, not from before the set-up (on a loaded
	 * machine that took the whole budget: 0 messages, a failure), and
	 * at least one message whatever the clock says */
	end = fx_now_ms() + 3000;
	for (unsigned i = 0; i < 4000 && (fx_now_ms() < end || !iters); i++) {
		struct shim_pkt_hdr h = tr_hdr(t, OPX_OP_EAGER, r.a, TR_TAG + 200 + i);
		struct fi_cq_tagged_entry ent;
		struct fi_context rctx;
		struct shim_rhq_entry *e;
		uint64_t h0 = atomic_load(&r.hits);
		uint64_t wend = fx_now_ms() + 100;

		/* the eager space holds mtu good bytes whatever paylen says */
		e = tr_forge(t, &h, mtu, 0, i);
		atomic_store(&r.target, e);
		/* let the racer get going on this entry (bounded: on a loaded
		 * machine it may not run at all, and the test proves less) */
		while (atomic_load(&r.hits) == h0 && fx_now_ms() < wend)
			sched_yield();
		tr_progress(t, 1); /* unexpected: buffered while paylen flips */
		atomic_store(&r.target, NULL);
		tr_racer_quiesce(&r);

		memset(rbuf, 0, mtu);
		if (fi_trecv(t->fx.ep, rbuf, mtu, NULL, FI_ADDR_UNSPEC, TR_TAG + 200 + i, 0, &rctx))
			return 13;
		if (!tr_wait(t, &rctx, &ent, TR_WAIT_MS)) {
			fprintf(stderr, "race child: iteration %u: message never delivered\n", i);
			return 14;
		}
		if ((ent.len != r.a && ent.len != r.b) || tr_check(rbuf, ent.len, i) != ent.len) {
			fprintf(stderr, "race child: iteration %u: %zu bytes, wrong at byte %zu\n", i,
				ent.len, tr_check(rbuf, ent.len, i));
			return 15;
		}
		if (ent.len == r.a)
			shorts++;
		else
			longs++;
		iters++;
	}
	atomic_store(&r.stop, true);
	pthread_join(th, NULL);
	fprintf(stderr, "race child: %u messages (%u with one length, %u with the other), all "
			"consistent\n",
		iters, shorts, longs);
	if (!iters || opx_drop_count(t->ep, OPX_DROP_MAX))
		return 16;
	free(rbuf);
	tr_close(t);
	return 0;
}

static void test_paylen_race(void **state)
{
	int status = 0;
	uint64_t end;
	pid_t pid;

	(void)state;
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *argv[] = {"test_rx", TR_RACE_CHILD, NULL};
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	end = fx_now_ms() + 60000;
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			break;
		assert_int_not_equal(w, -1);
		if (fx_now_ms() > end) {
			kill(pid, SIGKILL);
			(void)waitpid(pid, &status, 0);
			fail_msg("paylen race child hung (heap corrupted?)");
		}
		usleep(10000);
	}
	if (!WIFEXITED(status))
		fail_msg("paylen race child died with signal %d", WTERMSIG(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---------------------------------------------------------------------
 * Item 13: with FI_OPX_CHECKSUM on, a payload changed after publication
 * is dropped and counted, never delivered as good.
 */
static int tr_setup_csum(void **state)
{
	opx_env.checksum = true; /* read at endpoint open */
	return tr_setup(state);
}

static int tr_teardown_csum(void **state)
{
	opx_env.checksum = false;
	return tr_teardown(state);
}

/* Send len bytes to ourselves, then flip one byte of the packet in our
 * ring: the payload byte at payload_off, or a header byte when
 * payload_off < 0. */
static void tr_send_corrupt(struct tr_env *t, const uint8_t *sbuf, size_t len, uint64_t tag,
			    long payload_off, struct fi_context *sctx)
{
	struct shim_rx *rx = t->ep->rx;
	struct shim_rhq_entry *e;

	assert_int_equal(fi_tsend(t->fx.ep, sbuf, len, NULL, t->fx.self, tag, sctx), 0);
	e = &rx->hdrq[rx->head & rx->hdrq_mask];
	assert_int_equal(atomic_load(&e->seq), rx->head + 1);
	if (payload_off >= 0) {
		assert_true(e->rhf & SHIM_RHF_EGR);
		rx->egr[(size_t)SHIM_RHF_EGRIDX(e->rhf) * SHIM_BLOCK + (size_t)payload_off] ^= 0x20;
	} else {
		e->hdr.tag ^= 0x1; /* still a tag the posted receive would take */
	}
}

static void test_checksum(void **state)
{
	struct tr_env *t = *state;
	const size_t len = 8192;
	uint8_t *sbuf = malloc(len), *rbuf = malloc(len);
	struct fi_context rctx, sctx;
	struct fi_cq_tagged_entry ent;
	unsigned seed = 77;
	uint64_t drops = 0;

	assert_non_null(sbuf);
	assert_non_null(rbuf);
	assert_true(t->ep->rx_st.rx_csum);
	assert_true(t->ep->rx->ctl->rx_flags & SHIM_RXF_CSUM);

	/* a good message goes through sealed */
	tr_roundtrip(t, len, 1);
	tr_roundtrip(t, 5, 2);
	tr_roundtrip(t, 3 * t->ep->rx->mtu + 7, 3);
	assert_int_equal(opx_drop_count(t->ep, OPX_DROP_MAX), 0);

	/* corrupted ones are dropped; the receive (ignoring the low tag bit)
	 * stays posted and gets the next good message */
	memset(rbuf, 0, len);
	assert_int_equal(fi_trecv(t->fx.ep, rbuf, len, NULL, FI_ADDR_UNSPEC, TR_TAG, 1, &rctx), 0);
	for (unsigned k = 0; k < 40; k++) {
		long off = (k % 4 == 3) ? -1 : (long)((k * 997u) % len);

		tr_fill(sbuf, len, seed + k);
		tr_send_corrupt(t, sbuf, len, TR_TAG, off, &sctx);
		tr_progress(t, 2);
		drops++;
		if (tr_wait(t, &rctx, &ent, 0))
			fail_msg("corruption %u (offset %ld) delivered as good", k, off);
		if (opx_drop_count(t->ep, OPX_DROP_CSUM) != drops)
			fail_msg("corruption %u (offset %ld) not counted as a checksum drop", k, off);
	}
	tr_fill(sbuf, len, seed);
	assert_int_equal(fi_tsend(t->fx.ep, sbuf, len, NULL, t->fx.self, TR_TAG, &sctx), 0);
	assert_true(tr_wait(t, &rctx, &ent, TR_WAIT_MS));
	assert_int_equal(ent.len, len);
	assert_int_equal(tr_check(rbuf, len, seed), len);
	assert_int_equal(opx_drop_count(t->ep, OPX_DROP_MAX), drops);

	/* an unsealed eager packet is refused while the checksum is on */
	{
		struct shim_pkt_hdr h = tr_hdr(t, OPX_OP_EAGER, 300, TR_TAG + 5);

		tr_forge(t, &h, 300, 0, 9);
		tr_progress(t, 2);
		assert_int_equal(opx_drop_count(t->ep, OPX_DROP_CSUM), drops + 1);
	}
	free(sbuf);
	free(rbuf);
}

/* The CRC itself: the standard CRC32C check value. */
/* The receive dispatch has a handler for every opcode a valid packet can
 * carry (a new opcode without one would jump through NULL), and none for
 * 0, which validation drops. */
static void test_every_opcode_handled(void **state)
{
	(void)state;
	assert_null(opx_rx_ops[0]);
	for (int op = 1; op < OPX_OP_MAX; op++) {
		if (!opx_rx_ops[op])
			fail_msg("opcode %d has no receive handler", op);
	}
}

static void test_crc32c(void **state)
{
	(void)state;
	fx_prov(); /* initialises the implementation choice */
	assert_int_equal(shim_crc32c(0, "123456789", 9), 0xe3069283u);
	/* chaining equals one pass */
	assert_int_equal(shim_crc32c(shim_crc32c(0, "12345", 5), "6789", 4), 0xe3069283u);
	/* the packet checksum is the same with and without SSE4.2, at every
	 * length around the lane threshold, and sees a one-bit change */
	{
		static uint8_t pay[9000];
		struct shim_pkt_hdr h;

		memset(&h, 0, sizeof(h));
		h.opcode = OPX_OP_EAGER;
		tr_fill(pay, sizeof(pay), 3);
		for (uint32_t len = 0; len <= sizeof(pay); len += (len < 600 ? 1 : 997)) {
			uint32_t hw, sw;
			bool was;

			h.paylen = len;
			h.psn = len; /* not covered */
			hw = opx_csum_pkt(&h, pay);
			was = shim_crc_force_sw(true);
			sw = opx_csum_pkt(&h, pay);
			shim_crc_force_sw(was);
			assert_int_equal(hw, sw);
			if (len) {
				pay[len - 1] ^= 0x10;
				assert_int_not_equal(opx_csum_pkt(&h, pay), hw);
				pay[len - 1] ^= 0x10;
				pay[len / 2] ^= 0x01;
				assert_int_not_equal(opx_csum_pkt(&h, pay), hw);
				pay[len / 2] ^= 0x01;
			}
		}
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c),
		cmocka_unit_test(test_every_opcode_handled),
		cmocka_unit_test_setup_teardown(test_drop_reasons, tr_setup, tr_teardown),
		cmocka_unit_test_setup_teardown(test_mp_first_huge, tr_setup, tr_teardown),
		cmocka_unit_test(test_paylen_race),
		cmocka_unit_test_setup_teardown(test_checksum, tr_setup_csum, tr_teardown_csum),
	};

	if (argc > 1 && !strcmp(argv[1], TR_RACE_CHILD))
		return tr_race_child();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
