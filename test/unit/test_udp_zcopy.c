/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_udp_zcopy.c - the SDMA engine's zero copy to a udp peer
 * (shim_sdma.c, shim_udp_ext_set, shim_udp_released): a packet whose
 * payload lies in one piece of the request's iovec leaves from the
 * caller's memory, the first time and when it is sent again (a byte
 * changed in the caller's buffer shows in the copy sent again, where a
 * ring copy would not have it); a packet spanning two iovec entries is
 * copied into the ring; every payload arrives intact at its offset; a
 * request completes only once the peer acknowledged its last packet,
 * completions keep submit order, and a request whose link dies or whose
 * peer restarts before that completes with -EPIPE; an idle link's trim
 * gives the slot table back.
 * Two receive contexts of one process talk over loopback (udp_fixture.c);
 * every loop is bounded in count and in time.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "udp_fixture.h"
#include "shim_dma.h"

#define T_LEN 20000u   /* bytes of a request: many packets of the safe MTU */
#define T_SPLIT 10000u /* where its iovec is cut: not at a packet boundary */
#define T_TID 5u

struct t_zc {
	struct t_pair t;
	struct shim_sdma *eng;
	struct shim_udp_link *l;
	uint8_t *buf;
};

static void t_zc_open(struct t_zc *z)
{
	t_pair_open(&z->t, NULL);
	assert_int_equal(shim_sdma_open(z->t.a, 0, &z->eng), 0);
	z->l = ((struct shim_peer_priv *)z->t.to_b)->link;
	z->buf = malloc(T_LEN);
	assert_non_null(z->buf);
	for (uint32_t i = 0; i < T_LEN; i++)
		z->buf[i] = (uint8_t)(i * 13u + 7u);
}

static void t_zc_close(struct t_zc *z)
{
	shim_sdma_close(z->eng);
	free(z->buf);
	t_pair_close(&z->t);
}

/* Packets of a request of len bytes to the link's peer. */
static uint32_t t_npkts(const struct t_zc *z, uint32_t len)
{
	return (len + z->t.to_b->mtu - 1) / z->t.to_b->mtu;
}

/* Submit buf[0, len) in two iovec pieces (cut at T_SPLIT when inside),
 * then run the engine until every packet is published. */
static void t_submit(struct t_zc *z, uint32_t len, uint64_t cookie)
{
	struct shim_sdma_req req;
	double end = t_now() + 10.0;

	memset(&req, 0, sizeof(req));
	req.tmpl.opcode = 1;
	req.tmpl.jkey = T_JKEY;
	req.tmpl.slid = z->t.a->rx.lid;
	req.tmpl.sctx = z->t.a->rx.ctx;
	req.iov[0].iov_base = z->buf;
	req.iov[0].iov_len = len < T_SPLIT ? len : T_SPLIT;
	req.iovcnt = 1;
	if (len > T_SPLIT) {
		req.iov[1].iov_base = z->buf + T_SPLIT;
		req.iov[1].iov_len = len - T_SPLIT;
		req.iovcnt = 2;
	}
	req.tid = T_TID;
	req.len = len;
	req.cookie = cookie;
	assert_int_equal(shim_sdma_submit(z->eng, z->t.to_b, &req), 0);
	while (shim_sdma_progress(z->eng) > 0 && t_now() < end)
		;
}

/* Receive n DATA packets on b; each payload is checked against buf at
 * its TID offset; psns[] gets their psns.  Returns the count. */
static uint32_t t_take(struct t_zc *z, uint32_t n, uint32_t *psns)
{
	struct shim_udp_pkt pkts[16];
	double end = t_now() + 10.0;
	uint32_t got = 0;

	while (got < n && t_now() < end) {
		int k = shim_udp_recv(z->t.b, pkts, 16);

		for (int i = 0; i < k; i++) {
			const struct shim_udp_pkt *p = &pkts[i];
			uint64_t off = p->e.hdr.p.tid.offset;
			uint32_t len = p->e.hdr.paylen;

			if (p->uh.type != SHIM_UDP_DATA)
				continue;
			assert_true(p->e.rhf & SHIM_RHF_TID);
			assert_true(p->e.rhf & SHIM_RHF_EGR);
			assert_int_equal(p->e.hdr.p.tid.handle, T_TID);
			assert_true(off <= T_LEN && len <= T_LEN - off);
			assert_memory_equal(p->pay, z->buf + off, len);
			if (got < n)
				psns[got] = p->uh.psn;
			got++;
		}
	}
	return got;
}

/* Reap one completion, if there is one: 1 (cookie, status set) or 0. */
static int t_reap(struct t_zc *z, uint64_t *cookie, int *status)
{
	shim_sdma_progress(z->eng);
	return shim_sdma_reap(z->eng, cookie, status);
}

/* Sent from the caller's memory, first time and again; the packet that
 * spans the iovec's two pieces is the ring's copy; complete only once
 * acknowledged; the trim gives the slot table back. */
static void test_zcopy_acked(void **state)
{
	struct t_zc z;
	uint32_t n, psns[64], span, acked, sent;
	uint64_t cookie = 0;
	int status = 1;

	(void)state;
	t_zc_open(&z);
	n = t_npkts(&z, T_LEN);
	assert_true(n > 2 && n <= 64);
	t_submit(&z, T_LEN, 77);
	assert_int_equal(t_take(&z, n, psns), n);
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(psns[i], i);
	/* all but the spanning packet point at buf */
	assert_int_equal(z.l->ext_live, n - 1);
	span = T_SPLIT / z.t.to_b->mtu;
	assert_null(z.l->ext[span]);
	assert_ptr_equal(z.l->ext[0], z.buf);
	/* everything sent, nothing acknowledged: not complete */
	shim_udp_tx_state(z.t.to_b, &acked, &sent);
	assert_int_equal(sent, n);
	assert_int_equal(t_reap(&z, &cookie, &status), 0);

	/* sent again from buf itself: a changed byte shows (the caller may
	 * not do this; the test does, to see where the bytes come from) */
	z.buf[1] ^= 0xffu;
	assert_int_equal(shim_udp_resend(z.t.to_b, 0), 0);
	assert_int_equal(t_take(&z, 1, psns), 1); /* checked against buf */
	assert_int_equal(psns[0], 0);
	/* the spanning packet is the ring's copy: a change does not show */
	z.buf[T_SPLIT] ^= 0xffu;
	assert_int_equal(shim_udp_resend(z.t.to_b, span), 0);
	z.buf[T_SPLIT] ^= 0xffu;
	assert_int_equal(t_take(&z, 1, psns), 1);
	assert_int_equal(psns[0], span);

	/* acknowledged short of the last packet: still not complete */
	shim_udp_release(z.t.to_b, n - 1);
	assert_int_equal(t_reap(&z, &cookie, &status), 0);
	assert_int_equal(z.l->ext_live, 1);
	shim_udp_release(z.t.to_b, n);
	assert_int_equal(t_reap(&z, &cookie, &status), 1);
	assert_int_equal(cookie, 77);
	assert_int_equal(status, 0);
	assert_int_equal(z.l->ext_live, 0);
	assert_int_equal(shim_sdma_busy(z.eng), 0);

	/* idle and all acknowledged: the trim frees the slot table */
	assert_int_equal(shim_udp_trim(z.t.to_b, 1, 1), 0); /* notes sent */
	assert_int_equal(shim_udp_trim(z.t.to_b, 10, 1), 1);
	assert_null(z.l->ext);
	/* and the next request gets a new one, data intact */
	t_submit(&z, 3000, 78);
	assert_int_equal(t_take(&z, t_npkts(&z, 3000), psns), t_npkts(&z, 3000));
	assert_non_null(z.l->ext);
	shim_udp_release(z.t.to_b, n + t_npkts(&z, 3000));
	assert_int_equal(t_reap(&z, &cookie, &status), 1);
	assert_int_equal(cookie, 78);
	assert_int_equal(status, 0);
	t_zc_close(&z);
}

/* Completions keep submit order: the second request, acknowledged
 * first, waits for the first. */
static void test_zcopy_order(void **state)
{
	struct t_zc z;
	uint32_t n, psns[64];
	uint64_t cookie = 0;
	int status = 1;

	(void)state;
	t_zc_open(&z);
	n = t_npkts(&z, 5000);
	t_submit(&z, 5000, 1);
	t_submit(&z, 5000, 2);
	assert_int_equal(t_take(&z, 2 * n, psns), 2 * n);
	assert_int_equal(t_reap(&z, &cookie, &status), 0);
	shim_udp_release(z.t.to_b, n);
	assert_int_equal(t_reap(&z, &cookie, &status), 1);
	assert_int_equal(cookie, 1);
	assert_int_equal(status, 0);
	assert_int_equal(t_reap(&z, &cookie, &status), 0);
	shim_udp_release(z.t.to_b, 2 * n);
	assert_int_equal(t_reap(&z, &cookie, &status), 1);
	assert_int_equal(cookie, 2);
	assert_int_equal(status, 0);
	t_zc_close(&z);
}

/* Open, submit a T_LEN request, take all its packets: sent, not complete. */
static void t_zc_in_flight(struct t_zc *z, uint64_t cookie)
{
	uint32_t n, psns[64];
	uint64_t c = 0;
	int status = 0;

	t_zc_open(z);
	n = t_npkts(z, T_LEN);
	t_submit(z, T_LEN, cookie);
	assert_int_equal(t_take(z, n, psns), n);
	assert_int_equal(t_reap(z, &c, &status), 0);
}

/* The one completion due: cookie, with -EPIPE. */
static void t_zc_broken(struct t_zc *z, uint64_t cookie)
{
	uint64_t c = 0;
	int status = 0;

	assert_int_equal(t_reap(z, &c, &status), 1);
	assert_int_equal(c, cookie);
	assert_int_equal(status, -EPIPE);
}

/* A link declared dead: the request completes, with -EPIPE, and its
 * packets are never sent again. */
static void test_zcopy_dead(void **state)
{
	struct t_zc z;

	(void)state;
	t_zc_in_flight(&z, 9);
	shim_udp_fail(z.t.to_b);
	t_zc_broken(&z, 9);
	assert_int_equal(shim_udp_resend(z.t.to_b, 0), -ENOENT);
	t_zc_close(&z);
}

/* The peer restarted (a new session): what was sent to its previous
 * life is forgotten, the request completes with -EPIPE, the slot table
 * is clear. */
static void test_zcopy_restart(void **state)
{
	struct t_zc z;

	(void)state;
	t_zc_in_flight(&z, 11);
	shim_udp_link_reset(z.l, z.l->remote_nonce + 1);
	assert_int_equal(z.l->ext_live, 0);
	for (uint32_t i = 0; i < SHIM_UDP_RING_CNT; i++)
		assert_null(z.l->ext[i]);
	t_zc_broken(&z, 11);
	t_zc_close(&z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zcopy_acked),
		cmocka_unit_test(test_zcopy_order),
		cmocka_unit_test(test_zcopy_dead),
		cmocka_unit_test(test_zcopy_restart),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
