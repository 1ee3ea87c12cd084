/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_fixture.h - what the shim-level suites (test_shim: the device,
 * contexts and peers; test_shim_ring: the rings, credits and producers;
 * test_tid: the expected receive table; test_sdma: the SDMA engine)
 * share: the tiny geometry, the clock, the device and a context with a
 * peer of itself; for test_tid and test_sdma also a byte pattern and the
 * header template of a packet to that peer.
 *
 * Rings are tiny (64 header entries, 16 KiB eager, 1 KiB MTU) so that
 * every test crosses many laps and hits the credit limits quickly.  Each
 * suite opens its contexts on a unit of its own (test_tid 2,
 * test_shim_ring 3, test_sdma 6, which only test_peer's shim-level tests
 * share, test_shim 7; the provider suites use 0, test_rgn 4, the trust
 * suites 5), so suites running at the same time do not meet and
 * test_shim's context-number assertions hold.
 */
#ifndef OPX_TEST_SHIM_FIXTURE_H
#define OPX_TEST_SHIM_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../driver-shim/shim_internal.h"

#define T_MTU 1024u
#define T_HDRQ 64u
#define T_EGR (16u * 1024u)
#define T_EGR_BLOCKS (T_EGR / SHIM_BLOCK)
#define T_UNITS ((int)SHIM_MAX_UNITS)
#define T_DEADLINE_S 30

/* Each suite defines these two: the unit its contexts are opened on and
 * the job key of its device. */
extern const int t_unit;
extern const uint16_t t_jkey;
#define T_UNIT t_unit
#define T_JKEY t_jkey

struct t_pair {
	struct shim_dev *dev;
	struct shim_ctx *ctx;
	struct shim_rx *rx;
	struct shim_addr addr;
	struct shim_peer *peer;
};

/* CLOCK_MONOTONIC in seconds. */
double t_now(void);
/* T_UNITS units of the tiny geometry, job key T_JKEY, unit by NUMA. */
struct shim_dev_params t_params(void);
/* The device of t_params(); fails the test on error. */
struct shim_dev *t_dev_open(void);
/* A device, a context on T_UNIT and a peer of that context (the sender
 * to itself); fails the test on error. */
void t_pair_open(struct t_pair *t);
void t_pair_close(struct t_pair *t);

/* test_tid and test_sdma: the bytes around a destination, which no packet may touch. */
#define T_GUARD 0xa5
/* test_tid and test_sdma: len bytes of the pattern of seed; the header
 * of a packet to p (opcode 0x42, tag 0x1234). */
void t_fill(void *buf, size_t len, uint64_t seed);
struct shim_pkt_hdr t_tmpl(const struct shim_peer *p, uint32_t msgid);

#endif /* OPX_TEST_SHIM_FIXTURE_H */
