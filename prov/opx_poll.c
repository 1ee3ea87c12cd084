/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_poll.c - poll sets (fi_poll(3)): one call that progresses the
 * endpoints of several CQs and counters and says which of them have
 * something new.
 *
 * A CQ is reported while it has completions or an error to read (like
 * fi_cq_read would return them); a counter when its value or error count
 * moved since this poll set last reported it.  The poll set asks each
 * member through a provider-specific control command (OPX_CTL_POLL), so
 * it needs none of their internals and takes no domain lock itself: each
 * member takes it while it progresses its endpoints.  A member cannot be
 * closed while it is in a set (-FI_EBUSY, as with a bound endpoint).
 *
 * Wait sets (fi_wait_open, FI_WAIT_SET) are not provided: every opx CQ,
 * counter and EQ has its own fd (FI_WAIT_FD) and fi_trywait, which is
 * what a wait set would be built from; they answer -FI_ENOSYS.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "opx.h"
#include "opx_cq.h"

struct opx_poll_member {
	struct fid *fid;
	uint64_t last; /* counter: value + errors when last reported */
};

struct opx_poll {
	struct fid_poll poll_fid;
	struct opx_domain *domain;
	pthread_mutex_t lock; /* the member array */
	struct opx_poll_member *m;
	size_t count;
	size_t cap;
};

static struct opx_poll *opx_poll_of(struct fid_poll *p)
{
	return OPX_CONTAINER_OF(p, struct opx_poll, poll_fid);
}

/* The reference a member holds: the same count that keeps a CQ or
 * counter open while endpoints are bound to it. */
static _Atomic int *opx_poll_refcnt(struct fid *fid)
{
	if (fid->fclass == FI_CLASS_CQ)
		return &OPX_CONTAINER_OF(fid, struct opx_cq, cq_fid.fid)->refcnt;
	return &OPX_CONTAINER_OF(fid, struct opx_cntr, cntr_fid.fid)->refcnt;
}

static struct opx_domain *opx_poll_member_domain(struct fid *fid)
{
	if (fid->fclass == FI_CLASS_CQ)
		return OPX_CONTAINER_OF(fid, struct opx_cq, cq_fid.fid)->domain;
	return OPX_CONTAINER_OF(fid, struct opx_cntr, cntr_fid.fid)->domain;
}

static int opx_poll_poll(struct fid_poll *pfid, void **context, int count)
{
	struct opx_poll *ps;
	int n = 0;

	if (!pfid || count < 0 || (count && !context))
		return -FI_EINVAL;
	ps = opx_poll_of(pfid);
	pthread_mutex_lock(&ps->lock);
	/* progress every member even when the array fills: the next call
	 * must not starve the ones at the end */
	for (size_t i = 0; i < ps->count; i++) {
		struct opx_poll_member *m = &ps->m[i];
		uint64_t v = 0;
		int ret = m->fid->ops->control(m->fid, OPX_CTL_POLL, &v);
		bool ready;

		if (ret < 0)
			continue;
		if (m->fid->fclass == FI_CLASS_CQ) {
			ready = ret > 0;
		} else {
			ready = v != m->last;
			if (ready && n < count)
				m->last = v;
		}
		if (ready && n < count)
			context[n++] = m->fid->context;
	}
	pthread_mutex_unlock(&ps->lock);
	return n;
}

static int opx_poll_add(struct fid_poll *pfid, struct fid *fid, uint64_t flags)
{
	struct opx_poll *ps;
	uint64_t v = 0;
	int ret = 0;

	if (!pfid || !fid)
		return -FI_EINVAL;
	if (flags)
		return -FI_EBADFLAGS;
	if (fid->fclass != FI_CLASS_CQ && fid->fclass != FI_CLASS_CNTR)
		return -FI_EINVAL; /* fi_poll(3): completion queues and counters */
	ps = opx_poll_of(pfid);
	if (opx_poll_member_domain(fid) != ps->domain)
		return -FI_EINVAL;

	pthread_mutex_lock(&ps->lock);
	for (size_t i = 0; i < ps->count; i++) {
		if (ps->m[i].fid == fid) {
			ret = -FI_EALREADY;
			goto out;
		}
	}
	if (ps->count == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 4;
		struct opx_poll_member *m = realloc(ps->m, cap * sizeof(*m));

		if (!m) {
			ret = -FI_ENOMEM;
			goto out;
		}
		ps->m = m;
		ps->cap = cap;
	}
	/* a counter reports changes from now on */
	if (fid->fclass == FI_CLASS_CNTR)
		(void)fid->ops->control(fid, OPX_CTL_POLL, &v);
	ps->m[ps->count].fid = fid;
	ps->m[ps->count].last = v;
	ps->count++;
	atomic_fetch_add(opx_poll_refcnt(fid), 1);
out:
	pthread_mutex_unlock(&ps->lock);
	return ret;
}

static int opx_poll_del(struct fid_poll *pfid, struct fid *fid, uint64_t flags)
{
	struct opx_poll *ps;
	int ret = -FI_ENOENT;

	if (!pfid || !fid)
		return -FI_EINVAL;
	if (flags)
		return -FI_EBADFLAGS;
	ps = opx_poll_of(pfid);
	pthread_mutex_lock(&ps->lock);
	for (size_t i = 0; i < ps->count; i++) {
		if (ps->m[i].fid != fid)
			continue;
		atomic_fetch_sub(opx_poll_refcnt(fid), 1);
		memmove(&ps->m[i], &ps->m[i + 1], (ps->count - i - 1) * sizeof(ps->m[0]));
		ps->count--;
		ret = 0;
		break;
	}
	pthread_mutex_unlock(&ps->lock);
	return ret;
}

static int opx_poll_close(struct fid *fid)
{
	struct opx_poll *ps = OPX_CONTAINER_OF(fid, struct opx_poll, poll_fid.fid);

	/* closing the set lets its members go */
	for (size_t i = 0; i < ps->count; i++)
		atomic_fetch_sub(opx_poll_refcnt(ps->m[i].fid), 1);
	atomic_fetch_sub(&ps->domain->refcnt, 1);
	pthread_mutex_destroy(&ps->lock);
	free(ps->m);
	free(ps);
	return 0;
}

static struct fi_ops opx_poll_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = opx_poll_close,
	.bind = opx_init_no_bind,
	.control = opx_init_no_control,
	.ops_open = opx_init_no_ops_open,
};

static struct fi_ops_poll opx_poll_ops = {
	.size = sizeof(struct fi_ops_poll),
	.poll = opx_poll_poll,
	.poll_add = opx_poll_add,
	.poll_del = opx_poll_del,
};

int opx_poll_open(struct fid_domain *domain_fid, struct fi_poll_attr *attr,
		  struct fid_poll **pollset)
{
	struct opx_domain *domain;
	struct opx_poll *ps;

	if (!domain_fid || !pollset)
		return -FI_EINVAL;
	if (attr && attr->flags)
		return -FI_EBADFLAGS;
	domain = OPX_CONTAINER_OF(domain_fid, struct opx_domain, domain_fid);
	ps = calloc(1, sizeof(*ps));
	if (!ps)
		return -FI_ENOMEM;
	ps->domain = domain;
	pthread_mutex_init(&ps->lock, NULL);
	ps->poll_fid.fid.fclass = FI_CLASS_POLL;
	ps->poll_fid.fid.context = NULL;
	ps->poll_fid.fid.ops = &opx_poll_fi_ops;
	ps->poll_fid.ops = &opx_poll_ops;
	atomic_fetch_add(&domain->refcnt, 1);
	*pollset = &ps->poll_fid;
	return 0;
}
