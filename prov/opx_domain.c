/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_domain.c - domain and memory registration.
 *
 * A domain is one unit of the SuperNIC as seen by one process.  It owns
 * the lock every object opened from it shares (see opx.h) and the list of
 * memory regions.  MR keys are checked at the target by the RMA path, so
 * the list is the source of truth for "is this key valid here".
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opx.h"

#define OPX_MR_ACCESS                                                                              \
	(FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)

/* ---------------------------------------------------------------------
 * Memory regions.
 */
struct opx_mr *opx_mr_find_locked(struct opx_domain *domain, uint64_t key)
{
	struct opx_list *it;

	if (!domain)
		return NULL;
	opx_list_foreach(&domain->mr_list, it)
	{
		struct opx_mr *mr = OPX_CONTAINER_OF(it, struct opx_mr, link);

		if (mr->mr_fid.key == key)
			return mr;
	}
	return NULL;
}

static bool opx_domain_prov_key(const struct opx_domain *d)
{
	/* FI_MR_BASIC (old-style) implies provider-chosen keys. */
	return d->mr_mode == FI_MR_BASIC || (d->mr_mode & FI_MR_PROV_KEY);
}

static int opx_mr_close(struct fid *fid)
{
	struct opx_mr *mr;
	struct opx_domain *d;

	if (!fid || fid->fclass != FI_CLASS_MR)
		return -FI_EINVAL;
	mr = OPX_CONTAINER_OF(fid, struct opx_mr, mr_fid.fid);
	d = mr->domain;
	opx_lock_acquire(&d->lock);
	opx_list_remove(&mr->link);
	opx_lock_release(&d->lock);
	atomic_fetch_sub(&d->refcnt, 1);
	free(mr);
	return 0;
}

static struct fi_ops opx_mr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = opx_mr_close,
	.bind = opx_no_bind,
	.control = opx_no_control,
	.ops_open = opx_no_ops_open,
};

static int opx_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
			  struct fid_mr **mr_out)
{
	struct opx_domain *d;
	struct opx_mr *mr;
	uint64_t key;
	size_t i;

	if (!fid || fid->fclass != FI_CLASS_DOMAIN || !attr || !mr_out)
		return -FI_EINVAL;
	d = OPX_CONTAINER_OF(fid, struct opx_domain, domain_fid.fid);
	if (attr->iov_count && !attr->mr_iov)
		return -FI_EINVAL;
	if (attr->iov_count > OPX_IOV_LIMIT) {
		OPX_INFO(FI_LOG_MR, "iov_count %zu > %d\n", attr->iov_count, OPX_IOV_LIMIT);
		return -FI_EINVAL;
	}
	for (i = 0; i < attr->iov_count; i++)
		if (!attr->mr_iov[i].iov_base && attr->mr_iov[i].iov_len)
			return -FI_EINVAL;
	if (attr->access & ~OPX_MR_ACCESS) {
		OPX_INFO(FI_LOG_MR, "unknown access bits 0x%llx\n",
			 (unsigned long long)(attr->access & ~OPX_MR_ACCESS));
		return -FI_EINVAL;
	}
	if (flags)
		return -FI_EBADFLAGS;
	/* No FI_HMEM capability: only host memory can be registered. */
	if (attr->iface != FI_HMEM_SYSTEM)
		return -FI_EOPNOTSUPP;
	if (attr->auth_key_size)
		return -FI_EINVAL;

	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -FI_ENOMEM;

	opx_lock_acquire(&d->lock);
	if (opx_domain_prov_key(d)) {
		/* Skip keys still in use after the counter wrapped. */
		do
			key = d->next_mr_key++;
		while (opx_mr_find_locked(d, key));
	} else {
		key = attr->requested_key;
		if (opx_mr_find_locked(d, key)) {
			opx_lock_release(&d->lock);
			free(mr);
			OPX_INFO(FI_LOG_MR, "key 0x%llx already registered\n",
				 (unsigned long long)key);
			return -FI_ENOKEY;
		}
	}
	mr->mr_fid.fid.fclass = FI_CLASS_MR;
	mr->mr_fid.fid.context = attr->context;
	mr->mr_fid.fid.ops = &opx_mr_fi_ops;
	mr->mr_fid.mem_desc = mr; /* desc: the region itself, O(1) at use */
	mr->mr_fid.key = key;
	mr->domain = d;
	mr->access = attr->access;
	mr->flags = flags;
	mr->offset = attr->offset;
	mr->iov_count = attr->iov_count;
	for (i = 0; i < attr->iov_count; i++)
		mr->iov[i] = attr->mr_iov[i];
	opx_list_insert_tail(&d->mr_list, &mr->link);
	atomic_fetch_add(&d->refcnt, 1);
	opx_lock_release(&d->lock);

	*mr_out = &mr->mr_fid;
	return 0;
}

static int opx_mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access,
		       uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr **mr,
		       void *context)
{
	struct fi_mr_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.mr_iov = iov;
	attr.iov_count = count;
	attr.access = access;
	attr.offset = offset;
	attr.requested_key = requested_key;
	attr.context = context;
	attr.iface = FI_HMEM_SYSTEM;
	return opx_mr_regattr(fid, &attr, flags, mr);
}

static int opx_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access,
		      uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr **mr,
		      void *context)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	return opx_mr_regv(fid, &iov, 1, access, offset, requested_key, flags, mr, context);
}

static struct fi_ops_mr opx_domain_mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = opx_mr_reg,
	.regv = opx_mr_regv,
	.regattr = opx_mr_regattr,
};

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
	atomic_fetch_sub(&d->fabric->refcnt, 1);
	opx_lock_destroy(&d->lock);
	free(d);
	return 0;
}

static int opx_domain_scalable_ep(struct fid_domain *domain, struct fi_info *info,
				  struct fid_ep **sep, void *context)
{
	(void)domain;
	(void)info;
	(void)sep;
	(void)context;
	return -FI_ENOSYS;
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

static int opx_domain_query_atomic(struct fid_domain *domain, enum fi_datatype datatype,
				   enum fi_op op, struct fi_atomic_attr *attr, uint64_t flags)
{
	(void)domain;
	(void)datatype;
	(void)op;
	(void)attr;
	(void)flags;
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
	.bind = opx_no_bind,
	.control = opx_no_control,
	.ops_open = opx_no_ops_open,
};

static struct fi_ops_domain opx_domain_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = opx_av_open,
	.cq_open = opx_cq_open,
	.endpoint = opx_ep_open,
	.scalable_ep = opx_domain_scalable_ep,
	.cntr_open = opx_cntr_open,
	.poll_open = opx_poll_open, /* opx_poll.c */
	.stx_ctx = opx_domain_stx_ctx,
	.srx_ctx = opx_domain_srx_ctx,
	.query_atomic = opx_domain_query_atomic,
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
		return opx_err_from_shim(unit);
	snprintf(name, sizeof(name), "opx_%d", unit);
	if (info->domain_attr && info->domain_attr->name && strcmp(info->domain_attr->name, name)) {
		OPX_INFO(FI_LOG_DOMAIN, "domain name '%s' is not '%s'\n", info->domain_attr->name,
			 name);
		return -FI_EINVAL;
	}

	d = calloc(1, sizeof(*d));
	if (!d)
		return -FI_ENOMEM;
	d->fabric = fab;
	d->unit = unit;
	d->threading = FI_THREAD_DOMAIN;
	if (info->domain_attr && info->domain_attr->threading != FI_THREAD_UNSPEC)
		d->threading = info->domain_attr->threading;
	d->mr_mode = info->domain_attr ? (uint64_t)info->domain_attr->mr_mode : 0;
	opx_lock_init(&d->lock, opx_domain_needs_lock(d->threading));
	atomic_init(&d->refcnt, 0);
	opx_list_init(&d->mr_list);
	d->next_mr_key = 1; /* key 0 stays unused so a zeroed key is never valid */

	d->domain_fid.fid.fclass = FI_CLASS_DOMAIN;
	d->domain_fid.fid.context = context;
	d->domain_fid.fid.ops = &opx_domain_fi_ops;
	d->domain_fid.ops = &opx_domain_ops;
	d->domain_fid.mr = &opx_domain_mr_ops;
	atomic_fetch_add(&fab->refcnt, 1);
	*domain = &d->domain_fid;
	return 0;
}
