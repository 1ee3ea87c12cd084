/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * udp_fixture.c - see udp_fixture.h.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "udp_fixture.h"

/* The sending context's identity: the udp wire drops a packet whose
 * header names another sender than its datagram (t_pair_open sets it). */
static uint16_t t_slid, t_sctx;
/* t_pair_open: without UDP_GRO (one datagram per receive buffer) */
bool t_no_gro;
/* Packing (PACK datagrams) only where a test asks for it: the others
 * check datagram by datagram and never flush. */
bool t_pack;
/* t_pair_open: no CRC of payloads (FI_OPX_UDP_CRC=0) */
bool t_no_crc;

double t_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void t_pair_open(struct t_pair *t, const struct shim_fault *fault)
{
	struct shim_dev_params p = {
		.num_units = 1,
		.force_unit = 0,
		.jkey = T_JKEY,
		.wire = SHIM_WIRE_UDP,
		.udp_no_gro = t_no_gro,
		.udp_no_pack = !t_pack,
		.udp_no_crc = t_no_crc,
	};

	snprintf(p.iface, sizeof(p.iface), "lo");
	if (fault)
		p.fault = *fault;
	memset(t, 0, sizeof(*t));
	assert_int_equal(shim_dev_open(&p, &t->dev), 0);
	assert_int_equal(shim_ctx_open(t->dev, 0, &t->a, NULL, NULL), 0);
	assert_int_equal(shim_ctx_open(t->dev, 0, &t->b, NULL, NULL), 0);
	assert_int_equal(shim_udp_open(t->a, 0, 0), 0);
	assert_int_equal(shim_udp_open(t->b, 0, 0), 0);
	t_slid = t->a->rx.lid;
	t_sctx = t->a->rx.ctx;
	shim_ctx_addr(t->b, &t->addr_b);
	assert_int_not_equal(t->addr_b.udp_port, 0);
	assert_int_equal(t->addr_b.ipv4, htonl(INADDR_LOOPBACK));
	assert_int_equal(shim_peer_open(t->dev, &t->addr_b, &t->to_b), 0);
	assert_int_equal(t->to_b->wire, SHIM_WIRE_UDP);
}

void t_pair_close(struct t_pair *t)
{
	shim_peer_close(t->to_b);
	shim_ctx_close(t->b);
	shim_ctx_close(t->a);
	shim_dev_close(t->dev);
}

uint8_t t_pat(uint32_t seq, uint32_t i)
{
	return (uint8_t)(seq * 31u + i * 7u + 1u);
}

uint32_t t_len(const struct shim_peer *p, uint32_t seq)
{
	/* inline sizes, one block, and full packets */
	static const uint32_t lens[] = {0, 8, 16, 17, 64, 1000};
	uint32_t n = lens[seq % 6];

	return seq % 7 == 6 ? p->mtu : n;
}

/* Publish packet seq (payload t_pat, len bytes) into the peer. */
int t_send_len(struct shim_peer *p, uint32_t seq, uint32_t len)
{
	bool inl = len <= SHIM_INLINE_MAX;
	struct shim_pio_resv r;
	struct shim_rhq_entry *e;
	int rc = shim_pio_reserve(p, 1, inl ? 0 : len, &r);

	if (rc)
		return rc;
	e = shim_pio_entry(p, &r, 0);
	memset(&e->hdr, 0, sizeof(e->hdr));
	e->hdr.opcode = 1;
	e->hdr.jkey = T_JKEY;
	e->hdr.slid = t_slid;
	e->hdr.sctx = t_sctx;
	e->hdr.paylen = len;
	e->hdr.msgid = seq;
	for (uint32_t i = 0; i < len; i++)
		(inl ? e->hdr.p.inl : r.egr)[i] = t_pat(seq, i);
	shim_pio_publish(p, &r, 0, inl ? 0 : shim_rhf_egr(p, &r, 0));
	return 0;
}

int t_send(struct shim_peer *p, uint32_t seq)
{
	return t_send_len(p, seq, t_len(p, seq));
}

void t_check(const struct shim_udp_pkt *pkt)
{
	uint32_t seq = pkt->e.hdr.msgid, len = pkt->e.hdr.paylen;
	const uint8_t *pay = (pkt->e.rhf & SHIM_RHF_EGR) ? pkt->pay : pkt->e.hdr.p.inl;

	assert_int_equal(pkt->uh.type, SHIM_UDP_DATA);
	assert_non_null(pay);
	for (uint32_t i = 0; i < len; i++)
		assert_int_equal(pay[i], t_pat(seq, i));
}

/* Receive on b until n packets or the deadline; returns the count. */
int t_recv_all(struct t_pair *t, int n, uint32_t *psns, double secs)
{
	struct shim_udp_pkt pkts[16];
	double end = t_now() + secs;
	int got = 0;

	while (got < n && t_now() < end) {
		int k = shim_udp_recv(t->b, pkts, 16);

		for (int i = 0; i < k; i++) {
			if (pkts[i].uh.type != SHIM_UDP_DATA)
				continue;
			t_check(&pkts[i]);
			if (psns && got < n)
				psns[got] = pkts[i].uh.psn;
			got++;
		}
	}
	return got;
}
