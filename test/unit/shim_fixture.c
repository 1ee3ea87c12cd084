/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_fixture.c - see shim_fixture.h.
 */
#include <string.h>
#include <time.h>

#include "shim_fixture.h"

double t_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct shim_dev_params t_params(void)
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

struct shim_dev *t_dev_open(void)
{
	struct shim_dev_params p = t_params();
	struct shim_dev *dev = NULL;

	assert_int_equal(shim_dev_open(&p, &dev), 0);
	assert_non_null(dev);
	return dev;
}

void t_pair_open(struct t_pair *t)
{
	memset(t, 0, sizeof(*t));
	t->dev = t_dev_open();
	assert_int_equal(shim_ctx_open(t->dev, T_UNIT, &t->ctx, NULL, NULL), 0);
	t->rx = shim_ctx_rx(t->ctx);
	assert_ptr_equal((void *)t->rx, (void *)t->ctx);
	shim_ctx_addr(t->ctx, &t->addr);
	assert_int_equal(shim_peer_open(t->dev, &t->addr, &t->peer), 0);
}

void t_pair_close(struct t_pair *t)
{
	shim_peer_close(t->peer);
	shim_ctx_close(t->ctx);
	shim_dev_close(t->dev);
}

static uint8_t t_pat(uint64_t seed, uint64_t i)
{
	return (uint8_t)(seed * 131u + i * 7u + (i >> 8));
}

void t_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *b = buf;

	for (size_t i = 0; i < len; i++)
		b[i] = t_pat(seed, i);
}

struct shim_pkt_hdr t_tmpl(const struct shim_peer *p, uint32_t msgid)
{
	struct shim_pkt_hdr h;

	memset(&h, 0, sizeof(h));
	h.opcode = 0x42;
	h.jkey = p->jkey;
	h.dlid = p->lid;
	h.dctx = p->ctx;
	h.msgid = msgid;
	h.tag = 0x1234;
	return h;
}
