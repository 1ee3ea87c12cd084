/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_mr.c - memory registration and the keys the target checks.
 *
 * Keys live in a chained hash table per domain (struct opx_mr_table in
 * opx.h) so that the target resolves the key of every incoming RMA or
 * atomic request in O(1), whatever the number of regions.  Provider keys
 * (FI_MR_PROV_KEY, FI_MR_BASIC) are handed out from a counter; otherwise
 * the application's requested key is used (scalable user keys).  Closing a
 * region unlinks its key under the domain lock, and the target resolves
 * keys under the same lock, so a closed key fails from the very next
 * request on.
 *
 * Remote addresses are virtual addresses with FI_MR_VIRT_ADDR (or the
 * old FI_MR_BASIC) in the domain's mr_mode, else 0-based offsets into the
 * region; a region of several iovecs is addressed as their concatenation,
 * starting at the first one's base.
 *
 * Memory that is not there.  Without FI_MR_ALLOCATED in the domain's
 * mr_mode an application may register addresses no memory backs: MPICH
 * registers the whole address space (base NULL, length UINTPTR_MAX) for a
 * dynamic window and addresses it with absolute addresses.  Such a region
 * (one of whose pieces starts at NULL) is marked `probe`: before a
 * request touches it, one byte of every page of the resolved range is
 * read, and for a write written back, through process_vm_readv/writev on
 * this process, which fail with EFAULT where a load or a store would
 * fault; the request then fails with FI_EFAULT instead of killing the
 * target.  Such a region is not offered to initiators' own copies (the
 * region table below), so every access to it passes the probe.  Regions of real buffers are not probed (an application that
 * unmaps a buffer it registered is wrong, as with FI_MR_ALLOCATED).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "opx_cq.h"
#include "opx_ep.h"
#include "opx_rma.h"

#define OPX_MR_MIN_BUCKETS 64

static inline size_t opx_mr_hash(uint64_t key, size_t mask)
{
	/* Provider keys are consecutive, user keys often multiples of a
	 * stride: mix before masking (Fibonacci hashing). */
	return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 32) & mask;
}

struct opx_mr *opx_mr_find_locked(struct opx_domain *domain, uint64_t key)
{
	struct opx_mr *mr;

	if (!domain)
		return NULL;
	OPX_ASSERT_LOCKED(&domain->lock);
	if (!domain->mr_table.bucket)
		return NULL;
	for (mr = domain->mr_table.bucket[opx_mr_hash(key, domain->mr_table.mask)]; mr;
	     mr = mr->hnext)
		if (mr->mr_fid.key == key)
			return mr;
	return NULL;
}

static int opx_mr_table_grow(struct opx_mr_table *t)
{
	size_t n = t->bucket ? (t->mask + 1) * 2 : OPX_MR_MIN_BUCKETS;
	struct opx_mr **nb = calloc(n, sizeof(*nb));

	if (!nb)
		return -FI_ENOMEM;
	if (t->bucket) {
		for (size_t i = 0; i <= t->mask; i++) {
			struct opx_mr *mr = t->bucket[i], *next;
			for (; mr; mr = next) {
				size_t h = opx_mr_hash(mr->mr_fid.key, n - 1);
				next = mr->hnext;
				mr->hnext = nb[h];
				nb[h] = mr;
			}
		}
		free(t->bucket);
	}
	t->bucket = nb;
	t->mask = n - 1;
	return 0;
}

static int opx_mr_table_insert(struct opx_mr_table *t, struct opx_mr *mr)
{
	size_t h;

	if (!t->bucket || t->count >= t->mask + 1) {
		int rc = opx_mr_table_grow(t);
		if (rc && !t->bucket)
			return rc;
		/* a failed grow of a non-empty table only costs longer chains */
	}
	h = opx_mr_hash(mr->mr_fid.key, t->mask);
	mr->hnext = t->bucket[h];
	t->bucket[h] = mr;
	t->count++;
	return 0;
}

static void opx_mr_table_remove(struct opx_mr_table *t, struct opx_mr *mr)
{
	struct opx_mr **pp;

	if (!t->bucket)
		return;
	for (pp = &t->bucket[opx_mr_hash(mr->mr_fid.key, t->mask)]; *pp; pp = &(*pp)->hnext) {
		if (*pp == mr) {
			*pp = mr->hnext;
			mr->hnext = NULL;
			t->count--;
			return;
		}
	}
}

void opx_mr_table_free(struct opx_mr_table *t)
{
	free(t->bucket);
	memset(t, 0, sizeof(*t));
}

bool opx_mr_virt_addr(const struct opx_domain *d)
{
	return d->mr_mode == FI_MR_BASIC || (d->mr_mode & FI_MR_VIRT_ADDR);
}

/* ---------------------------------------------------------------------
 * Region tables (shim_rgn.c): every region a peer on this host may copy
 * into or out of by itself is published in the region table of every
 * endpoint of the domain that takes one-sided operations and needs no
 * event for them.  Not published (those go through the target's
 * progress, which raises the events): a region with a counter bound
 * (FI_RMA_EVENT), of several pieces, without remote access, or probed
 * (memory that may not be there: the target probes it first); an endpoint
 * with remote counters, or a scalable endpoint's transmit context.
 * Retracting waits until no peer can be copying any more, so a region
 * closed here is never written after fi_close returns.
 */
static uint32_t opx_mr_rgn_access(const struct opx_mr *mr)
{
	if (mr->cntr || mr->iov_count != 1 || !mr->len || mr->probe)
		return 0;
	return ((mr->access & FI_REMOTE_READ) ? SHIM_RGN_READ : 0) |
	       ((mr->access & FI_REMOTE_WRITE) ? SHIM_RGN_WRITE : 0);
}

static void opx_mr_rgn_publish(struct opx_ep *ep, struct opx_mr *mr)
{
	uint32_t access = opx_mr_rgn_access(mr);
	const void *base = mr->iov[0].iov_base;
	uint64_t raddr = opx_mr_virt_addr(mr->domain) ? (uint64_t)(uintptr_t)base : 0;

	if (access)
		(void)shim_rgn_publish(ep->shim, mr->mr_fid.key, raddr, base, mr->len, access);
}

static void opx_mr_rgn_retract(struct opx_ep *ep, struct opx_mr *mr)
{
	if (opx_mr_rgn_access(mr))
		(void)shim_rgn_retract(ep->shim, mr->mr_fid.key);
}

/* Every region of the domain, in or out of one endpoint's table. */
static void opx_mr_rgn_all(struct opx_ep *ep, bool publish)
{
	struct opx_mr_table *t = &ep->domain->mr_table;

	if (!t->bucket)
		return;
	for (size_t i = 0; i <= t->mask; i++)
		for (struct opx_mr *mr = t->bucket[i]; mr; mr = mr->hnext) {
			if (publish)
				opx_mr_rgn_publish(ep, mr);
			else
				opx_mr_rgn_retract(ep, mr);
		}
}

void opx_mr_ep_enable_locked(struct opx_ep *ep)
{
	OPX_ASSERT_LOCKED(&ep->domain->lock);
	if (ep->rma_st.rgn_pub || !ep->shim || (!opx_env.rma_direct_write && !opx_env.rma_direct_read) ||
	    !(ep->caps & (FI_RMA | FI_ATOMIC)) || ep->sep_role == OPX_SEP_TX || ep->rma_st.rwrite_cntr ||
	    ep->rma_st.rread_cntr)
		return;
	opx_mr_rgn_all(ep, true);
	opx_list_insert_tail(&ep->domain->rgn_eps, &ep->rma_st.rgn_link);
	ep->rma_st.rgn_pub = true;
}

void opx_mr_ep_close_locked(struct opx_ep *ep)
{
	OPX_ASSERT_LOCKED(&ep->domain->lock);
	if (!ep->rma_st.rgn_pub)
		return;
	opx_list_remove(&ep->rma_st.rgn_link);
	ep->rma_st.rgn_pub = false;
	opx_mr_rgn_all(ep, false);
}

/* One region, in or out of every publishing endpoint's table. */
static void opx_mr_rgn_each(struct opx_mr *mr, bool publish)
{
	struct opx_list *h = &mr->domain->rgn_eps;

	for (struct opx_list *l = h->next; l != h; l = l->next) {
		struct opx_ep *ep = OPX_CONTAINER_OF(l, struct opx_ep, rma_st.rgn_link);

		if (publish)
			opx_mr_rgn_publish(ep, mr);
		else
			opx_mr_rgn_retract(ep, mr);
	}
}

#define OPX_MR_PROBE_BATCH 64 /* pages per system call */
#define OPX_MR_PAGE 4096u      /* at most the page size: more probes, never fewer */

/* A batch of probes: read, and for a write written back unchanged. */
static int opx_mr_probe_batch(const struct iovec *r, size_t n, unsigned char *buf, bool write)
{
	const struct iovec l = {.iov_base = buf, .iov_len = n};
	const pid_t self = getpid();

	if (process_vm_readv(self, &l, 1, r, n, 0) != (ssize_t)n)
		return -FI_EFAULT;
	if (write && process_vm_writev(self, &l, 1, r, n, 0) != (ssize_t)n)
		return -FI_EFAULT;
	return 0;
}

/* One byte of every page of out[0..cnt) read (and written back: write)
 * through the kernel, on this process: 0, or -FI_EFAULT where a load or
 * a store would fault.  Page by page from each piece's first byte, so no
 * byte outside the range is touched. */
static int opx_mr_probe(const struct iovec *out, size_t cnt, bool write)
{
	unsigned char buf[OPX_MR_PROBE_BATCH];
	struct iovec r[OPX_MR_PROBE_BATCH];
	size_t n = 0;
	int rc;

	for (size_t i = 0; i < cnt; i++) {
		uintptr_t p = (uintptr_t)out[i].iov_base;
		size_t left = out[i].iov_len;

		while (left) {
			size_t step = OPX_MR_PAGE - (p & (OPX_MR_PAGE - 1));

			r[n].iov_base = (void *)p;
			r[n].iov_len = 1;
			if (++n == OPX_MR_PROBE_BATCH) {
				if ((rc = opx_mr_probe_batch(r, n, buf, write)) != 0)
					return rc;
				n = 0;
			}
			if (step >= left)
				break;
			left -= step;
			p += step;
		}
	}
	return n ? opx_mr_probe_batch(r, n, buf, write) : 0;
}

int opx_mr_resolve_locked(struct opx_domain *d, uint64_t key, uint64_t addr, size_t len,
			  uint64_t need, struct iovec *out, size_t *outcnt, struct opx_mr **mrp)
{
	OPX_ASSERT_LOCKED(&d->lock);
	struct opx_mr *mr = opx_mr_find_locked(d, key);
	uint64_t off;

	if (!mr)
		return -FI_EACCES;
	/* Access rights first: a missing permission is reported as such even
	 * for a range that is also wrong. */
	if ((mr->access & need) != need)
		return -FI_EACCES;
	off = addr;
	if (opx_mr_virt_addr(d)) {
		uint64_t base = mr->iov_count ? (uint64_t)(uintptr_t)mr->iov[0].iov_base : 0;
		if (addr < base)
			return -FI_EINVAL;
		off = addr - base;
	}
	/* overflow-safe: off <= len(mr) first, then len <= what is left */
	if (off > mr->len || len > mr->len - off)
		return -FI_EINVAL;
	*outcnt = len ? opx_iov_slice(mr->iov, mr->iov_count, (size_t)off, len, out) : 0;
	if (__builtin_expect(mr->probe, 0) &&
	    opx_mr_probe(out, *outcnt, (need & (FI_REMOTE_WRITE | FI_WRITE)) != 0))
		return -FI_EFAULT;
	if (mrp)
		*mrp = mr;
	return 0;
}

/* The application registers only memory that is there (FI_MR_ALLOCATED,
 * or the old FI_MR_BASIC, which implies it). */
static bool opx_mr_allocated(const struct opx_domain *d)
{
	return d->mr_mode == FI_MR_BASIC || (d->mr_mode & FI_MR_ALLOCATED);
}

static bool opx_mr_prov_key(const struct opx_domain *d)
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
	opx_mr_rgn_each(mr, false);
	opx_mr_table_remove(&d->mr_table, mr);
	opx_lock_release(&d->lock);
	if (mr->cntr)
		atomic_fetch_sub(&mr->cntr->refcnt, 1);
	atomic_fetch_sub(&d->refcnt, 1);
	free(mr);
	return 0;
}

/* FI_RMA_EVENT: a counter counting the remote writes and/or reads that
 * target this region (flags FI_REMOTE_WRITE, FI_REMOTE_READ).  The
 * counter advances when the target endpoint progresses: bind that
 * endpoint to a CQ or counter the application reads. */
static int opx_mr_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct opx_mr *mr = OPX_CONTAINER_OF(fid, struct opx_mr, mr_fid.fid);
	struct opx_cntr *cntr;

	if (!bfid || bfid->fclass != FI_CLASS_CNTR)
		return -FI_EINVAL;
	if (!(flags & (FI_REMOTE_WRITE | FI_REMOTE_READ)) ||
	    (flags & ~(FI_REMOTE_WRITE | FI_REMOTE_READ)))
		return -FI_EBADFLAGS;
	cntr = OPX_CONTAINER_OF(bfid, struct opx_cntr, cntr_fid.fid);
	if (cntr->domain != mr->domain)
		return -FI_EINVAL;
	opx_lock_acquire(&mr->domain->lock);
	if (mr->cntr && mr->cntr != cntr) {
		opx_lock_release(&mr->domain->lock);
		return -FI_EBUSY;
	}
	if (!mr->cntr) {
		opx_mr_rgn_each(mr, false); /* its accesses are counted by the target now */
		atomic_fetch_add(&cntr->refcnt, 1);
	}
	mr->cntr = cntr;
	mr->cntr_flags |= flags;
	opx_lock_release(&mr->domain->lock);
	return 0;
}

static int opx_mr_control(struct fid *fid, int command, void *arg)
{
	(void)fid, (void)arg;
	/* regions are usable from registration on: enabling is a no-op */
	return command == FI_ENABLE ? 0 : -FI_ENOSYS;
}

static struct fi_ops opx_mr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = opx_mr_close,
	.bind = opx_mr_bind,
	.control = opx_mr_control,
	.ops_open = opx_init_no_ops_open,
};

static int opx_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
			  struct fid_mr **mr_out)
{
	struct opx_domain *d;
	struct opx_mr *mr;
	uint64_t key;
	size_t i, len;
	bool probe = false;
	int rc;

	if (!fid || fid->fclass != FI_CLASS_DOMAIN || !attr || !mr_out)
		return -FI_EINVAL;
	d = OPX_CONTAINER_OF(fid, struct opx_domain, domain_fid.fid);
	if (attr->iov_count && !attr->mr_iov)
		return -FI_EINVAL;
	if (attr->iov_count > OPX_IOV_LIMIT) {
		OPX_INFO(FI_LOG_MR, "iov_count %zu > %d\n", attr->iov_count, OPX_IOV_LIMIT);
		return -FI_EINVAL;
	}
	for (i = 0, len = 0; i < attr->iov_count; i++) {
		uintptr_t base = (uintptr_t)attr->mr_iov[i].iov_base;
		size_t n = attr->mr_iov[i].iov_len;

		/* memory that is not there only where the application did not
		 * promise FI_MR_ALLOCATED (see the top of this file) */
		if (!base && n && opx_mr_allocated(d))
			return -FI_EINVAL;
		probe |= !base && n;
		/* no piece, and not the whole, beyond the address space */
		if (n > UINTPTR_MAX - base || n > SIZE_MAX - len)
			return -FI_EINVAL;
		len += n;
	}
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
	if (opx_mr_prov_key(d)) {
		/* Skip keys still in use after the counter wrapped. */
		do
			key = d->next_mr_key++;
		while (!key || opx_mr_find_locked(d, key));
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
	mr->probe = probe;
	for (i = 0; i < attr->iov_count; i++)
		mr->iov[i] = attr->mr_iov[i];
	mr->len = len; /* summed, and checked against overflow, above */
	rc = opx_mr_table_insert(&d->mr_table, mr);
	if (rc) {
		opx_lock_release(&d->lock);
		free(mr);
		return rc;
	}
	opx_mr_rgn_each(mr, true);
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

struct fi_ops_mr opx_domain_mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = opx_mr_reg,
	.regv = opx_mr_regv,
	.regattr = opx_mr_regattr,
};
