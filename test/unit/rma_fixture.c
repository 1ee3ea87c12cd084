/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rma_fixture.c - see rma_fixture.h.
 */
#include <string.h>
#include <time.h>

#include "rma_fixture.h"

void rma_open(struct fx_env *e, int mr_mode)
{
	const struct fx_opts o = {.av_type = FI_AV_TABLE, .cq_format = FI_CQ_FORMAT_DATA, .cntrs = 1};
	struct fi_info *info;

	memset(e, 0, sizeof(*e));
	assert_int_equal(fx_getinfo(NULL, FI_RMA | FI_TAGGED, &info), 0);
	assert_true(info->caps & FI_RMA);
	assert_true(info->caps & FI_REMOTE_WRITE);
	info->domain_attr->mr_mode = mr_mode;
	assert_int_equal(fx_open_info(e, info, &o), 0);
}

int rma_wait(struct fx_env *e, void *ctx, struct fi_cq_data_entry *rdata)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct fi_cq_data_entry c;
		ssize_t n = fi_cq_read(e->cq, &c, 1);

		if (n == 1) {
			if (c.flags & FI_REMOTE_CQ_DATA) {
				if (rdata)
					*rdata = c;
				continue;
			}
			assert_ptr_equal(c.op_context, ctx);
			return 0;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			assert_int_equal(fi_cq_readerr(e->cq, &err, 0), 1);
			assert_ptr_equal(err.op_context, ctx);
			return err.err;
		}
		assert_int_equal(n, -FI_EAGAIN);
		clock_gettime(CLOCK_MONOTONIC, &t);
		assert_true(t.tv_sec - t0.tv_sec < 20);
	}
}

void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}
