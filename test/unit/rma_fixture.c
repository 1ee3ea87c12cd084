/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rma_fixture.c - see rma_fixture.h.
 */
#include <string.h>
#include <time.h>

#include "rma_fixture.h"

void rma_close(struct rma_env *e)
{
	if (e->ep)
		fi_close(&e->ep->fid);
	if (e->wcntr)
		fi_close(&e->wcntr->fid);
	if (e->rcntr)
		fi_close(&e->rcntr->fid);
	if (e->cq)
		fi_close(&e->cq->fid);
	if (e->av)
		fi_close(&e->av->fid);
	if (e->domain)
		fi_close(&e->domain->fid);
	if (e->fabric)
		fi_close(&e->fabric->fid);
	if (e->info)
		fi_freeinfo(e->info);
	memset(e, 0, sizeof(*e));
}

void rma_open(struct rma_env *e, int mr_mode)
{
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE};
	struct fi_cntr_attr cntr_attr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
	char addr[64];
	size_t addrlen = sizeof(addr);

	memset(e, 0, sizeof(*e));
	assert_int_equal(fx_getinfo(NULL, FI_RMA | FI_TAGGED, &e->info), 0);
	assert_true(e->info->caps & FI_RMA);
	assert_true(e->info->caps & FI_REMOTE_WRITE);
	e->info->domain_attr->mr_mode = mr_mode;
	assert_int_equal(fx_prov()->fabric(e->info->fabric_attr, &e->fabric, NULL), 0);
	assert_int_equal(fi_domain(e->fabric, e->info, &e->domain, NULL), 0);
	assert_int_equal(fi_av_open(e->domain, &av_attr, &e->av, NULL), 0);
	assert_int_equal(fi_cq_open(e->domain, &cq_attr, &e->cq, NULL), 0);
	assert_int_equal(fi_cntr_open(e->domain, &cntr_attr, &e->wcntr, NULL), 0);
	assert_int_equal(fi_cntr_open(e->domain, &cntr_attr, &e->rcntr, NULL), 0);
	assert_int_equal(fi_endpoint(e->domain, e->info, &e->ep, NULL), 0);
	assert_int_equal(fi_ep_bind(e->ep, &e->av->fid, 0), 0);
	assert_int_equal(fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV), 0);
	assert_int_equal(fi_ep_bind(e->ep, &e->wcntr->fid, FI_WRITE), 0);
	assert_int_equal(fi_ep_bind(e->ep, &e->rcntr->fid, FI_READ), 0);
	assert_int_equal(fi_enable(e->ep), 0);
	assert_int_equal(fi_getname(&e->ep->fid, addr, &addrlen), 0);
	assert_int_equal(fi_av_insert(e->av, addr, 1, &e->self, 0, NULL), 1);
}

int rma_wait(struct rma_env *e, void *ctx, struct fi_cq_data_entry *rdata)
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
