/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_udp_batch.c - unit tests of the udp wire's batched datagrams:
 * with UDP_GRO a burst comes as one receive and is cut into its
 * datagrams, each checked on its own, and a forged run is dropped
 * datagram by datagram; small packets to a peer with some in flight go
 * together as PACK datagrams, handed out on arrival as the DATA packets
 * they are, and a PACK datagram that breaks any rule of its format is
 * dropped whole; a corked context holds what is published until the
 * uncork.  The rest of the udp wire is tested in test_udp.c;
 * what both share is udp_fixture.c.
 * Two receive contexts of one process talk over loopback; every loop is
 * bounded in count and in time.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "udp_fixture.h"

/* UDP_GRO: a GSO burst arrives as one buffer; shim_udp_recv hands it
 * out 16 at a time, in order and intact, and while some of it is left
 * the context neither sleeps nor says its socket is empty. */
static void test_udp_gro_run(void **state)
{
	struct shim_udp_stats st0, st1;
	struct shim_udp_pkt pkts[16];
	uint32_t acked, sent, next = 0;
	struct t_pair t;
	int k = 0, got = 0;

	(void)state;
	t_pair_open(&t, NULL);
	if (!t.b->udp->gro) {
		t_pair_close(&t);
		skip(); /* the kernel refused UDP_GRO (before 5.0) */
	}
	shim_udp_stats(t.b, &st0);
	shim_udp_hold((struct shim_peer_priv *)t.to_b);
	for (uint32_t s = 0; s < 40; s++)
		assert_int_equal(t_send_len(t.to_b, s, t.to_b->mtu), 0);
	shim_udp_unhold((struct shim_peer_priv *)t.to_b);
	for (double end = t_now() + 5.0; !k && t_now() < end;)
		k = shim_udp_recv(t.b, pkts, 16);
	/* loopback keeps a GSO send whole up to a GRO socket */
	assert_int_equal(k, 16);
	assert_true(t.b->udp->msgs[0].msg_len > SHIM_UDP_HDRS + t.to_b->mtu);
	assert_true(shim_udp_rx_pending(t.b->udp));
	assert_false(shim_udp_rx_empty(t.b));
	assert_int_equal(shim_ctx_sleep_arm(t.b), -EAGAIN);
	for (double end = t_now() + 5.0; got < 40 && t_now() < end;) {
		for (int i = 0; i < k; i++) {
			t_check(&pkts[i]);
			assert_int_equal(pkts[i].uh.psn, next);
			assert_int_equal(pkts[i].e.hdr.msgid, next);
			next++;
		}
		got += k;
		k = got < 40 ? shim_udp_recv(t.b, pkts, 16) : 0;
	}
	assert_int_equal(got, 40);
	shim_udp_stats(t.b, &st1);
	assert_int_equal(st1.rx_datagrams - st0.rx_datagrams, 40);
	assert_int_equal(st1.drop_len + st1.drop_crc + st1.drop_magic,
			 st0.drop_len + st0.drop_crc + st0.drop_magic);
	shim_udp_tx_state(t.to_b, &acked, &sent);
	shim_udp_release(t.to_b, sent);
	t_pair_close(&t);
}

/* Forged runs (UDP_SEGMENT from a plain socket): junk, and a first
 * header that lies about its length both ways.  Every piece is dropped
 * and counted, nothing is read beyond the buffer (ASan), and a good
 * packet still passes after them. */
static void test_udp_gro_forged(void **state)
{
	struct shim_udp_stats st0, st1;
	struct shim_udp_pkt pkts[16];
	struct t_pair t;
	struct sockaddr_in to;
	uint8_t buf[12 * 200];
	uint16_t seg = 200;
	int fd, k = 0;
	char cbuf[CMSG_SPACE(sizeof(uint16_t))];

	(void)state;
	t_pair_open(&t, NULL);
	if (!t.b->udp->gro) {
		t_pair_close(&t);
		skip();
	}
	to = (struct sockaddr_in){.sin_family = AF_INET,
				  .sin_addr.s_addr = t.addr_b.ipv4,
				  .sin_port = t.addr_b.udp_port};
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(fd >= 0);
	shim_udp_stats(t.b, &st0);
	for (int run = 0; run < 3; run++) {
		struct shim_udp_hdr uh;
		struct shim_pkt_hdr ph;
		struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
		struct msghdr mh = {.msg_name = &to, .msg_namelen = sizeof(to),
				    .msg_iov = &iov, .msg_iovlen = 1,
				    .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
		struct cmsghdr *cm;

		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = (uint8_t)(i * 13u + (unsigned)run * 101u + 7u);
		/* ours in look: a control datagram (run 0: cut in
		 * headers), a DATA packet lying about its length */
		memset(&uh, 0, sizeof(uh));
		memset(&ph, 0, sizeof(ph));
		uh.magic = SHIM_UDP_MAGIC;
		uh.version = SHIM_UDP_VERSION;
		uh.type = run ? SHIM_UDP_DATA : SHIM_UDP_ACK;
		uh.rhf = SHIM_RHF_EGR;
		ph.paylen = run == 1 ? 1u : 0xfffffff0u;
		memcpy(buf, &uh, sizeof(uh));
		if (run)
			memcpy(buf + sizeof(uh), &ph, sizeof(ph));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_UDP;
		cm->cmsg_type = UDP_SEGMENT;
		cm->cmsg_len = CMSG_LEN(sizeof(seg));
		memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
		assert_int_equal(sendmsg(fd, &mh, 0), (ssize_t)sizeof(buf));
	}
	/* each run is one buffer, cut by its first header: run 0 in udp
	 * headers, run 1 at the lie (HDRS + 1 bytes); run 2 names a length
	 * beyond the buffer and is taken whole */
	{
		const size_t h = sizeof(struct shim_udp_hdr), d = SHIM_UDP_HDRS + 1;
		uint64_t want = (sizeof(buf) + h - 1) / h + (sizeof(buf) + d - 1) / d + 1;
		double end = t_now() + 5.0;

		do {
			k += shim_udp_recv(t.b, pkts, 16);
			shim_udp_stats(t.b, &st1);
		} while (st1.rx_datagrams - st0.rx_datagrams < want && t_now() < end);
		assert_int_equal(k, 0);
		assert_int_equal(st1.rx_datagrams - st0.rx_datagrams, want);
		assert_int_equal((st1.drop_len + st1.drop_crc + st1.drop_magic) -
					 (st0.drop_len + st0.drop_crc + st0.drop_magic),
				 want);
	}
	close(fd);
	assert_int_equal(t_send_len(t.to_b, 0, 64), 0);
	assert_int_equal(t_recv_all(&t, 1, NULL, 5.0), 1);
	t_pair_close(&t);
}

/* After psn 0..n-1 went from a to b: all n sent, received in order and
 * intact, none dropped at b; the two sides' counters in sa and sb. */
static void t_all_delivered(struct t_pair *t, uint32_t n, struct shim_udp_stats *sa,
			    struct shim_udp_stats *sb)
{
	uint32_t psns[64], acked, sent;

	assert_true(n <= 64);
	shim_udp_tx_state(t->to_b, &acked, &sent);
	assert_int_equal(sent, n);
	assert_int_equal(t_recv_all(t, (int)n, psns, 10.0), (int)n);
	for (uint32_t s = 0; s < n; s++)
		assert_int_equal(psns[s], s);
	shim_udp_stats(t->a, sa);
	shim_udp_stats(t->b, sb);
	assert_int_equal(sb->drop_len + sb->drop_crc + sb->drop_magic + sb->drop_ident, 0);
}

/* Packing: a packet to a peer with nothing in flight goes at once; while
 * some is in flight, small packets wait for company and go as PACK
 * datagrams when a datagram's worth waits or the owner flushes (or
 * arms a sleep); the receiver hands them out as the DATA packets they
 * are, in order and intact. */
static void test_udp_pack_run(void **state)
{
	static const uint32_t lens[] = {0, 8, 17, 64, 300};
	const uint32_t n = 41;
	uint32_t acked, sent;
	struct shim_udp_stats sa, sb;
	struct t_pair t;

	(void)state;
	t_pack = true;
	t_pair_open(&t, NULL);
	t_pack = false;
	assert_non_null(t.a->udp->pack);
	assert_int_equal(t_send_len(t.to_b, 0, 8), 0);
	shim_udp_tx_state(t.to_b, &acked, &sent);
	assert_int_equal(sent, 1); /* alone: at once */
	for (uint32_t s = 1; s < n; s++)
		assert_int_equal(t_send_len(t.to_b, s, lens[s % 5]), 0);
	shim_udp_tx_state(t.to_b, &acked, &sent);
	assert_true(sent < n); /* the last ones wait for company */
	shim_udp_flush(t.a);
	t_all_delivered(&t, n, &sa, &sb);
	assert_true(sa.tx_packed >= 30);
	assert_true(sa.tx_datagrams < 15);
	assert_int_equal(sb.rx_packed, sa.tx_packed);
	/* all acknowledged: the next one is alone again */
	shim_udp_release(t.to_b, n);
	assert_int_equal(t_send_len(t.to_b, n, 8), 0);
	shim_udp_tx_state(t.to_b, &acked, &sent);
	assert_int_equal(sent, n + 1);
	/* one waits behind it; arming a sleep sends it */
	assert_int_equal(t_send_len(t.to_b, n + 1, 8), 0);
	shim_udp_tx_state(t.to_b, &acked, &sent);
	assert_int_equal(sent, n + 1);
	assert_int_equal(shim_udp_wait_arm(t.a), 0);
	shim_udp_wait_disarm(t.a);
	shim_udp_tx_state(t.to_b, &acked, &sent);
	assert_int_equal(sent, n + 2);
	assert_int_equal(t_recv_all(&t, 2, NULL, 10.0), 2);
	t_pair_close(&t);
}

/* Cork (what a receive drain does around the replies it makes): while
 * corked nothing goes, not even a lone packet; the uncork sends what
 * waits, full-size packets batched, small ones packed, in order and
 * intact; a corked context's flush point sends too, and after the uncork
 * a lone packet goes at once again.  Without packing (no PACK buffer) it
 * holds and sends the same. */
static void test_udp_cork(void **state)
{
	static const uint32_t lens[] = {8, 1024, 17, 1024, 1024, 300};
	const uint32_t n = 30;
	uint32_t acked, sent;
	struct shim_udp_stats sa, sb;
	struct t_pair t;

	(void)state;
	for (int pack = 1; pack >= 0; pack--) {
		t_pack = pack;
		t_pair_open(&t, NULL);
		t_pack = false;
		shim_udp_cork(t.a);
		for (uint32_t s = 0; s < n; s++)
			assert_int_equal(t_send_len(t.to_b, s, lens[s % 6]), 0);
		shim_udp_tx_state(t.to_b, &acked, &sent);
		assert_int_equal(sent, 0);
		shim_udp_uncork(t.a);
		t_all_delivered(&t, n, &sa, &sb);
		if (pack)
			assert_true(sa.tx_packed >= 10);
		/* a flush point while corked sends too */
		shim_udp_release(t.to_b, n);
		shim_udp_cork(t.a);
		assert_int_equal(t_send_len(t.to_b, n, 8), 0);
		shim_udp_tx_state(t.to_b, &acked, &sent);
		assert_int_equal(sent, n);
		shim_udp_flush(t.a);
		shim_udp_tx_state(t.to_b, &acked, &sent);
		assert_int_equal(sent, n + 1);
		shim_udp_uncork(t.a);
		shim_udp_uncork(t.a); /* twice: nothing more */
		/* uncorked: a lone packet goes at once */
		shim_udp_release(t.to_b, n + 1);
		assert_int_equal(t_send_len(t.to_b, n + 1, 8), 0);
		shim_udp_tx_state(t.to_b, &acked, &sent);
		assert_int_equal(sent, n + 2);
		assert_int_equal(t_recv_all(&t, 2, NULL, 10.0), 2);
		t_pair_close(&t);
	}
	/* no udp socket: nothing to do, and no crash */
	shim_udp_cork(NULL);
	shim_udp_uncork(NULL);
}

/* A forged PACK datagram (a correct CRC, auth off: what a bit flip the
 * CRC missed or a buggy peer would send) that breaks any rule of the
 * format is dropped whole and counted, reading nothing past it; the
 * same datagram well formed delivers its packets. */
static void test_udp_pack_forged(void **state)
{
	enum { GOOD, ONE, MANY, HUGE, MISMATCH, TRAIL, TID, INL, IDENT, SHORT, NCASE };
	struct shim_udp_stats st0, st1;
	struct shim_udp_pkt pkts[16];
	struct sockaddr_in to, me;
	socklen_t ml = sizeof(me);
	struct t_pair t;
	int fd, got = 0;

	(void)state;
	t_pair_open(&t, NULL);
	to = (struct sockaddr_in){.sin_family = AF_INET,
				  .sin_addr.s_addr = t.addr_b.ipv4,
				  .sin_port = t.addr_b.udp_port};
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(fd >= 0);
	me = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(bind(fd, (struct sockaddr *)&me, sizeof(me)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&me, &ml), 0);
	shim_udp_stats(t.b, &st0);
	/* the bad ones first, the good one last: it must be the only one
	 * that delivers */
	for (int c = ONE; c <= NCASE; c++) {
		int kase = c == NCASE ? GOOD : c;
		uint8_t buf[1024];
		struct shim_udp_hdr uh;
		struct shim_udp_frame fr[2] = {{0, 0}, {SHIM_RHF_EGR, 100}};
		struct shim_pkt_hdr ph[2];
		size_t len = sizeof(uh);

		memset(&uh, 0, sizeof(uh));
		memset(ph, 0, sizeof(ph));
		uh.magic = SHIM_UDP_MAGIC;
		uh.version = SHIM_UDP_VERSION;
		uh.type = SHIM_UDP_PACK;
		uh.auth = SHIM_UDP_AUTH_PCRC; /* the CRC below covers the payload */
		uh.jkey = T_JKEY;
		uh.src_nonce = 0x1234567u;
		uh.src_lid = 77;
		uh.src_ctx = 3;
		uh.src_ipv4 = me.sin_addr.s_addr;
		uh.src_port = me.sin_port;
		uh.rhf = kase == ONE ? 1u : kase == MANY ? SHIM_UDP_PACK_MAX + 1u : 2u;
		for (int k = 0; k < 2; k++) {
			ph[k].slid = 77;
			ph[k].sctx = 3;
			ph[k].opcode = 1;
			ph[k].jkey = T_JKEY;
			ph[k].msgid = (uint32_t)k;
		}
		ph[0].paylen = kase == INL ? SHIM_INLINE_MAX + 1u : 8u;
		ph[1].paylen = kase == MISMATCH ? 99u : 100u;
		if (kase == HUGE)
			fr[1].len = ph[1].paylen = 0xffffffffu;
		if (kase == TID)
			fr[1].rhf |= SHIM_RHF_TID;
		if (kase == IDENT)
			ph[1].slid = 78;
		for (uint32_t i = 0; i < 8; i++)
			ph[0].p.inl[i] = t_pat(0, i);
		for (int k = 0; k < 2; k++) {
			memcpy(buf + len, &fr[k], sizeof(fr[k]));
			len += sizeof(fr[k]);
			memcpy(buf + len, &ph[k], sizeof(ph[k]));
			len += sizeof(ph[k]);
		}
		for (uint32_t i = 0; i < 100; i++)
			buf[len + i] = t_pat(1, i);
		len += 100;
		if (kase == TRAIL)
			buf[len++] = 0;
		if (kase == SHORT)
			len -= 1;
		uh.crc = 0;
		memcpy(buf, &uh, sizeof(uh));
		uh.crc = shim_crc32c(0, buf, SHIM_UDP_HDRS);
		uh.crc = shim_crc32c_wide(uh.crc, buf + SHIM_UDP_HDRS, len - SHIM_UDP_HDRS);
		memcpy(buf, &uh, sizeof(uh));
		assert_int_equal(sendto(fd, buf, len, 0, (struct sockaddr *)&to, sizeof(to)),
				 (ssize_t)len);
	}
	{
		double end = t_now() + 5.0;

		while (got < 2 && t_now() < end) {
			int k = shim_udp_recv(t.b, pkts + got, 16 - got);

			for (int i = 0; i < k; i++) {
				const struct shim_udp_pkt *pk = &pkts[got + i];

				assert_int_equal(pk->uh.type, SHIM_UDP_DATA);
				assert_int_equal(pk->uh.psn, (uint32_t)(got + i));
				assert_int_equal(pk->e.hdr.msgid, (uint32_t)(got + i));
				assert_int_equal(pk->e.rhf, got + i ? SHIM_RHF_EGR : 0u);
				t_check(pk);
			}
			got += k;
		}
	}
	assert_int_equal(got, 2);
	shim_udp_stats(t.b, &st1);
	assert_int_equal(st1.rx_packed - st0.rx_packed, 2);
	/* with UDP_GRO a buffer is cut at its first datagram's own length:
	 * TRAIL becomes the PACK without its last byte (its CRC fails) and
	 * that byte (too short); the CRCs of all others were right */
	assert_int_equal((st1.drop_len + st1.drop_ident) - (st0.drop_len + st0.drop_ident),
			 NCASE - ONE);
	assert_int_equal(st1.drop_crc - st0.drop_crc, t.b->udp->gro ? 1 : 0);
	close(fd);
	t_pair_close(&t);
}
int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_udp_gro_run),
		cmocka_unit_test(test_udp_gro_forged),
		cmocka_unit_test(test_udp_pack_run),
		cmocka_unit_test(test_udp_cork),
		cmocka_unit_test(test_udp_pack_forged),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
