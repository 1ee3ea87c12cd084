/*
 * opx_fi_subtests.c - the subtests of opx_fi_test (see opx_fi_test.c for
 * how the two sides run them and opx_fi_test.h for the shared helpers).
 *
 * Every subtest runs on both sides: A (T.side == 0) mostly receives and
 * checks, B (T.side == 1) mostly sends.  Sizes cover every protocol of a
 * provider like opx: inline (<= 16 B), one packet (<= 8 KiB MTU),
 * multi-packet eager (<= 16 KiB) and rendezvous (both the single-copy
 * pull and the push path, chosen by the environment) up to 64 MiB.  The
 * large-message subtests are in opx_fi_subtests_large.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "opx_fi_test.h"

/* ---- subtests ---------------------------------------------------------- */

static int st_tagged_sweep(void)
{
	return t_sweep_kind(0);
}

static int st_msg_data_inject(void)
{
	if (t_sweep_kind(1))
		return -1;
	if (T.cq_data && (t_sweep_kind(2) || t_sweep_kind(3)))
		return -1;
	/* inject variants: no send completion, receive as usual */
	size_t sizes[] = { 0, 1, T.inject / 2, T.inject };
	for (int k = 0; k < 4; k++) {
		if (k >= 2 && !T.cq_data)
			break;
		for (size_t s = 0; s < 4; s++) {
			size_t len = sizes[s];
			if (len > T.inject)
				continue;
			uint32_t seed = 500u + (uint32_t)(k * 8 + (int)s);
			uint64_t tag = T_TAGBASE(T.test) | seed;
			uint64_t data = 0xd0d0u + seed;
			int tagged = k == 0 || k == 2;
			struct test_op *op = NULL;
			ssize_t ret;

			if (T.side == 0 &&
			    !(op = t_post_rx(tagged, len, tag, 0, T.peer)))
				return -1;
			if (t_sync())
				return -1;
			if (T.side == 1) {
				t_fill(T.sbuf, len, seed);
				if (k == 0)
					T_POST(ret, fi_tinject(T.ep, T.sbuf,
						len, T.peer, tag));
				else if (k == 1)
					T_POST(ret, fi_inject(T.ep, T.sbuf, len,
						T.peer));
				else if (k == 2)
					T_POST(ret, fi_tinjectdata(T.ep, T.sbuf,
						len, data, T.peer, tag));
				else
					T_POST(ret, fi_injectdata(T.ep, T.sbuf,
						len, data, T.peer));
				/* the source buffer is reusable at once */
				memset(T.sbuf, 0, len);
				T_CHECK(ret == 0, "inject kind %d len %zu: %s",
					k, len, fi_strerror((int)-ret));
				if (t_sync())
					return -1;
				continue;
			}
			T_CHECK(t_wait(op, 1, T_WAIT_MS) == 0, "inject kind %d "
				"len %zu: no receive completion", k, len);
			if (t_check_rx(op, 0, len, tag, FI_RECV |
				       (k >= 2 ? FI_REMOTE_CQ_DATA : 0),
				       T.rbuf, seed, "inject"))
				return -1;
			T_CHECK(k < 2 || op->ent[0].data == data,
				"injectdata: cq data %#lx want %#lx",
				(unsigned long)op->ent[0].data,
				(unsigned long)data);
			if (t_sync())
				return -1;
		}
	}
	return 0;
}

static int st_iov(void)
{
	size_t lim = T.iov_limit > 8 ? 8 : T.iov_limit;

	T_CHECK(lim >= 1, "iov_limit is 0");
	for (size_t n = 2; n <= lim; n++) {
		for (int tagged = 0; tagged < 2; tagged++) {
			struct iovec iov[8];
			size_t total = 0, off = 0;
			uint32_t seed = 700u + (uint32_t)(n * 2) +
					(uint32_t)tagged;
			uint64_t tag = T_TAGBASE(T.test) | seed;
			struct test_op *op = t_op();
			ssize_t ret;

			/* Sender and receiver split differently, so data must
			 * be scattered across entry boundaries. */
			for (size_t i = 0; i < n; i++) {
				size_t part = T.side ? 1000 + i * 777 :
						       1500 + (n - i) * 600;
				iov[i].iov_base = (T.side ? T.sbuf : T.rbuf) +
						  off;
				iov[i].iov_len = part;
				off += part + (T.side ? 0 : 3);
				total += part;
			}
			if (T.side == 1) {
				size_t want = 0;
				for (size_t i = 0; i < n; i++)
					want += 1000 + i * 777;
				t_fill(T.sbuf, want, seed);
				if (t_sync())
					return -1;
				if (tagged)
					T_POST(ret, fi_tsendv(T.ep, iov, NULL,
						n, T.peer, tag, &op->fctx));
				else
					T_POST(ret, fi_sendv(T.ep, iov, NULL, n,
						T.peer, &op->fctx));
				T_CHECK(ret == 0, "sendv n=%zu: %s", n,
					fi_strerror((int)-ret));
				if (t_wait_tx(op, want) || t_sync())
					return -1;
				continue;
			}
			memset(T.rbuf, 0xee, off + 1);
			if (tagged)
				T_POST(ret, fi_trecvv(T.ep, iov, NULL, n,
					T.peer, tag, 0, &op->fctx));
			else
				T_POST(ret, fi_recvv(T.ep, iov, NULL, n, T.peer,
					&op->fctx));
			T_CHECK(ret == 0, "recvv n=%zu: %s", n,
				fi_strerror((int)-ret));
			op->posted_rx = 1;
			if (t_sync())
				return -1;
			T_CHECK(t_wait(op, 1, T_WAIT_MS) == 0,
				"recvv n=%zu: no completion", n);
			T_CHECK(op->nerr == 0, "recvv n=%zu: error %s", n,
				fi_strerror(op->err.err));
			{
				size_t want = 0;
				for (size_t i = 0; i < n; i++)
					want += 1000 + i * 777;
				T_CHECK(op->ent[0].len == want, "recvv n=%zu: "
					"len %zu want %zu", n,
					op->ent[0].len, want);
				if (want > total)
					return t_fail("test bug: iov too small");
				size_t pos = 0;
				for (size_t i = 0; i < n && pos < want; i++) {
					unsigned char *b = iov[i].iov_base;
					for (size_t j = 0; j < iov[i].iov_len &&
					     pos < want; j++, pos++)
						T_CHECK(b[j] == t_byte(seed, pos),
							"%s n=%zu: byte %zu "
							"(iov %zu+%zu) wrong",
							tagged ? "trecvv" :
							"recvv", n, pos, i, j);
				}
			}
			if (t_sync())
				return -1;
		}
	}
	return 0;
}

static int st_match(void)
{
	uint64_t base = T_TAGBASE(T.test);
	struct test_op *wild, *exact, *fromb2, *fromb1, *any;
	ssize_t ret;

	if (T.side == 1) {
		struct test_op *o[4];
		if (t_sync())
			return -1;
		/* matched by exact tag, then by the ignore-bits receive */
		o[0] = t_post_tx(T.ep, 0, 10, base | 0x3400, 0, 1);
		if (!o[0] || t_wait_tx(o[0], 10))
			return -1;
		o[1] = t_post_tx(T.ep, 0, 11, base | 0x12ab, 0, 2);
		if (!o[1] || t_wait_tx(o[1], 11) || t_sync() || t_sync())
			return -1;
		/* directed receive: same tag from the second endpoint first */
		o[2] = t_post_tx(T.ep2, 0, 12, base | 0x77, 0, 3);
		if (!o[2] || t_wait_tx(o[2], 12))
			return -1;
		o[3] = t_post_tx(T.ep, 0, 13, base | 0x77, 0, 4);
		if (!o[3] || t_wait_tx(o[3], 13))
			return -1;
		o[0] = t_post_tx(T.ep2, 0, 14, base | 0x78, 0, 5);
		if (!o[0] || t_wait_tx(o[0], 14))
			return -1;
		return t_sync();
	}
	/* Separate buffers: several receives are posted at once. */
	wild = t_op();
	exact = t_op();
	memset(T.rbuf, 0xee, 4096);
	T_POST(ret, fi_trecv(T.ep, T.rbuf, 100, NULL, T.peer, base | 0x1200,
			     0xff, &wild->fctx));
	T_CHECK(ret == 0, "trecv: %s", fi_strerror((int)-ret));
	wild->posted_rx = 1;
	T_POST(ret, fi_trecv(T.ep, T.rbuf + 1024, 100, NULL, T.peer,
			     base | 0x3400, 0, &exact->fctx));
	T_CHECK(ret == 0, "trecv: %s", fi_strerror((int)-ret));
	exact->posted_rx = 1;
	if (t_sync() || t_sync())
		return -1;
	T_CHECK(t_wait(exact, 1, T_WAIT_MS) == 0 &&
		t_wait(wild, 1, T_WAIT_MS) == 0, "ignore bits: receives did "
		"not complete (exact %d, wild %d)", exact->n, wild->n);
	T_CHECK(exact->nerr == 0 && exact->ent[0].len == 10 &&
		exact->ent[0].tag == (base | 0x3400), "exact-tag receive got "
		"len %zu tag %#lx", exact->ent[0].len,
		(unsigned long)exact->ent[0].tag);
	T_CHECK(wild->nerr == 0 && wild->ent[0].len == 11 &&
		wild->ent[0].tag == (base | 0x12ab), "ignore-bits receive got "
		"len %zu tag %#lx (want the sender's full tag %#lx)",
		wild->ent[0].len, (unsigned long)wild->ent[0].tag,
		(unsigned long)(base | 0x12ab));
	T_CHECK(t_verify(T.rbuf + 1024, 10, 1) < 0 && t_verify(T.rbuf, 11, 2) < 0,
		"ignore bits: data mismatch");

	fromb2 = t_op();
	fromb1 = t_op();
	any = t_op();
	/* posted: (B1, 0x77) first, then (B2, 0x77), then (any, 0x78) */
	T_POST(ret, fi_trecv(T.ep, T.rbuf2, 100, NULL, T.peer, base | 0x77, 0,
			     &fromb1->fctx));
	T_CHECK(ret == 0, "trecv: %s", fi_strerror((int)-ret));
	fromb1->posted_rx = 1;
	T_POST(ret, fi_trecv(T.ep, T.rbuf2 + 1024, 100, NULL, T.peer2,
			     base | 0x77, 0, &fromb2->fctx));
	T_CHECK(ret == 0, "trecv: %s", fi_strerror((int)-ret));
	fromb2->posted_rx = 1;
	T_POST(ret, fi_trecv(T.ep, T.rbuf2 + 2048, 100, NULL, FI_ADDR_UNSPEC,
			     base | 0x78, 0, &any->fctx));
	T_CHECK(ret == 0, "trecv: %s", fi_strerror((int)-ret));
	any->posted_rx = 1;
	if (t_sync())
		return -1;
	T_CHECK(t_wait(fromb1, 1, T_WAIT_MS) == 0 &&
		t_wait(fromb2, 1, T_WAIT_MS) == 0 &&
		t_wait(any, 1, T_WAIT_MS) == 0, "directed: receives did not "
		"complete (%d %d %d)", fromb1->n, fromb2->n, any->n);
	T_CHECK(fromb2->nerr == 0 && fromb2->ent[0].len == 12,
		"directed receive from B2 got len %zu (want 12: message from "
		"the other source matched it)", fromb2->ent[0].len);
	T_CHECK(fromb1->nerr == 0 && fromb1->ent[0].len == 13,
		"directed receive from B1 got len %zu, want 13",
		fromb1->ent[0].len);
	T_CHECK(any->nerr == 0 && any->ent[0].len == 14,
		"FI_ADDR_UNSPEC receive got len %zu, want 14", any->ent[0].len);
	T_CHECK(t_verify(T.rbuf2 + 1024, 12, 3) < 0 &&
		t_verify(T.rbuf2, 13, 4) < 0 &&
		t_verify(T.rbuf2 + 2048, 14, 5) < 0, "directed: data mismatch");
	if (T.have_source) {
		T_CHECK(fromb1->src[0] == T.peer && fromb2->src[0] == T.peer2 &&
			any->src[0] == T.peer2, "FI_SOURCE: addresses %lu %lu "
			"%lu, want %lu %lu %lu", (unsigned long)fromb1->src[0],
			(unsigned long)fromb2->src[0],
			(unsigned long)any->src[0], (unsigned long)T.peer,
			(unsigned long)T.peer2, (unsigned long)T.peer2);
	}
	return t_sync();
}

static int st_peek(void)
{
	uint64_t base = T_TAGBASE(T.test);

	for (size_t i = 0; i < t_nsweep + 3; i++) {
		/* the last three rounds: claim, discard, nothing there */
		size_t len = i < t_nsweep ? t_sweep[i] : 1000;
		uint32_t seed = 900u + (uint32_t)i;
		uint64_t tag = base | seed;
		uint64_t data = T.cq_data ? 0xabcu + i : 0;
		int nmsg = i == t_nsweep + 1 ? 2 : i == t_nsweep + 2 ? 0 : 1;
		struct test_op *pk = NULL, *rx;
		ssize_t ret;

		if (!t_size_ok(len))
			continue;
		if (T.side == 1) {
			for (int k = 0; k < nmsg; k++) {
				struct test_op *tx = t_post_tx(T.ep,
					T.cq_data ? 2 : 0, len, tag, data,
					seed + (uint32_t)k * 1000u);
				if (!tx)
					return -1;
				if (t_sync() || t_wait_tx(tx, len))
					return -1;
			}
			if (t_sync())
				return -1;
			continue;
		}
		for (int k = 0; k < nmsg; k++)
			if (t_sync())
				return -1;
		if (nmsg == 0) {
			pk = t_op();
			ret = t_trecvmsg(NULL, 0, base | 0xfffff, pk, FI_PEEK);
			T_CHECK(ret == 0, "peek: %s", fi_strerror((int)-ret));
			T_CHECK(t_wait(pk, 1, T_WAIT_MS) == 0, "peek of nothing:"
				" no completion");
			T_CHECK(pk->nerr == 1 && pk->err.err == FI_ENOMSG,
				"peek of nothing: want FI_ENOMSG error entry, "
				"got %s", pk->nerr ? fi_strerror(pk->err.err) :
				"success");
			T_CHECK(pk->err.op_context == &pk->fctx,
				"FI_ENOMSG entry: wrong op_context");
			if (t_sync())
				return -1;
			continue;
		}
		if (t_peek(tag, i == t_nsweep ? FI_CLAIM :
			   i == t_nsweep + 1 ? FI_DISCARD : 0, &pk))
			return -1;
		/* A discarding peek need not describe the message it drops;
		 * every other peek must report what a receive would. */
		T_CHECK(pk->ent[0].tag == tag && (pk->ent[0].len == len ||
			i == t_nsweep + 1), "peek len %zu: reported len %zu "
			"tag %#lx", len, pk->ent[0].len,
			(unsigned long)pk->ent[0].tag);
		T_CHECK(!T.cq_data || pk->ent[0].data == data, "peek len %zu: "
			"data %#lx, want %#lx", len,
			(unsigned long)pk->ent[0].data, (unsigned long)data);
		memset(T.rbuf, 0xee, len + 1);
		if (i == t_nsweep) {
			/* claimed: receive with the same context + FI_CLAIM */
			pk->n = 0;
			pk->posted_rx = 1;
			ret = t_trecvmsg(T.rbuf, len, tag, pk, FI_CLAIM);
			T_CHECK(ret == 0, "FI_CLAIM receive: %s",
				fi_strerror((int)-ret));
			rx = pk;
		} else if (i == t_nsweep + 1) {
			/* the first was discarded: expect the second */
			rx = t_post_rx(1, len, tag, 0, T.peer);
			seed += 1000u;
		} else {
			/* a peek must leave the message queued */
			rx = t_post_rx(1, len, tag, 0, T.peer);
		}
		if (!rx)
			return -1;
		T_CHECK(t_wait(rx, 1, T_WAIT_MS) == 0, "receive after peek "
			"(len %zu): no completion", len);
		if (t_check_rx(rx, 0, len, tag, FI_TAGGED | FI_RECV, T.rbuf,
			       seed, i == t_nsweep ? "claim" :
			       i == t_nsweep + 1 ? "after discard" :
			       "after peek"))
			return -1;
		if (t_sync())
			return -1;
	}
	return 0;
}

static int st_cancel(void)
{
	uint64_t tag = T_TAGBASE(T.test) | 1;
	struct test_op *op, *bogus, *rx;
	int ret;

	if (T.side == 1) {
		struct test_op *tx;
		if (t_sync())
			return -1;
		tx = t_post_tx(T.ep, 0, 100, tag, 0, 42);
		if (!tx || t_wait_tx(tx, 100))
			return -1;
		return t_sync();
	}
	op = t_post_rx(1, 100, tag, 0, T.peer);
	if (!op)
		return -1;
	ret = fi_cancel(&T.ep->fid, &op->fctx);
	T_CHECK(ret == 0, "fi_cancel of posted receive: %s",
		fi_strerror(-ret));
	T_CHECK(t_wait(op, 1, T_WAIT_MS) == 0, "cancel: no completion");
	T_CHECK(op->nerr == 1 && op->err.err == FI_ECANCELED, "cancel: want "
		"FI_ECANCELED error entry, got %s",
		op->nerr ? fi_strerror(op->err.err) : "success");
	T_CHECK(op->err.op_context == &op->fctx, "cancel: wrong op_context");
	bogus = t_op();
	ret = fi_cancel(&T.ep->fid, &bogus->fctx);
	T_CHECK(ret == 0 || ret == -FI_ENOENT, "fi_cancel(unknown context) "
		"returned %s", fi_strerror(-ret));
	t_spin(5);
	T_CHECK(bogus->n == 0, "cancel of unknown context produced a "
		"completion");
	/* the endpoint still works and the cancelled buffer stays unused */
	rx = t_op();
	memset(T.rbuf2, 0xee, 101);
	ret = (int)fi_trecv(T.ep, T.rbuf2, 100, NULL, T.peer, tag, 0,
			    &rx->fctx);
	T_CHECK(ret == 0, "trecv after cancel: %s", fi_strerror(-ret));
	rx->posted_rx = 1;
	if (t_sync())
		return -1;
	T_CHECK(t_wait(rx, 1, T_WAIT_MS) == 0, "receive after cancel: no "
		"completion");
	if (t_check_rx(rx, 0, 100, tag, FI_TAGGED | FI_RECV, T.rbuf2, 42,
		       "after cancel"))
		return -1;
	T_CHECK(op->n == 1, "cancelled receive completed again");
	return t_sync();
}

#define ORD_N 1000
#define ORD_WIN 14 /* 14 slots of ORD_SLOT fit in T_BUFSZ */
#define ORD_SLOT 70000

static size_t t_ord_len(int i)
{
	static const size_t l[] = { 8, 64, 1000, 4000, 9000, 20000, 0, 69999 };
	size_t len = l[(unsigned)i % 8];
	return len <= T.max_msg ? len : T.max_msg;
}

static int st_order(void)
{
	uint64_t tag = T_TAGBASE(T.test) | 5;
	static struct test_op *rx[ORD_N];

	if (T.side == 1) {
		/* One send in flight per slot of a window; each slot's source
		 * region is separate so pending sends keep their data. */
		static struct test_op *tx[ORD_N];
		if (t_sync())
			return -1;
		for (int i = 0; i < ORD_N; i++) {
			char *b = T.sbuf + (size_t)(i % 8) * ORD_SLOT;
			size_t len = t_ord_len(i);
			ssize_t ret;
			if (i >= 8 && t_wait(tx[i - 8], 1, T_WAIT_MS))
				return t_fail("order: send %d not completed",
					      i - 8);
			t_fill(b, len, 3000u + (uint32_t)i);
			tx[i] = t_op();
			T_POST(ret, fi_tsend(T.ep, b, len, NULL, T.peer, tag,
					     &tx[i]->fctx));
			T_CHECK(ret == 0, "order: send %d: %s", i,
				fi_strerror((int)-ret));
		}
		for (int i = ORD_N - 8; i < ORD_N; i++)
			T_CHECK(t_wait(tx[i], 1, T_WAIT_MS) == 0, "order: send "
				"%d not completed", i);
		return t_sync();
	}
	/* Receiver: a window of ORD_WIN receives, each with a full-size
	 * slot, re-posted in order as they complete.  Same tag and source,
	 * so message k must land in the k-th posted receive. */
	T.nops = 0;
	for (int i = 0; i < ORD_N + ORD_WIN; i++) {
		if (i >= ORD_WIN) {
			int k = i - ORD_WIN;
			char *b = T.rbuf + (size_t)(k % ORD_WIN) * ORD_SLOT;
			size_t len = t_ord_len(k);
			long bad;
			T_CHECK(t_wait(rx[k], 1, T_WAIT_MS) == 0, "order: "
				"receive %d not completed", k);
			T_CHECK(rx[k]->nerr == 0, "order: receive %d error %s",
				k, fi_strerror(rx[k]->err.err));
			T_CHECK(rx[k]->ent[0].len == len, "order: receive %d "
				"has len %zu, want %zu (out of order)", k,
				rx[k]->ent[0].len, len);
			bad = t_verify(b, len, 3000u + (uint32_t)k);
			T_CHECK(bad < 0, "order: message %d data mismatch at "
				"%ld (out of order?)", k, bad);
		}
		if (i < ORD_N) {
			char *b = T.rbuf + (size_t)(i % ORD_WIN) * ORD_SLOT;
			ssize_t ret;
			rx[i] = t_op();
			T_POST(ret, fi_trecv(T.ep, b, ORD_SLOT, NULL, T.peer,
					     tag, 0, &rx[i]->fctx));
			T_CHECK(ret == 0, "order: trecv %d: %s", i,
				fi_strerror((int)-ret));
			rx[i]->posted_rx = 1;
		}
		if (i == ORD_WIN - 1 && t_sync())
			return -1;
	}
	return t_sync();
}

static int st_multi_recv(void)
{
	const size_t bufsz = 16384, mlen = 4000;
	const int nmsg = 4; /* 16000 used, 384 < 4096 left: released */

	if (T.side == 1) {
		if (t_sync())
			return -1;
		for (int i = 0; i < nmsg; i++) {
			struct test_op *tx = t_post_tx(T.ep, 1, mlen, 0, 0,
						       1100u + (uint32_t)i);
			if (!tx || t_wait_tx(tx, mlen))
				return -1;
		}
		return t_sync();
	}
	struct test_op *op = t_op();
	struct iovec iov = { .iov_base = T.rbuf, .iov_len = bufsz };
	struct fi_msg m = { .msg_iov = &iov, .iov_count = 1, .addr = T.peer,
			    .context = &op->fctx };
	ssize_t ret;
	size_t next = 0;
	int released = 0;

	T_POST(ret, fi_recvmsg(T.ep, &m, FI_MULTI_RECV | FI_COMPLETION));
	T_CHECK(ret == 0, "fi_recvmsg(FI_MULTI_RECV): %s",
		fi_strerror((int)-ret));
	op->posted_rx = 1;
	if (t_sync())
		return -1;
	T_CHECK(t_wait(op, nmsg, T_WAIT_MS) == 0, "multi-recv: %d of %d "
		"completions", op->n, nmsg);
	t_spin(20); /* a separate release entry may follow */
	T_CHECK(op->nerr == 0, "multi-recv: error %s",
		fi_strerror(op->err.err));
	for (int i = 0; i < op->n && i < T_MAXENT; i++) {
		struct fi_cq_tagged_entry *e = &op->ent[i];
		size_t off;
		if (e->len == 0 && (e->flags & FI_MULTI_RECV) && i == nmsg) {
			released = 1;
			continue;
		}
		T_CHECK(i < nmsg, "multi-recv: unexpected entry %d len %zu", i,
			e->len);
		T_CHECK(e->len == mlen && (e->flags & FI_RECV),
			"multi-recv entry %d: len %zu flags %#lx", i, e->len,
			(unsigned long)e->flags);
		off = (size_t)((char *)e->buf - T.rbuf);
		T_CHECK(e->buf && off >= next && off + mlen <= bufsz,
			"multi-recv entry %d: buf offset %zu not consecutive "
			"(next free %zu)", i, off, next);
		T_CHECK(t_verify(e->buf, mlen, 1100u + (uint32_t)i) < 0,
			"multi-recv entry %d: data mismatch", i);
		if (e->flags & FI_MULTI_RECV) {
			T_CHECK(i == nmsg - 1, "multi-recv: buffer released "
				"early at entry %d", i);
			released = 1;
		}
		next = off + mlen;
	}
	T_CHECK(released, "multi-recv: no FI_MULTI_RECV flag after the "
		"buffer fell below FI_OPT_MIN_MULTI_RECV");
	return t_sync();
}

/* Truncation at every protocol: inline, one packet, multi-packet eager
 * and rendezvous (a 64 MiB message into a 1 MiB + 1 buffer, 16 MiB into
 * an eager-sized one, 16385 into 16384), expected and unexpected. */
static int st_trunc(void)
{
	static const size_t lens[][2] = {
		{ 17, 16 },		 { 1000, 100 },
		{ 8193, 8192 },		 { 20000, 2000 },
		{ 16385, 16384 },	 { 16385, 0 },
		{ 65537, 6553 },	 { 4 * T_MIB + 1, 419430 },
		{ 16 * T_MIB, 16384 },	 { 64 * T_MIB, T_MIB + 1 },
	};
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]) * 2; k++) {
		size_t len = lens[k / 2][0], blen = lens[k / 2][1];
		int expected = !(k & 1);
		uint32_t seed = 1200u + (uint32_t)k;
		uint64_t tag = T_TAGBASE(T.test) | k;
		struct test_op *op = NULL;
		if (!t_size_ok(len))
			continue;
		if (T.side == 1) {
			if (t_sync())
				return -1;
			op = t_post_tx(T.ep, 0, len, tag, 0, seed);
			if (!op || t_sync() || t_wait_tx(op, len) || t_sync())
				return -1;
			continue;
		}
		if (expected && !(op = t_post_rx(1, blen, tag, 0, T.peer)))
			return -1;
		if (t_sync() || t_sync())
			return -1;
		if (!expected) {
			t_spin(2); /* let the message arrive unexpected */
			if (!(op = t_post_rx(1, blen, tag, 0, T.peer)))
				return -1;
		}
		T_CHECK(t_wait(op, 1, T_WAIT_MS) == 0, "trunc %zu->%zu (%s): "
			"no completion", len, blen,
			expected ? "expected" : "unexpected");
		t_spin(1); /* a second (wrong) entry would show up now */
		T_CHECK(op->nerr == 1 && op->n == 1 &&
			op->err.err == FI_ETRUNC, "trunc %zu->%zu (%s): want "
			"one FI_ETRUNC (%d) error entry, got %d entries, %d "
			"errors (err %d: %s)", len, blen,
			expected ? "expected" : "unexpected", FI_ETRUNC, op->n,
			op->nerr, op->err.err, op->nerr ?
			fi_strerror(op->err.err) : "success");
		T_CHECK(op->err.olen == len - blen, "trunc %zu->%zu: olen %zu, "
			"want %zu", len, blen, op->err.olen, len - blen);
		T_CHECK(op->err.op_context == &op->fctx, "trunc: op_context");
		T_CHECK(op->err.tag == tag, "trunc %zu->%zu: tag %#lx, want "
			"%#lx", len, blen, (unsigned long)op->err.tag,
			(unsigned long)tag);
		T_CHECK(t_verify(T.rbuf, blen, seed) < 0 &&
			(unsigned char)T.rbuf[blen] == 0xee,
			"trunc %zu->%zu (%s): buffer contents wrong or overrun",
			len, blen, expected ? "expected" : "unexpected");
		if (t_sync())
			return -1;
	}
	return 0;
}

#define FLOOD_N 2000

static size_t t_flood_len(int i)
{
	return i % 10 == 9 ? 100 : i % 10 == 4 ? 0 : 64;
}

static int st_flood(void)
{
	uint64_t tag = T_TAGBASE(T.test) | 9;
	static struct test_op *tx[FLOOD_N];

	if (T.side == 1) {
		int posted = 0, eagain = 0;
		int64_t end = t_now_ms() + 2000;
		/* Phase 1 (receiver idle): post until done or 2 s of
		 * back-pressure.  Phase 2 (receiver draining): the rest. */
		for (int phase = 0; phase < 2; phase++) {
			while (posted < FLOOD_N && t_now_ms() < end) {
				size_t len = t_flood_len(posted);
				char *b = T.sbuf + (size_t)posted * 128;
				ssize_t ret;
				t_fill(b, len, 4000u + (uint32_t)posted);
				tx[posted] = t_op();
				ret = fi_tsend(T.ep, b, len, NULL, T.peer, tag,
					       &tx[posted]->fctx);
				if (ret == -FI_EAGAIN) {
					eagain++;
					T.nops--;
					t_progress();
					continue;
				}
				T_CHECK(ret == 0, "flood: send %d: %s", posted,
					fi_strerror((int)-ret));
				posted++;
			}
			if (phase == 0) {
				if (T.verbose)
					fprintf(stderr, "# flood: %d posted "
						"before the receiver started, "
						"%d -FI_EAGAIN\n", posted,
						eagain);
				if (t_sync())
					return -1;
				end = t_now_ms() + 3 * T_WAIT_MS;
			}
		}
		T_CHECK(posted == FLOOD_N, "flood: only %d of %d sends accepted",
			posted, FLOOD_N);
		for (int i = 0; i < FLOOD_N; i++)
			T_CHECK(t_wait(tx[i], 1, T_WAIT_MS) == 0 &&
				tx[i]->nerr == 0, "flood: send %d did not "
				"complete cleanly", i);
		return t_sync();
	}
	if (t_sync())
		return -1;
	T.nops = 0;
	for (int i = 0; i < FLOOD_N; i++) {
		size_t len = t_flood_len(i);
		struct test_op *op = t_post_rx(1, 128, tag, 0, T.peer);
		if (!op)
			return -1;
		T_CHECK(t_wait(op, 1, T_WAIT_MS) == 0, "flood: receive %d not "
			"completed", i);
		if (t_check_rx(op, 0, len, tag, FI_TAGGED | FI_RECV, T.rbuf,
			       4000u + (uint32_t)i, "flood"))
			return -1;
		T.nops = 0;
	}
	return t_sync();
}

#define T_G_ACCEPTED 126
#define T_G_OTHER 125
#define T_G_CRASH 1000

static const char *t_gstr(int r)
{
	static char b[64];
	if (r == T_G_CRASH)
		return "the call crashed the process";
	if (r == T_G_ACCEPTED)
		return "returned 0";
	if (r == T_G_OTHER)
		return "returned an unlisted error";
	snprintf(b, sizeof(b), "returned -%s", fi_strerror(r));
	return b;
}

/* Make one invalid call in a forked copy of this process, so a provider
 * that crashes on bad arguments fails the check instead of killing the
 * suite.  The child only makes the call and exits; it never polls, so it
 * cannot steal the parent's traffic.  Returns the positive error code,
 * T_G_ACCEPTED when the call returned 0, or T_G_CRASH. */
static int t_guarded(int which)
{
	pid_t pid = fork();
	int st = 0;

	if (pid == 0) {
		struct iovec iov[65];
		struct test_op *op = t_op();
		uint64_t tag = T_TAGBASE(T.test) | 0xbad;
		ssize_t ret;

		alarm(10);
		for (int i = 0; i < 65; i++) {
			iov[i].iov_base = T.sbuf;
			iov[i].iov_len = 1;
		}
		if (which == 0)
			ret = fi_tsend(T.ep, T.sbuf, 8, NULL, (fi_addr_t)12345,
				       tag, &op->fctx);
		else if (which == 1)
			ret = fi_tsend(T.ep, T.sbuf, T.max_msg + 1, NULL,
				       T.peer, tag, &op->fctx);
		else if (which == 2)
			ret = fi_tsendv(T.ep, iov, NULL, T.iov_limit + 1,
					T.peer, tag, &op->fctx);
		else
			ret = fi_tinject(T.ep, T.sbuf, T.inject + 1, T.peer,
					 tag);
		_exit(ret == 0 ? T_G_ACCEPTED :
		      -ret > 0 && -ret < T_G_OTHER ? (int)-ret : T_G_OTHER);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return T_G_OTHER;
	if (!WIFEXITED(st))
		return T_G_CRASH;
	/* libfabric's SIGSEGV handler exits with status 1 (FI_EPERM would
	 * also be 1; no valid answer here is EPERM). */
	return WEXITSTATUS(st) == 1 ? T_G_CRASH : WEXITSTATUS(st);
}

static int st_negative(void)
{
	uint64_t tag = T_TAGBASE(T.test);
	struct test_op *op;
	ssize_t ret;

	if (T.side == 0) {
		int r;

		r = t_guarded(0);
		if (r == T_G_ACCEPTED) {
			/* accepted: the error must then come through the CQ */
			op = t_op();
			ret = fi_tsend(T.ep, T.sbuf, 8, NULL, (fi_addr_t)12345,
				       tag, &op->fctx);
			T_EXPECT(ret != 0 || (t_wait(op, 1, T_WAIT_MS) == 0 &&
					     op->nerr), "fi_tsend to invalid "
				"fi_addr: returned 0 and no error completion");
		} else {
			T_EXPECT(r == FI_EINVAL, "fi_tsend to invalid fi_addr: "
				"%s, want -FI_EINVAL", t_gstr(r));
		}
		if (T.max_msg < ((size_t)1 << 40)) {
			r = t_guarded(1);
			T_EXPECT(r == FI_EMSGSIZE, "fi_tsend(len > max_msg_size "
				"%zu): %s, want -FI_EMSGSIZE", T.max_msg,
				t_gstr(r));
		}
		if (T.iov_limit < 64) {
			r = t_guarded(2);
			T_EXPECT(r == FI_EINVAL, "fi_tsendv(iov count %zu > "
				"iov_limit): %s, want -FI_EINVAL",
				T.iov_limit + 1, t_gstr(r));
		}
		if (T.inject + 1 < T_BUFSZ) {
			r = t_guarded(3);
			T_EXPECT(r == FI_EMSGSIZE, "fi_tinject(inject_size %zu "
				"+ 1): %s, want -FI_EMSGSIZE", T.inject,
				t_gstr(r));
		}
		/* still usable */
		op = t_post_tx(T.ep, 0, 300, tag | 1, 0, 1300);
		if (!op || t_wait_tx(op, 300))
			return -1;
		return t_sync();
	}
	op = t_op();
	memset(T.rbuf, 0xee, 301);
	T_POST(ret, fi_trecv(T.ep, T.rbuf, 300, NULL, T.peer, tag | 1, 0,
			     &op->fctx));
	T_CHECK(ret == 0, "trecv: %s", fi_strerror((int)-ret));
	op->posted_rx = 1;
	T_CHECK(t_wait(op, 1, T_WAIT_MS) == 0, "no message after the negative "
		"calls: endpoint unusable?");
	if (t_check_rx(op, 0, 300, tag | 1, FI_TAGGED | FI_RECV, T.rbuf, 1300,
		       "after negative"))
		return -1;
	return t_sync();
}


const struct subtest t_tests[] = {
	{ "tagged size sweep (expected and unexpected)", st_tagged_sweep, 0 },
	{ "msg sweep, senddata/tsenddata, inject variants", st_msg_data_inject,
	  0 },
	{ "sendv/recvv and tsendv/trecvv scatter", st_iov, 0 },
	{ "tag ignore bits, directed receive, FI_SOURCE", st_match, 0 },
	{ "FI_PEEK / FI_CLAIM / FI_DISCARD / FI_ENOMSG", st_peek, 0 },
	{ "fi_cancel", st_cancel, 0 },
	{ "ordering of 1000 mixed-size messages", st_order, 0 },
	{ "FI_MULTI_RECV", st_multi_recv, 1 },
	{ "truncation FI_ETRUNC", st_trunc, 0 },
	{ "unexpected flood", st_flood, 0 },
	{ "negative API checks", st_negative, 0 },
	/* large messages (rendezvous path set by FI_OPX_RNDV_CMA) */
	{ "multi-iov sendv/recvv 16 B..16 MiB, different splits, FI_ETRUNC",
	  st_iov_large, 0 },
	{ "fi_cancel of posted 4 MiB receives", st_cancel_large, 0 },
	{ "peek/claim/discard of unexpected rendezvous messages",
	  st_peek_large, 0 },
	{ "small-after-large ordering across protocols", st_order_large, 0 },
};
const size_t t_ntests = sizeof(t_tests) / sizeof(t_tests[0]);

