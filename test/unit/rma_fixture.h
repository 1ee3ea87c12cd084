/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rma_fixture.h - what the two one-sided suites (test_rma: keys and RMA
 * by chunks; test_rma_cma: RMA by the target's Cross Memory Attach)
 * share: a loopback endpoint that is initiator and target (its own
 * progress answers its requests), with a data CQ and write/read counters,
 * a bounded wait for one completion, and a byte pattern.
 */
#ifndef OPX_TEST_RMA_FIXTURE_H
#define OPX_TEST_RMA_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fi_rma.h>

#include "fixture.h"
#include "opx_ep.h"

/* Loopback endpoint (struct fx_env, with its write and read counters, a
 * FI_CQ_FORMAT_DATA CQ) on a domain opened with mr_mode; fails the test
 * on any error.  fx_close closes it. */
void rma_open(struct fx_env *e, int mr_mode);

/* The tests of the target-driven protocols (chunks, the target's CMA)
 * turn the initiator's direct copies off (test_rgn.c tests those); the
 * sweeps run with them as configured. */
#define DIRECT_OFF()                                                                               \
	size_t direct_w = opx_env.rma_direct_write, direct_r = opx_env.rma_direct_read;            \
	opx_env.rma_direct_write = opx_env.rma_direct_read = 0
#define DIRECT_RESTORE()                                                                           \
	(opx_env.rma_direct_write = direct_w, opx_env.rma_direct_read = direct_r)

/* Wait for one completion (or error) with context ctx; returns 0 or the
 * positive error code.  Remote-CQ-data entries met on the way are
 * stored in *rdata (if not NULL). */
int rma_wait(struct fx_env *e, void *ctx, struct fi_cq_data_entry *rdata);

/* n bytes of the pattern of seed at p. */
void fill(uint8_t *p, size_t n, unsigned seed);

#endif /* OPX_TEST_RMA_FIXTURE_H */
