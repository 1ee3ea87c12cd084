/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_fi_subtests_large.c - the large-message subtests of opx_fi_test:
 * multi-iov sends and receives from 16 B to 16 MiB, cancel of posted 4 MiB
 * receives, peek/claim/discard of unexpected rendezvous messages and
 * small-after-large ordering across protocols.  They run like the others
 * (opx_fi_subtests.c, which lists them in t_tests[]); the rendezvous path
 * is the one the environment chooses (FI_OPX_RNDV_CMA).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "opx_fi_test.h"

/* ---- large messages: multi-iov, cancel, peek, ordering ------------------ */

/*
 * sendv/tsendv with 3-4 entries of odd sizes into recvv/trecvv with a
 * different split, at every threshold up to 16 MiB, expected and
 * unexpected; odd cases give the receiver 100 bytes more than the message
 * (the completion must say the message length).  The last case receives
 * into half the space: FI_ETRUNC across entries.
 */
int st_iov_large(void)
{
	static const size_t totals[] = { 16,	    17,		   8191,
					 8193,	    16383,	   16384,
					 16385,	    65537,	   T_MIB + 1,
					 4 * T_MIB + 7, 16 * T_MIB + 5 };
	static const unsigned sw[2][4] = { { 2, 7, 3, 0 }, { 5, 1, 7, 3 } };
	static const unsigned rw[2][4] = { { 4, 1, 6, 0 }, { 1, 3, 2, 5 } };
	const size_t ncase = sizeof(totals) / sizeof(totals[0]);
	size_t lim = T.iov_limit > 4 ? 4 : T.iov_limit;

	T_CHECK(lim >= 1, "iov_limit is 0");
	for (size_t c = 0; c < ncase * 4 + 1; c++) {
		int trunc = c == ncase * 4;
		size_t total = trunc ? 4 * T_MIB + 7 : totals[c / 4];
		int tagged = trunc || (c & 1);
		int expected = trunc || !(c & 2);
		size_t n = lim >= 4 && ((c / 4) & 1) ? 4 : lim >= 3 ? 3 : lim;
		size_t cap = trunc ? total / 2 : total + (c / 4 % 2 ? 100 : 0);
		const unsigned *w = T.side ? sw[n == 4] : rw[n == 4];
		uint32_t seed = 7000u + (uint32_t)c;
		uint64_t tag = T_TAGBASE(T.test) | c;
		struct iovec iov[4];
		size_t len[4], span, pos = 0, want;
		struct test_op *op = t_op();
		ssize_t ret;

		if (!t_size_ok(total * 2))
			continue;
		t_split(T.side ? total : cap, n, w, len);
		if (T.side == 1) {
			t_layout(T.sbuf, n, len, iov, 5, 0x77);
			for (size_t i = 0; i < n; i++)
				for (size_t j = 0; j < len[i]; j++)
					((unsigned char *)iov[i].iov_base)[j] =
						t_byte(seed, pos++);
			if (t_sync())
				return -1;
			if (tagged)
				T_POST(ret, fi_tsendv(T.ep, iov, NULL, n,
						      T.peer, tag, &op->fctx));
			else
				T_POST(ret, fi_sendv(T.ep, iov, NULL, n, T.peer,
						     &op->fctx));
			T_CHECK(ret == 0, "sendv n=%zu total %zu: %s", n,
				total, fi_strerror((int)-ret));
			if (t_sync() || t_wait_tx(op, total) || t_sync())
				return -1;
			continue;
		}
		span = t_layout(T.rbuf, n, len, iov, 3, 0xee);
		memset(T.rbuf, 0xee, span + 1);
		for (int when = 0; when < 2; when++) {
			if (when == (expected ? 0 : 1)) {
				if (!expected)
					t_spin(2);
				if (tagged)
					T_POST(ret, fi_trecvv(T.ep, iov, NULL,
						n, T.peer, tag, 0, &op->fctx));
				else
					T_POST(ret, fi_recvv(T.ep, iov, NULL, n,
						T.peer, &op->fctx));
				T_CHECK(ret == 0, "recvv n=%zu cap %zu: %s", n,
					cap, fi_strerror((int)-ret));
				op->posted_rx = 1;
			}
			if (when == 0 && (t_sync() || t_sync()))
				return -1;
		}
		T_CHECK(t_wait(op, 1, T_WAIT_MS) == 0, "%s n=%zu total %zu "
			"(%s): no completion", tagged ? "trecvv" : "recvv", n,
			total, expected ? "expected" : "unexpected");
		want = trunc ? cap : total;
		if (trunc) {
			T_CHECK(op->nerr == 1 && op->err.err == FI_ETRUNC &&
				op->err.olen == total - cap, "trecvv %zu into "
				"%zu: want FI_ETRUNC olen %zu, got %s olen %zu",
				total, cap, total - cap, op->nerr ?
				fi_strerror(op->err.err) : "success",
				op->err.olen);
		} else {
			T_CHECK(op->nerr == 0, "%s n=%zu total %zu: error %s",
				tagged ? "trecvv" : "recvv", n, total,
				fi_strerror(op->err.err));
			T_CHECK(op->ent[0].len == total, "recvv n=%zu: len %zu "
				"want %zu (capacity %zu)", n, op->ent[0].len,
				total, cap);
		}
		/* data in entry order, capacity beyond the message and the
		 * gaps between entries untouched */
		pos = 0;
		for (size_t i = 0; i < n; i++) {
			const unsigned char *b = iov[i].iov_base;
			for (size_t j = 0; j < len[i]; j++, pos++) {
				int got = b[j], exp = pos < want ?
					t_byte(seed, pos) : 0xee;
				T_CHECK(got == exp, "%s total %zu n=%zu (%s): "
					"byte %zu (entry %zu+%zu) is %#x, want "
					"%#x", tagged ? "trecvv" : "recvv",
					total, n, expected ? "expected" :
					"unexpected", pos, i, j, got, exp);
			}
			T_CHECK(b[len[i]] == 0xee && b[len[i] + 2] == 0xee,
				"recvv total %zu: wrote into the gap after "
				"entry %zu", total, i);
		}
		if (t_sync())
			return -1;
	}
	return 0;
}

/* Cancel of posted large receives: the cancelled buffer is never written
 * and the message goes to the next matching receive, also when the
 * cancelled one was at the head of the posted queue for that tag. */
int st_cancel_large(void)
{
	const size_t len = 4 * T_MIB + 1, gap = 8 * T_MIB;
	uint64_t t1 = T_TAGBASE(T.test) | 1, t2 = T_TAGBASE(T.test) | 2;
	struct test_op *op[4];
	ssize_t ret;

	if (!t_size_ok(len + gap))
		return 0;
	if (T.side == 1) {
		struct test_op *tx[2];
		t_fill(T.sbuf, len, 51);
		t_fill(T.sbuf + gap, len, 52);
		if (t_sync())
			return -1;
		for (int k = 0; k < 2; k++) {
			tx[k] = t_op();
			T_POST(ret, fi_tsend(T.ep, T.sbuf + (size_t)k * gap,
					     len, NULL, T.peer, k ? t2 : t1,
					     &tx[k]->fctx));
			T_CHECK(ret == 0, "tsend %d: %s", k,
				fi_strerror((int)-ret));
		}
		if (t_sync() || t_wait_tx(tx[0], len) || t_wait_tx(tx[1], len))
			return -1;
		return t_sync();
	}
	memset(T.rbuf, 0xee, len + 1);
	memset(T.rbuf2, 0xee, len + 1);
	memset(T.rbuf2 + gap, 0xee, len + 1);
	/* op0 (rbuf, t1) cancelled before op1 (rbuf2, t1) is posted;
	 * op2 (rbuf, t2) posted before op3 (rbuf2 + gap, t2), then op2
	 * cancelled: the head of the queue for t2 goes away. */
	for (int k = 0; k < 4; k++) {
		char *buf = k == 0 || k == 2 ? T.rbuf :
			    k == 1 ? T.rbuf2 : T.rbuf2 + gap;
		op[k] = t_op();
		T_POST(ret, fi_trecv(T.ep, buf, len, NULL, T.peer,
				     k < 2 ? t1 : t2, 0, &op[k]->fctx));
		T_CHECK(ret == 0, "trecv %d: %s", k, fi_strerror((int)-ret));
		op[k]->posted_rx = 1;
		if (k == 0 || k == 3) {
			int c = k == 0 ? 0 : 2;
			ret = fi_cancel(&T.ep->fid, &op[c]->fctx);
			T_CHECK(ret == 0, "fi_cancel of posted %zu-byte receive "
				"%d: %s", len, c, fi_strerror((int)-ret));
			T_CHECK(t_wait(op[c], 1, T_WAIT_MS) == 0, "cancel %d: "
				"no completion", c);
			T_CHECK(op[c]->nerr == 1 &&
				op[c]->err.err == FI_ECANCELED &&
				op[c]->err.op_context == &op[c]->fctx,
				"cancel %d: want FI_ECANCELED for its context, "
				"got %s", c, op[c]->nerr ?
				fi_strerror(op[c]->err.err) : "success");
		}
	}
	if (t_sync() || t_sync())
		return -1;
	T_CHECK(t_wait(op[1], 1, T_WAIT_MS) == 0 &&
		t_wait(op[3], 1, T_WAIT_MS) == 0, "receives after cancel did "
		"not complete (%d, %d)", op[1]->n, op[3]->n);
	if (t_check_rx(op[1], 0, len, t1, FI_TAGGED | FI_RECV, T.rbuf2, 51,
		       "after cancel") ||
	    t_check_rx(op[3], 0, len, t2, FI_TAGGED | FI_RECV, T.rbuf2 + gap,
		       52, "after cancel of the queue head"))
		return -1;
	for (size_t i = 0; i <= len; i++)
		T_CHECK((unsigned char)T.rbuf[i] == 0xee, "cancelled receive "
			"buffer written at offset %zu", i);
	T_CHECK(op[0]->n == 1 && op[2]->n == 1, "a cancelled receive "
		"completed again (%d, %d)", op[0]->n, op[2]->n);
	return t_sync();
}

/*
 * FI_PEEK, FI_PEEK|FI_CLAIM then FI_CLAIM, FI_PEEK|FI_DISCARD and
 * FI_PEEK|FI_CLAIM then FI_CLAIM|FI_DISCARD on unexpected rendezvous
 * messages.  A discarded rendezvous message still completes its send.
 */
int st_peek_large(void)
{
	static const size_t lens[] = { 16385, 4 * T_MIB + 1 };
	uint64_t base = T_TAGBASE(T.test);

	for (size_t c = 0; c < 8; c++) {
		size_t len = lens[c / 4], slot = len + 64;
		int mode = (int)(c % 4); /* peek, claim, discard, claim+discard */
		int nmsg = mode >= 2 ? 2 : 1;
		uint32_t seed = 8000u + (uint32_t)c * 10u;
		uint64_t tag = base | c, data = 0xfeed00u + c;
		static const char *const name[] = { "peek", "claim", "discard",
						    "claim+discard" };
		struct test_op *pk, *rx;
		ssize_t ret;

		if (!t_size_ok(2 * slot))
			continue;
		if (T.side == 1) {
			struct test_op *tx[2];
			for (int k = 0; k < nmsg; k++) {
				char *b = T.sbuf + (size_t)k * slot;
				t_fill(b, len, seed + (uint32_t)k);
				tx[k] = t_op();
				T_POST(ret, fi_tsenddata(T.ep, b, len, NULL,
					data, T.peer, tag, &tx[k]->fctx));
				T_CHECK(ret == 0, "tsenddata: %s",
					fi_strerror((int)-ret));
			}
			if (t_sync())
				return -1;
			for (int k = 0; k < nmsg; k++)
				if (t_wait_tx(tx[k], len))
					return t_fail("%s len %zu: send %d (%s) "
						      "did not complete",
						      name[mode], len, k,
						      k ? "kept" : "peeked");
			if (t_sync())
				return -1;
			continue;
		}
		if (t_sync())
			return -1;
		if (t_peek(tag, mode == 1 || mode == 3 ? FI_CLAIM :
			   mode == 2 ? FI_DISCARD : 0, &pk))
			return -1;
		T_CHECK(pk->ent[0].tag == tag && (pk->ent[0].len == len ||
			mode == 2), "%s len %zu: peek reported len %zu tag %#lx",
			name[mode], len, pk->ent[0].len,
			(unsigned long)pk->ent[0].tag);
		T_CHECK(mode == 2 || pk->ent[0].data == data, "%s len %zu: "
			"peek data %#lx, want %#lx", name[mode], len,
			(unsigned long)pk->ent[0].data, (unsigned long)data);
		if (mode == 3) {
			pk->n = 0;
			ret = t_trecvmsg(NULL, 0, tag, pk, FI_CLAIM | FI_DISCARD);
			T_CHECK(ret == 0, "FI_CLAIM|FI_DISCARD: %s",
				fi_strerror((int)-ret));
			T_CHECK(t_wait(pk, 1, T_WAIT_MS) == 0,
				"FI_CLAIM|FI_DISCARD len %zu: no completion",
				len);
		}
		memset(T.rbuf, 0xee, len + 1);
		if (mode == 1) {
			pk->n = 0;
			pk->posted_rx = 1;
			ret = t_trecvmsg(T.rbuf, len, tag, pk, FI_CLAIM);
			T_CHECK(ret == 0, "FI_CLAIM receive: %s",
				fi_strerror((int)-ret));
			rx = pk;
		} else if (!(rx = t_post_rx(1, len, tag, 0, T.peer))) {
			return -1;
		}
		T_CHECK(t_wait(rx, 1, T_WAIT_MS) == 0, "receive after %s (len "
			"%zu): no completion", name[mode], len);
		if (t_check_rx(rx, 0, len, tag, FI_TAGGED | FI_RECV, T.rbuf,
			       seed + (mode >= 2 ? 1u : 0u), name[mode]))
			return -1;
		if (t_sync())
			return -1;
	}
	return 0;
}

/*
 * Small-after-large: messages of every protocol with one tag (and
 * untagged) to one peer, received by FI_ADDR_UNSPEC receives of the
 * largest size: the k-th receive must get the k-th message (MPI's
 * non-overtaking rule depends on it), posted before or after arrival.
 */
int st_order_large(void)
{
	static const size_t seq_a[] = { 4 * T_MIB, 8 };
	static const size_t seq_b[] = { 65537, 16,	 4 * T_MIB, 8193,
					0,     16385,	 T_MIB + 1, 8,
					15,    4 * T_MIB - 1 };
	const size_t slot = 4 * T_MIB + 64;

	if (!t_size_ok(10 * slot))
		return 0;
	for (int c = 0; c < 8; c++) {
		const size_t *seq = c & 4 ? seq_b : seq_a;
		int n = c & 4 ? (int)(sizeof(seq_b) / sizeof(seq_b[0])) : 2;
		int tagged = !(c & 1), expected = !(c & 2);
		uint64_t tag = T_TAGBASE(T.test) | (uint64_t)c;
		uint32_t seed = 9000u + (uint32_t)c * 16u;
		struct test_op *op[10];
		size_t off = 0;
		ssize_t ret;

		if (T.side == 1) {
			if (t_sync())
				return -1;
			for (int k = 0; k < n; k++) {
				t_fill(T.sbuf + off, seq[k], seed + (uint32_t)k);
				op[k] = t_op();
				if (tagged)
					T_POST(ret, fi_tsend(T.ep, T.sbuf + off,
						seq[k], NULL, T.peer, tag,
						&op[k]->fctx));
				else
					T_POST(ret, fi_send(T.ep, T.sbuf + off,
						seq[k], NULL, T.peer,
						&op[k]->fctx));
				T_CHECK(ret == 0, "order send %d (%zu B): %s",
					k, seq[k], fi_strerror((int)-ret));
				off += seq[k] + 64;
			}
			if (t_sync())
				return -1;
			for (int k = 0; k < n; k++)
				if (t_wait_tx(op[k], seq[k]))
					return -1;
			if (t_sync())
				return -1;
			continue;
		}
		memset(T.rbuf, 0xee, (size_t)n * slot);
		for (int when = 0; when < 2; when++) {
			if (when == (expected ? 0 : 1)) {
				if (!expected)
					t_spin(20); /* all of it arrives */
				for (int k = 0; k < n; k++) {
					char *b = T.rbuf + (size_t)k * slot;
					op[k] = t_op();
					if (tagged)
						T_POST(ret, fi_trecv(T.ep, b,
							slot - 1, NULL,
							FI_ADDR_UNSPEC, tag, 0,
							&op[k]->fctx));
					else
						T_POST(ret, fi_recv(T.ep, b,
							slot - 1, NULL,
							FI_ADDR_UNSPEC,
							&op[k]->fctx));
					T_CHECK(ret == 0, "order recv %d: %s",
						k, fi_strerror((int)-ret));
					op[k]->posted_rx = 1;
				}
			}
			if (when == 0 && (t_sync() || t_sync()))
				return -1;
		}
		for (int k = 0; k < n; k++) {
			char what[64];
			T_CHECK(t_wait(op[k], 1, T_WAIT_MS) == 0, "order %s "
				"(%s): receive %d not completed",
				tagged ? "tagged" : "msg",
				expected ? "expected" : "unexpected", k);
			T_CHECK(op[k]->nerr || op[k]->ent[0].len == seq[k],
				"order %s (%s): receive %d got %zu bytes, want "
				"%zu: a later message overtook an earlier one",
				tagged ? "tagged" : "msg", expected ? "expected"
				: "unexpected", k, op[k]->ent[0].len, seq[k]);
			snprintf(what, sizeof(what), "order %s %s #%d",
				 tagged ? "tagged" : "msg",
				 expected ? "expected" : "unexpected", k);
			if (t_check_rx(op[k], 0, seq[k], tag, FI_RECV,
				       T.rbuf + (size_t)k * slot,
				       seed + (uint32_t)k, what))
				return -1;
		}
		if (t_sync())
			return -1;
	}
	return 0;
}
