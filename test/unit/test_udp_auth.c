/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_udp_auth.c - the udp wire against an attacker who knows the wire
 * format but not the job's secret (issue 28).  A victim context v and a
 * good peer g share the secret; the forger builds datagrams exactly as
 * the shim does (right magic, version, job key, CRC, sessions), sealed
 * with another key, with no MAC (FI_OPX_AUTH=off), or copied from g's
 * real traffic and sent from its own socket.  Every attack must be
 * dropped and counted by its reason, get no reply, create no flow, and
 * leave g's traffic to v flowing with its data intact.  The primitive's
 * coverage (header against full) is checked directly.
 * Loopback only; every loop is bounded in count and in time.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../driver-shim/shim_internal.h"
#include "../../driver-shim/shim_udp.h"
#include "../common/testutil.h"

#define T_JKEY 0x1234
#define T_PAY 200u

static const uint8_t t_key[SHIM_AUTH_KEY_BYTES] = {
	0x6f, 0x70, 0x78, 0x20, 0x74, 0x65, 0x73, 0x74, 0x20, 0x6b, 0x65, 0x79, 0x20, 0x31, 0x00, 0x01,
	0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11};
static const uint8_t t_wrong_key[SHIM_AUTH_KEY_BYTES] = {1, 2, 3};

struct t_env {
	struct shim_dev *dev;
	struct shim_ctx *v, *g; /* victim, good peer */
	struct shim_addr addr_v;
	struct shim_peer *g_to_v;
	struct sockaddr_in to_v;
	int forger;             /* the attacker's socket */
	struct sockaddr_in forger_addr;
	uint32_t seq;           /* next good message */
};

static double t_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Packing only where a test asks for it: the others count datagrams. */
static bool t_pack;

static void t_open(struct t_env *t, int mode, uint32_t max_links)
{
	struct shim_dev_params p = {
		.num_units = 1,
		.force_unit = 0,
		.jkey = T_JKEY,
		.wire = SHIM_WIRE_UDP,
		.auth = mode,
		.max_links = max_links,
		.udp_no_pack = !t_pack,
	};
	socklen_t sl = sizeof(t->forger_addr);

	memcpy(p.auth_key, t_key, sizeof(t_key));
	snprintf(p.iface, sizeof(p.iface), "lo");
	memset(t, 0, sizeof(*t));
	assert_int_equal(shim_dev_open(&p, &t->dev), 0);
	assert_int_equal(shim_ctx_open(t->dev, 0, &t->g, NULL, NULL), 0);
	assert_int_equal(shim_ctx_open(t->dev, 0, &t->v, NULL, NULL), 0);
	assert_int_equal(shim_udp_open(t->g, 0, 0), 0); /* the home: g sends */
	assert_int_equal(shim_udp_open(t->v, 0, 0), 0);
	shim_ctx_addr(t->v, &t->addr_v);
	assert_int_equal(shim_peer_open(t->dev, &t->addr_v, &t->g_to_v), 0);
	t->to_v.sin_family = AF_INET;
	t->to_v.sin_addr.s_addr = t->addr_v.ipv4;
	t->to_v.sin_port = t->addr_v.udp_port;
	t->forger = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(t->forger >= 0);
	t->forger_addr.sin_family = AF_INET;
	t->forger_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(t->forger, (struct sockaddr *)&t->forger_addr, sl), 0);
	assert_int_equal(getsockname(t->forger, (struct sockaddr *)&t->forger_addr, &sl), 0);
}

static void t_close(struct t_env *t)
{
	close(t->forger);
	shim_peer_close(t->g_to_v);
	shim_ctx_close(t->v);
	shim_ctx_close(t->g);
	shim_dev_close(t->dev);
}

static uint8_t t_pat(uint32_t seq, uint32_t i)
{
	return (uint8_t)(seq * 131u + i * 3u + 7u);
}

static void t_fill_hdr(struct shim_pkt_hdr *h, const struct shim_ctx *from, uint32_t seq, uint32_t len)
{
	memset(h, 0, sizeof(*h));
	h->opcode = 1;
	h->jkey = T_JKEY;
	h->slid = from->rx.lid;
	h->sctx = from->rx.ctx;
	h->paylen = len;
	h->msgid = seq;
}

/* g publishes one good message of T_PAY bytes to p (v, or a capture). */
static void t_good_send(struct t_env *t, struct shim_peer *p, uint32_t seq)
{
	struct shim_pio_resv r;
	struct shim_rhq_entry *e;

	memset(&r, 0, sizeof(r));
	assert_int_equal(shim_pio_reserve(p, 1, T_PAY, &r), 0);
	e = shim_pio_entry(p, &r, 0);
	t_fill_hdr(&e->hdr, t->g, seq, T_PAY);
	for (uint32_t i = 0; i < T_PAY; i++)
		r.egr[i] = t_pat(seq, i);
	shim_pio_publish(p, &r, 0, shim_rhf_egr(p, &r, 0));
}

/* What v takes in within secs: DATA packets checked against the good
 * pattern (a forged one would fail here). */
static int t_v_recv(struct t_env *t, int want, double secs)
{
	struct shim_udp_pkt pkts[16];
	double end = t_now() + secs;
	int got = 0;

	while (got < want && t_now() < end) {
		int k = shim_udp_recv(t->v, pkts, 16);

		for (int i = 0; i < k; i++) {
			if (pkts[i].uh.type != SHIM_UDP_DATA)
				continue;
			assert_int_equal(pkts[i].e.hdr.slid, t->g->rx.lid);
			assert_int_equal(pkts[i].e.hdr.sctx, t->g->rx.ctx);
			assert_int_equal(pkts[i].e.hdr.paylen, T_PAY);
			for (uint32_t b = 0; b < T_PAY; b++)
				assert_int_equal(pkts[i].pay[b], t_pat(pkts[i].e.hdr.msgid, b));
			got++;
		}
	}
	return got;
}

/* g's traffic still flows: one more message arrives intact. */
static void t_good_flows(struct t_env *t)
{
	t_good_send(t, t->g_to_v, t->seq++);
	shim_udp_flush(t->g); /* with packing on it may wait behind others */
	assert_int_equal(t_v_recv(t, 1, 10.0), 1);
}

/* Drain v until it has read n more datagrams than before (bounded). */
static void t_v_drain(struct t_env *t, uint64_t rx0, uint64_t n)
{
	struct shim_udp_pkt pkts[16];
	struct shim_udp_stats st;
	double end = t_now() + 20.0;

	do {
		int k = shim_udp_recv(t->v, pkts, 16);

		for (int i = 0; i < k; i++)
			assert_int_not_equal(pkts[i].uh.type, SHIM_UDP_DATA); /* nothing forged */
		shim_udp_stats(t->v, &st);
	} while (st.rx_datagrams - rx0 < n && t_now() < end);
	assert_true(st.rx_datagrams - rx0 >= n);
}

/* Read v's socket empty (nothing forged may come out). */
static void t_v_empty(struct t_env *t)
{
	struct shim_udp_pkt pkts[16];
	int k;

	do {
		k = shim_udp_recv(t->v, pkts, 16);
		for (int i = 0; i < k; i++)
			assert_int_not_equal(pkts[i].uh.type, SHIM_UDP_DATA);
	} while (k > 0 || !shim_udp_rx_empty(t->v));
}

static uint32_t t_links(struct shim_ctx *c)
{
	uint32_t n = 0;

	for (struct shim_peer *p = shim_udp_next(c, NULL); p; p = shim_udp_next(c, p))
		n++;
	return n;
}

/* When set, t_forge lets it shape a DATA datagram's headers (an opcode,
 * a TID placement) before the CRC and the seal. */
static void (*t_forge_shape)(struct shim_udp_hdr *uh, struct shim_pkt_hdr *ph);

/* A datagram built the way the shim builds one: right magic, version,
 * job key, CRC and sessions; sealed in mode with key (or not at all).
 * The header names src (its address and identity) whoever sends it. */
static size_t t_forge(uint8_t *buf, uint8_t type, const struct shim_ctx *src,
		      uint32_t dst_nonce, uint16_t jkey, int mode, const uint8_t *key, uint32_t psn)
{
	struct shim_udp_hdr uh;
	struct shim_pkt_hdr ph;
	struct shim_udp_auth a;
	uint8_t pay[T_PAY];
	size_t n = sizeof(uh);
	uint32_t crc;

	memset(&uh, 0, sizeof(uh));
	uh.magic = SHIM_UDP_MAGIC;
	uh.version = SHIM_UDP_VERSION;
	uh.type = type;
	uh.jkey = jkey;
	uh.psn = psn;
	uh.src_nonce = src->nonce;
	uh.dst_nonce = dst_nonce;
	uh.src_host = src->dev->host_id;
	uh.src_lid = src->rx.lid;
	uh.src_ctx = src->rx.ctx;
	uh.src_unit = src->rx.unit;
	uh.src_mtu = (uint16_t)(src->udp->mtu / SHIM_BLOCK);
	uh.src_ipv4 = src->udp->ipv4;
	uh.src_port = src->udp->port;
	uh.auth = (uint8_t)mode;
	if (type == SHIM_UDP_DATA) {
		uh.rhf = SHIM_RHF_EGR;
		t_fill_hdr(&ph, src, 999999, T_PAY);
		ph.jkey = jkey;
		memset(pay, 0xee, sizeof(pay)); /* foreign bytes */
		if (t_forge_shape)
			t_forge_shape(&uh, &ph);
		uh.auth |= SHIM_UDP_AUTH_PCRC; /* the crc covers the payload */
		crc = shim_crc32c(0, &uh, sizeof(uh));
		crc = shim_crc32c(crc, &ph, sizeof(ph));
		crc = shim_crc32c_wide(crc, pay, sizeof(pay));
		uh.crc = crc;
	} else {
		uh.crc = shim_crc32c(0, &uh, sizeof(uh));
	}
	assert_int_equal(shim_udp_auth_init(&a, mode, key), 0);
	shim_udp_auth_seal(&a, &uh, type == SHIM_UDP_DATA ? &ph : NULL, pay,
			   type == SHIM_UDP_DATA ? sizeof(pay) : 0);
	shim_udp_auth_fini(&a);
	memcpy(buf, &uh, sizeof(uh));
	if (type == SHIM_UDP_DATA) {
		memcpy(buf + n, &ph, sizeof(ph));
		n += sizeof(ph);
		memcpy(buf + n, pay, sizeof(pay));
		n += sizeof(pay);
	}
	return n;
}

static void t_send_forged(struct t_env *t, const uint8_t *buf, size_t n)
{
	assert_int_equal(sendto(t->forger, buf, n, 0, (struct sockaddr *)&t->to_v, sizeof(t->to_v)),
			 (ssize_t)n);
}

/* Nothing came back to the forger: no ack, no nack, no held ack. */
static void t_no_reply(struct t_env *t, int ms)
{
	struct pollfd pf = {.fd = t->forger, .events = POLLIN};

	assert_int_equal(poll(&pf, 1, ms), 0);
}

/* Forged messages naming g (its lid, ctx, address, session), sealed with
 * another job's secret or with no MAC at all (today's attack): dropped
 * as unauthenticated, not delivered, no flow, no reply; g still gets
 * through. */
static void test_auth_forged_data(void **state)
{
	uint8_t buf[512];
	struct shim_udp_stats st0, st1;
	struct t_env t;
	uint32_t links;
	size_t n;

	(void)state;
	t_open(&t, SHIM_AUTH_HEADER, 0);
	t_good_flows(&t); /* v knows g now */
	links = t_links(t.v);
	shim_udp_stats(t.v, &st0);
	for (int i = 0; i < 50; i++) {
		n = t_forge(buf, SHIM_UDP_DATA, t.g, t.v->nonce, T_JKEY, SHIM_AUTH_HEADER,
			    t_wrong_key, (uint32_t)i);
		t_send_forged(&t, buf, n);
		n = t_forge(buf, SHIM_UDP_DATA, t.g, t.v->nonce, T_JKEY, SHIM_AUTH_OFF, NULL,
			    (uint32_t)i);
		t_send_forged(&t, buf, n);
	}
	t_v_drain(&t, st0.rx_datagrams, 100);
	shim_udp_stats(t.v, &st1);
	assert_int_equal(st1.drop_mac - st0.drop_mac, 100);
	assert_int_equal(t_links(t.v), links);
	t_no_reply(&t, 50);
	t_good_flows(&t);
	t_close(&t);
}

/* One-sided requests (whatever keys they name: the forger may guess
 * right) and expected-receive data aimed at a live registration of v's
 * during a large receive: without the secret none is read beyond its
 * tag; the registered buffer keeps its bytes. */
static uint32_t t_tid_handle;
static uint8_t t_opcode;

static void t_shape_tid(struct shim_udp_hdr *uh, struct shim_pkt_hdr *ph)
{
	uh->rhf = SHIM_RHF_EGR | SHIM_RHF_TID;
	ph->opcode = 7; /* OPX_OP_DATA */
	ph->p.tid.handle = t_tid_handle;
	ph->p.tid.offset = 0;
}

static void t_shape_op(struct shim_udp_hdr *uh, struct shim_pkt_hdr *ph)
{
	(void)uh;
	ph->opcode = t_opcode;
	ph->p.u64[0] = 1;    /* a provider key counting from 1 */
	ph->p.u64[1] = 4096; /* an offset into it */
}

static void test_auth_forged_rma_tid(void **state)
{
	static const uint8_t ops[] = {11, 12, 13}; /* OPX_OP_RMA_WRITE, _READ, _ATOMIC */
	uint8_t buf[512], *target = malloc(8192);
	struct shim_udp_stats st0, st1;
	struct t_env t;
	uint32_t links, sent = 0;
	size_t n;

	(void)state;
	assert_non_null(target);
	memset(target, 0x5a, 8192);
	t_open(&t, SHIM_AUTH_HEADER, 0);
	t_good_flows(&t);
	assert_int_equal(shim_tid_register(t.v, target, 8192, &t_tid_handle), 0);
	assert_int_equal(shim_tid_bind(t.v, t_tid_handle, t.g->rx.lid, t.g->rx.ctx), 0);
	links = t_links(t.v);
	shim_udp_stats(t.v, &st0);
	for (int i = 0; i < 20; i++) {
		t_forge_shape = t_shape_tid;
		n = t_forge(buf, SHIM_UDP_DATA, t.g, t.v->nonce, T_JKEY, SHIM_AUTH_HEADER,
			    t_wrong_key, (uint32_t)i);
		t_send_forged(&t, buf, n);
		n = t_forge(buf, SHIM_UDP_DATA, t.g, t.v->nonce, T_JKEY, SHIM_AUTH_OFF, NULL,
			    (uint32_t)i);
		t_send_forged(&t, buf, n);
		sent += 2;
		for (size_t k = 0; k < sizeof(ops); k++) {
			t_opcode = ops[k];
			t_forge_shape = t_shape_op;
			n = t_forge(buf, SHIM_UDP_DATA, t.g, t.v->nonce, T_JKEY, SHIM_AUTH_HEADER,
				    t_wrong_key, (uint32_t)i);
			t_send_forged(&t, buf, n);
			sent++;
		}
	}
	t_forge_shape = NULL;
	t_v_drain(&t, st0.rx_datagrams, sent);
	shim_udp_stats(t.v, &st1);
	assert_int_equal(st1.drop_mac - st0.drop_mac, sent);
	assert_int_equal(t_links(t.v), links);
	for (size_t i = 0; i < 8192; i++)
		assert_int_equal(target[i], 0x5a);
	t_no_reply(&t, 50);
	t_good_flows(&t);
	assert_int_equal(shim_tid_release(t.v, t_tid_handle), 0);
	t_close(&t);
	free(target);
}

/* A job-key sweep without the secret: every key is refused the same way
 * (no ack tells the right one), and none makes a flow. */
static void test_auth_jkey_sweep(void **state)
{
	uint8_t buf[512];
	struct shim_udp_stats st0, st1;
	struct t_env t;
	uint32_t links;

	(void)state;
	t_open(&t, SHIM_AUTH_HEADER, 0);
	links = t_links(t.v);
	shim_udp_stats(t.v, &st0);
	for (uint32_t k = 1; k <= 0xffff; k++) {
		size_t n = t_forge(buf, SHIM_UDP_DATA, t.g, 0, (uint16_t)k, SHIM_AUTH_HEADER,
				   t_wrong_key, 0);

		t_send_forged(&t, buf, n);
		if (k % 256 == 0)
			t_v_empty(&t); /* keep the queue short */
	}
	{
		struct shim_udp_pkt pkts[16];
		double end = t_now() + 10.0;

		do {
			assert_int_equal(shim_udp_recv(t.v, pkts, 16), 0);
			shim_udp_stats(t.v, &st1);
		} while (st1.rx_datagrams - st0.rx_datagrams < 0xffff && t_now() < end);
	}
	shim_udp_stats(t.v, &st1);
	/* loopback with a 16 MiB queue drained as we go loses none; what
	 * arrived was refused as unauthenticated, never by its job key */
	assert_true(st1.rx_datagrams - st0.rx_datagrams > 60000);
	assert_int_equal(st1.drop_mac - st0.drop_mac, st1.rx_datagrams - st0.rx_datagrams);
	assert_int_equal(st1.drop_jkey, st0.drop_jkey);
	assert_int_equal(t_links(t.v), links);
	t_no_reply(&t, 50);
	t_good_flows(&t);
	t_close(&t);
}

/* g's real, correctly sealed datagram, captured and sent again from the
 * attacker's socket: the header names g's address, the kernel says
 * otherwise: dropped as a false identity, not delivered. */
static void test_auth_replay_other_address(void **state)
{
	struct shim_udp_stats st0, st1;
	struct sockaddr_in me = {.sin_family = AF_INET};
	uint8_t buf[2048];
	struct shim_addr fake;
	struct shim_peer *to_cap;
	socklen_t sl = sizeof(me);
	struct t_env t;
	ssize_t n;
	int cap;

	(void)state;
	t_open(&t, SHIM_AUTH_HEADER, 0);
	t_good_flows(&t);
	/* capture: g sends to a socket of ours, as it would to v */
	cap = socket(AF_INET, SOCK_DGRAM, 0);
	me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(cap, (struct sockaddr *)&me, sizeof(me)), 0);
	assert_int_equal(getsockname(cap, (struct sockaddr *)&me, &sl), 0);
	fake = t.addr_v;
	fake.udp_port = me.sin_port;
	fake.nonce = 0;
	assert_int_equal(shim_peer_open(t.dev, &fake, &to_cap), 0);
	t_good_send(&t, to_cap, 77);
	n = recv(cap, buf, sizeof(buf), 0);
	assert_true(n > (ssize_t)SHIM_UDP_HDRS);
	shim_peer_close(to_cap);
	close(cap);
	shim_udp_stats(t.v, &st0);
	t_send_forged(&t, buf, (size_t)n);
	t_v_drain(&t, st0.rx_datagrams, 1);
	shim_udp_stats(t.v, &st1);
	assert_int_equal(st1.drop_ident - st0.drop_ident, 1);
	t_no_reply(&t, 50);
	t_good_flows(&t);
	t_close(&t);
}

/* A PACK datagram (small packets sharing one) is covered whole by the
 * tag in header mode too: g's real PACK with one payload byte or one
 * packet header changed, its CRC made right again (anyone can compute a
 * CRC), is refused at the tag; unchanged, the same bytes pass the tag
 * and are refused only for the address they come from. */
static void test_auth_pack_tamper(void **state)
{
	struct shim_udp_stats st0, st1;
	struct sockaddr_in me = {.sin_family = AF_INET};
	uint8_t buf[4096], bad[4096];
	struct shim_udp_hdr uh;
	struct shim_addr fake;
	struct shim_peer *to_cap;
	socklen_t sl = sizeof(me);
	struct t_env t;
	ssize_t n;
	int cap;

	(void)state;
	t_pack = true;
	t_open(&t, SHIM_AUTH_HEADER, 0);
	t_pack = false;
	t_good_flows(&t);
	cap = socket(AF_INET, SOCK_DGRAM, 0);
	me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(cap, (struct sockaddr *)&me, sizeof(me)), 0);
	assert_int_equal(getsockname(cap, (struct sockaddr *)&me, &sl), 0);
	fake = t.addr_v;
	fake.udp_port = me.sin_port;
	fake.nonce = 0;
	assert_int_equal(shim_peer_open(t.dev, &fake, &to_cap), 0);
	/* the first alone, three more wait for it and go packed */
	for (uint32_t s = 0; s < 4; s++)
		t_good_send(&t, to_cap, 100 + s);
	shim_udp_flush(t.g);
	n = recv(cap, buf, sizeof(buf), 0);
	assert_int_equal(n, (ssize_t)(SHIM_UDP_HDRS + T_PAY));
	n = recv(cap, buf, sizeof(buf), 0);
	assert_true(n > (ssize_t)sizeof(uh));
	memcpy(&uh, buf, sizeof(uh));
	assert_int_equal(uh.type, SHIM_UDP_PACK);
	assert_int_equal(uh.rhf, 3);
	shim_peer_close(to_cap);
	close(cap);
	shim_udp_stats(t.v, &st0);
	for (int which = 0; which < 2; which++) {
		struct shim_udp_hdr bh;
		size_t at = which ? sizeof(uh) + sizeof(struct shim_udp_frame) +
					    offsetof(struct shim_pkt_hdr, msgid)
				  : (size_t)n - 1; /* the last packet's last payload byte */

		memcpy(bad, buf, (size_t)n);
		bad[at] ^= 0x40;
		memcpy(&bh, bad, sizeof(bh));
		memset(bh.mac, 0, sizeof(bh.mac));
		bh.crc = 0;
		memcpy(bad, &bh, sizeof(bh));
		bh.crc = shim_crc32c(0, bad, SHIM_UDP_HDRS);
		bh.crc = shim_crc32c_wide(bh.crc, bad + SHIM_UDP_HDRS, (size_t)n - SHIM_UDP_HDRS);
		memcpy(bh.mac, uh.mac, sizeof(bh.mac));
		memcpy(bad, &bh, sizeof(bh));
		t_send_forged(&t, bad, (size_t)n);
	}
	t_send_forged(&t, buf, (size_t)n);
	t_v_drain(&t, st0.rx_datagrams, 3);
	shim_udp_stats(t.v, &st1);
	assert_int_equal(st1.drop_mac - st0.drop_mac, 2);
	assert_int_equal(st1.drop_ident - st0.drop_ident, 1);
	assert_int_equal(st1.drop_crc - st0.drop_crc, 0);
	assert_int_equal(st1.rx_packed - st0.rx_packed, 0);
	t_no_reply(&t, 50);
	t_good_flows(&t);
	t_close(&t);
}

/* Forged control datagrams: a cumulative ack for packets v never got,
 * a nack, and a "restarted" g (a new session): all refused; g's session
 * and sequence go on as before. */
static void test_auth_forged_control(void **state)
{
	struct shim_udp_stats st0, st1;
	uint8_t buf[512];
	struct t_env t;
	struct shim_ctx fake_g;
	uint32_t before;
	size_t n;

	(void)state;
	t_open(&t, SHIM_AUTH_HEADER, 0);
	t_good_flows(&t);
	before = ((struct shim_peer_priv *)shim_udp_next(t.v, NULL))->link->remote_nonce;
	shim_udp_stats(t.v, &st0);
	n = t_forge(buf, SHIM_UDP_ACK, t.g, t.v->nonce, T_JKEY, SHIM_AUTH_HEADER, t_wrong_key, 0);
	((struct shim_udp_hdr *)buf)->ack = 1000;
	t_send_forged(&t, buf, n);
	n = t_forge(buf, SHIM_UDP_NACK, t.g, t.v->nonce, T_JKEY, SHIM_AUTH_HEADER, t_wrong_key, 0);
	t_send_forged(&t, buf, n);
	fake_g = *t.g;
	fake_g.nonce = t.g->nonce ^ 0x5a5a5a5au; /* "g restarted" */
	n = t_forge(buf, SHIM_UDP_ACK, &fake_g, 0, T_JKEY, SHIM_AUTH_HEADER, t_wrong_key, 0);
	t_send_forged(&t, buf, n);
	n = t_forge(buf, SHIM_UDP_ACK, &fake_g, 0, T_JKEY, SHIM_AUTH_OFF, NULL, 0);
	t_send_forged(&t, buf, n);
	t_v_drain(&t, st0.rx_datagrams, 4);
	shim_udp_stats(t.v, &st1);
	assert_int_equal(st1.drop_mac - st0.drop_mac, 4);
	assert_int_equal(((struct shim_peer_priv *)shim_udp_next(t.v, NULL))->link->remote_nonce,
			 before);
	t_good_flows(&t);
	t_close(&t);
}

/* 100 000 first contacts from 100 sources without the secret: no flow,
 * no reply, memory flat (today each made an ~81 KB flow). */
static void test_auth_first_contact_flood(void **state)
{
	enum { T_SOURCES = 100, T_EACH = 1000 };
	struct shim_udp_stats st0, st1;
	uint8_t buf[512];
	int fds[T_SOURCES];
	struct t_env t;
	long rss0, rss1;
	uint32_t links;
	size_t n;

	(void)state;
	t_open(&t, SHIM_AUTH_HEADER, 0);
	t_good_flows(&t);
	links = t_links(t.v);
	for (int i = 0; i < T_SOURCES; i++) {
		fds[i] = socket(AF_INET, SOCK_DGRAM, 0);
		assert_true(fds[i] >= 0);
	}
	rss0 = tu_rss_kib();
	shim_udp_stats(t.v, &st0);
	n = t_forge(buf, SHIM_UDP_DATA, t.g, 0, T_JKEY, SHIM_AUTH_HEADER, t_wrong_key, 0);
	for (int r = 0; r < T_EACH; r++) {
		for (int i = 0; i < T_SOURCES; i++)
			(void)sendto(fds[i], buf, n, 0, (struct sockaddr *)&t.to_v, sizeof(t.to_v));
		t_v_empty(&t);
	}
	{
		struct shim_udp_pkt pkts[16];
		double end = t_now() + 10.0;

		do {
			assert_int_equal(shim_udp_recv(t.v, pkts, 16), 0);
			shim_udp_stats(t.v, &st1);
		} while (st1.rx_datagrams - st0.rx_datagrams < T_SOURCES * T_EACH && t_now() < end);
	}
	rss1 = tu_rss_kib();
	shim_udp_stats(t.v, &st1);
	assert_true(st1.rx_datagrams - st0.rx_datagrams > T_SOURCES * T_EACH * 9 / 10);
	assert_int_equal(st1.drop_mac - st0.drop_mac, st1.rx_datagrams - st0.rx_datagrams);
	assert_int_equal(t_links(t.v), links);
	print_message("first-contact flood: %" PRIu64 " datagrams from %d sources, RSS %ld -> %ld KiB\n",
		      st1.rx_datagrams - st0.rx_datagrams, T_SOURCES, rss0, rss1);
	assert_true(rss1 - rss0 < 1024);
	for (int i = 0; i < T_SOURCES; i++) {
		struct pollfd pf = {.fd = fds[i], .events = POLLIN};

		assert_int_equal(poll(&pf, 1, 0), 0); /* no reply to anyone */
		close(fds[i]);
	}
	t_good_flows(&t);
	t_close(&t);
}

/* A context keeps at most max_links flows: an authenticated newcomer
 * beyond that is dropped and counted, the existing ones go on. */
static void test_auth_link_cap(void **state)
{
	struct shim_udp_stats st0, st1;
	struct shim_ctx *extra;
	struct t_env t;

	(void)state;
	t_open(&t, SHIM_AUTH_HEADER, 1);
	t_good_flows(&t); /* g's flow is the one v may keep */
	assert_int_equal(shim_ctx_open(t.dev, 0, &extra, NULL, NULL), 0);
	assert_int_equal(shim_udp_open(extra, 0, 0), 0);
	/* peers open on the home context (g): send from extra by hand */
	{
		uint8_t buf[512];
		size_t n = t_forge(buf, SHIM_UDP_DATA, extra, 0, T_JKEY, SHIM_AUTH_HEADER, t_key, 0);

		shim_udp_stats(t.v, &st0);
		assert_int_equal(sendto(extra->udp->fd, buf, n, 0, (struct sockaddr *)&t.to_v,
					sizeof(t.to_v)),
				 (ssize_t)n);
	}
	t_v_drain(&t, st0.rx_datagrams, 1);
	shim_udp_stats(t.v, &st1);
	assert_int_equal(st1.drop_quota - st0.drop_quota, 1);
	assert_int_equal(t_links(t.v), 1);
	t_good_flows(&t);
	shim_ctx_close(extra);
	t_close(&t);
}

/* What each mode's tag covers: header and full refuse a changed header
 * byte (the CRC's coverage flag too) and another key; only full refuses
 * a changed payload byte. */
static void test_auth_coverage(void **state)
{
	struct shim_udp_auth a, other;
	struct shim_udp_hdr uh;
	struct shim_pkt_hdr ph;
	uint8_t pay[1000];

	(void)state;
	for (int mode = SHIM_AUTH_HEADER; mode <= SHIM_AUTH_FULL; mode++) {
		assert_int_equal(shim_udp_auth_init(&a, mode, t_key), 0);
		assert_int_equal(shim_udp_auth_init(&other, mode, t_wrong_key), 0);
		memset(&uh, 0, sizeof(uh));
		uh.magic = SHIM_UDP_MAGIC;
		uh.psn = 42;
		uh.auth = SHIM_UDP_AUTH_PCRC; /* the CRC's coverage: the seal keeps it */
		memset(&ph, 0x11, sizeof(ph));
		memset(pay, 0x22, sizeof(pay));
		shim_udp_auth_seal(&a, &uh, &ph, pay, sizeof(pay));
		assert_int_equal(uh.auth, mode | SHIM_UDP_AUTH_PCRC);
		assert_true(shim_udp_auth_check(&a, &uh, &ph, pay, sizeof(pay)));
		assert_false(shim_udp_auth_check(&other, &uh, &ph, pay, sizeof(pay)));
		uh.psn ^= 1;
		assert_false(shim_udp_auth_check(&a, &uh, &ph, pay, sizeof(pay)));
		uh.psn ^= 1;
		ph.tag ^= 1;
		assert_false(shim_udp_auth_check(&a, &uh, &ph, pay, sizeof(pay)));
		ph.tag ^= 1;
		/* stripping the flag (to have a changed payload skip the CRC)
		 * breaks the tag, as does any other bit */
		uh.auth ^= SHIM_UDP_AUTH_PCRC;
		assert_false(shim_udp_auth_check(&a, &uh, &ph, pay, sizeof(pay)));
		uh.auth ^= SHIM_UDP_AUTH_PCRC | 0x40u;
		assert_false(shim_udp_auth_check(&a, &uh, &ph, pay, sizeof(pay)));
		uh.auth ^= 0x40u;
		assert_true(shim_udp_auth_check(&a, &uh, &ph, pay, sizeof(pay)));
		pay[500] ^= 1;
		assert_int_equal(shim_udp_auth_check(&a, &uh, &ph, pay, sizeof(pay)),
				 mode == SHIM_AUTH_HEADER);
		pay[500] ^= 1;
		uh.auth = (uint8_t)(mode == SHIM_AUTH_HEADER ? SHIM_AUTH_FULL : SHIM_AUTH_HEADER);
		assert_false(shim_udp_auth_check(&a, &uh, &ph, pay, sizeof(pay)));
		shim_udp_auth_fini(&a);
		shim_udp_auth_fini(&other);
	}
}

/* In full mode the wire works end to end, and a datagram sealed in
 * header mode (another FI_OPX_AUTH) is refused. */
static void test_auth_full_mode(void **state)
{
	struct shim_udp_stats st0, st1;
	uint8_t buf[512];
	struct t_env t;
	size_t n;

	(void)state;
	t_open(&t, SHIM_AUTH_FULL, 0);
	for (int i = 0; i < 20; i++)
		t_good_flows(&t);
	shim_udp_stats(t.v, &st0);
	n = t_forge(buf, SHIM_UDP_DATA, t.g, t.v->nonce, T_JKEY, SHIM_AUTH_HEADER, t_key, 5);
	t_send_forged(&t, buf, n);
	t_v_drain(&t, st0.rx_datagrams, 1);
	shim_udp_stats(t.v, &st1);
	assert_int_equal(st1.drop_mac - st0.drop_mac, 1);
	t_good_flows(&t);
	t_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auth_coverage),
		cmocka_unit_test(test_auth_forged_data),
		cmocka_unit_test(test_auth_forged_rma_tid),
		cmocka_unit_test(test_auth_jkey_sweep),
		cmocka_unit_test(test_auth_replay_other_address),
		cmocka_unit_test(test_auth_forged_control),
		cmocka_unit_test(test_auth_pack_tamper),
		cmocka_unit_test(test_auth_first_contact_flood),
		cmocka_unit_test(test_auth_link_cap),
		cmocka_unit_test(test_auth_full_mode),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
