/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cq_fixture.c - see cq_fixture.h.
 */
#include <stdio.h>

#include "cq_fixture.h"
#include "opx_cq.h"

struct fi_info *g_info;
struct fid_fabric *g_fabric;
struct fid_domain *g_domain;

static struct fx_env g_env;

int group_setup(void **state)
{
	int ret;

	(void)state;
	ret = fx_open_domain(&g_env, "safe");
	if (ret) {
		fprintf(stderr, "fabric/domain: %d\n", ret);
		return -1;
	}
	g_info = g_env.info;
	g_fabric = g_env.fabric;
	g_domain = g_env.domain;
	return 0;
}

int group_teardown(void **state)
{
	(void)state;
	fx_close(&g_env);
	return 0;
}

struct fid_cq *open_cq(enum fi_cq_format format, enum fi_wait_obj wait, size_t size)
{
	struct fi_cq_attr attr = {.format = format, .wait_obj = wait, .size = size};
	struct fid_cq *cq = NULL;

	assert_int_equal(fi_cq_open(g_domain, &attr, &cq, NULL), 0);
	assert_non_null(cq);
	return cq;
}

struct opx_cq *opx_of(struct fid_cq *cq)
{
	return OPX_CONTAINER_OF(cq, struct opx_cq, cq_fid);
}

/* Report as the endpoint would: under the domain lock. */
void report(struct fid_cq *cq, uintptr_t ctx, uint64_t flags, size_t len, uint64_t data,
		   uint64_t tag, fi_addr_t src)
{
	struct opx_cq *c = opx_of(cq);

	opx_lock_acquire(&c->domain->lock);
	assert_int_equal(opx_complete_report_locked(c, (void *)ctx, flags, len, (void *)(ctx * 2),
						    data, tag, src),
			 0);
	opx_lock_release(&c->domain->lock);
}

void report_err(struct fid_cq *cq, uintptr_t ctx, int err, int prov_errno)
{
	struct opx_cq *c = opx_of(cq);

	opx_lock_acquire(&c->domain->lock);
	assert_int_equal(opx_complete_report_err_locked(c, (void *)ctx, FI_RECV | FI_TAGGED, 10,
							NULL, 5, 0x77, 3, err, prov_errno,
							FI_ADDR_NOTAVAIL),
			 0);
	opx_lock_release(&c->domain->lock);
}
