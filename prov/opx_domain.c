/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_domain.c - domain and memory registration.
 *
 * A domain is one unit of the SuperNIC as seen by one process.  It owns
 * the lock every object opened from it shares (see opx.h) and the table
 * of memory-region keys (opx_mr.c), which the target checks every RMA and
 * atomic request against.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opx.h"
#include "opx_addr.h"
#include "opx_av.h"
#include "opx_cq.h"
#include "opx_rma.h"

/* ---------------------------------------------------------------------
 * Domain.
 */
static int opx_domain_close(struct fid *fid)
{
	struct opx_domain *d;

	if (!fid || fid->fclass != FI_CLASS_DOMAIN)
		return -FI_EINVAL;
	d = OPX_CONTAINER_OF(fid, struct opx_domain, domain_fid.fid);
	if (atomic_load(&d->refcnt) > 0) {
		OPX_INFO(FI_LOG_DOMAIN, "domain still has %d open objects\n",
			 atomic_load(&d->refcnt));
		return -FI_EBUSY;
	}
	opx_auto_stop(d);
	atomic_fetch_sub(&d->fabric->refcnt, 1);
	opx_mr_table_free(&d->mr_table);
	opx_lock_destroy(&d->lock);
	free(d);
	return 0;
}

static int opx_domain_stx_ctx(struct fid_domain *domain, struct fi_tx_attr *attr,
			      struct fid_stx **stx, void *context)
{
	(void)domain;
	(void)attr;
	(void)stx;
	(void)context;
	return -FI_ENOSYS;
}

static int opx_domain_srx_ctx(struct fid_domain *domain, struct fi_rx_attr *attr,
			      struct fid_ep **rx_ep, void *context)
{
	(void)domain;
	(void)attr;
	(void)rx_ep;
	(void)context;
	return -FI_ENOSYS;
}

static int opx_domain_query_collective(struct fid_domain *domain, enum fi_collective_op coll,
				       struct fi_collective_attr *attr, uint64_t flags)
{
	(void)domain;
	(void)coll;
	(void)attr;
	(void)flags;
	return -FI_ENOSYS;
}

static struct fi_ops opx_domain_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = opx_domain_close,
	.bind = opx_init_no_bind,
	.control = opx_init_no_control,
	.ops_open = opx_init_no_ops_open,
};

static struct fi_ops_domain opx_domain_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = opx_av_open,
	.cq_open = opx_cq_open,
	.endpoint = opx_ep_open,
	.scalable_ep = opx_sep_open, /* opx_sep.c */
	.cntr_open = opx_cntr_open,
	.poll_open = opx_poll_open, /* opx_poll.c */
	.stx_ctx = opx_domain_stx_ctx,
	.srx_ctx = opx_domain_srx_ctx,
	.query_atomic = opx_atomic_query,
	.query_collective = opx_domain_query_collective,
};

/* The lock is real whenever two application threads may legally be inside
 * this domain at once.  Only FI_THREAD_DOMAIN (and UNSPEC, which fi_getinfo
 * turns into DOMAIN) promises full serialisation; FID, ENDPOINT and
 * COMPLETION allow concurrent calls on different objects, and those
 * objects share domain state (AV, MR list, CQs). */
static bool opx_domain_needs_lock(enum fi_threading t)
{
	return t != FI_THREAD_DOMAIN && t != FI_THREAD_UNSPEC;
}

int opx_domain_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain,
		    void *context)
{
	struct opx_fabric *fab;
	struct opx_domain *d;
	bool auto_progress;
	char name[32];
	int unit;

	if (!fabric || fabric->fid.fclass != FI_CLASS_FABRIC || !info || !domain)
		return -FI_EINVAL;
	fab = OPX_CONTAINER_OF(fabric, struct opx_fabric, fabric_fid);
	if (info->caps & ~OPX_CAPS) {
		OPX_INFO(FI_LOG_DOMAIN, "caps 0x%llx not supported\n",
			 (unsigned long long)(info->caps & ~OPX_CAPS));
		return -FI_EOPNOTSUPP;
	}
	unit = shim_dev_select_unit(fab->dev);
	if (unit < 0)
		return opx_init_err_from_shim(unit);
	snprintf(name, sizeof(name), "opx_%d", unit);
	if (info->domain_attr && info->domain_attr->name && strcmp(info->domain_attr->name, name)) {
		OPX_INFO(FI_LOG_DOMAIN, "domain name '%s' is not '%s'\n", info->domain_attr->name,
			 name);
		return -FI_EINVAL;
	}

	d = calloc(1, sizeof(*d));
	if (!d)
		return -FI_ENOMEM;
	if (opx_addr_format(info->addr_format, &d->addr_format)) {
		free(d);
		return -FI_EINVAL;
	}
	d->fabric = fab;
	d->unit = unit;
	d->threading = FI_THREAD_DOMAIN;
	if (info->domain_attr && info->domain_attr->threading != FI_THREAD_UNSPEC)
		d->threading = info->domain_attr->threading;
	d->mr_mode = info->domain_attr ? (uint64_t)info->domain_attr->mr_mode : 0;
	auto_progress = info->domain_attr &&
			(info->domain_attr->control_progress == FI_PROGRESS_AUTO ||
			 info->domain_attr->data_progress == FI_PROGRESS_AUTO);
	/* a progress thread shares every object with the application */
	opx_lock_init(&d->lock, auto_progress || opx_domain_needs_lock(d->threading));
	atomic_init(&d->refcnt, 0);
	d->next_mr_key = 1; /* key 0 stays unused so a zeroed key is never valid */
	opx_list_init(&d->rgn_eps);
	if (auto_progress) {
		int rc = opx_auto_start(d);

		if (rc) {
			opx_lock_destroy(&d->lock);
			free(d);
			return rc;
		}
	}

	d->domain_fid.fid.fclass = FI_CLASS_DOMAIN;
	d->domain_fid.fid.context = context;
	d->domain_fid.fid.ops = &opx_domain_fi_ops;
	d->domain_fid.ops = &opx_domain_ops;
	d->domain_fid.mr = &opx_domain_mr_ops;
	atomic_fetch_add(&fab->refcnt, 1);
	*domain = &d->domain_fid;
	return 0;
}
