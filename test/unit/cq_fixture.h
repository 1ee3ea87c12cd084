/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cq_fixture.h - what the two completion suites (test_cq: formats, errors,
 * growth and arguments; test_cq_wait: blocking reads and counters) share:
 * one FI_THREAD_SAFE domain for the whole group, CQs opened on it, and
 * completions reported straight into a CQ the way the endpoint reports
 * them (opx_complete_report_locked), so no traffic is needed.
 */
#ifndef OPX_TEST_CQ_FIXTURE_H
#define OPX_TEST_CQ_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "fixture.h"
#include "opx.h"

/* The group's fabric and domain (FI_THREAD_SAFE: tests use threads). */
extern struct fi_info *g_info;
extern struct fid_fabric *g_fabric;
extern struct fid_domain *g_domain;

/* cmocka group fixtures: open and close the domain above. */
int group_setup(void **state);
int group_teardown(void **state);

/* A CQ on g_domain (fails the test on error). */
struct fid_cq *open_cq(enum fi_cq_format format, enum fi_wait_obj wait, size_t size);
/* The provider's CQ behind cq. */
struct opx_cq *opx_of(struct fid_cq *cq);
/* A completion of context ctx (buf ctx * 2), reported under the domain
 * lock as the endpoint would. */
void report(struct fid_cq *cq, uintptr_t ctx, uint64_t flags, size_t len, uint64_t data,
	    uint64_t tag, fi_addr_t src);
/* An error completion of ctx (FI_RECV | FI_TAGGED, len 10, data 5, tag
 * 0x77, olen 3), reported the same way. */
void report_err(struct fid_cq *cq, uintptr_t ctx, int err, int prov_errno);

#endif /* OPX_TEST_CQ_FIXTURE_H */
