/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_cntr.c - completion counters.
 *
 * The value and error count are atomics, so the endpoint bumps them with
 * one relaxed-cost add (opx_cq_cntr_inc in opx.h) and fi_cntr_add/set need
 * no lock.  Reading a counter first progresses its endpoints, which needs
 * the domain lock: with manual progress a counter nobody reads would
 * otherwise never move.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "opx.h"
#include "opx_cq.h"


/* Private part; struct opx_cntr (opx.h) first so other files use it. */
struct opx_cntr_priv {
	struct opx_cntr cntr;
	bool armed;          /* fi_trywait armed our endpoints */
	uint64_t last_read;  /* value the application last saw (trywait) */
};

static inline struct opx_cntr_priv *opx_cntr_priv_of(struct opx_cntr *c)
{
	return OPX_CONTAINER_OF(c, struct opx_cntr_priv, cntr);
}

static inline struct opx_cntr *opx_cntr_of(struct fid_cntr *f)
{
	return OPX_CONTAINER_OF(f, struct opx_cntr, cntr_fid);
}

static void opx_cntr_progress(struct opx_cntr *c)
{
	struct opx_cntr_priv *priv = opx_cntr_priv_of(c);

	opx_lock_acquire(&c->domain->lock);
	if (__builtin_expect(priv->armed, 0)) {
		opx_pset_disarm_locked(&c->pset);
		priv->armed = false;
	}
	opx_pset_progress_locked(&c->pset);
	opx_lock_release(&c->domain->lock);
}

/* fi_cntr_read returns a value, not a status: a NULL counter reads 0. */
static uint64_t opx_cntr_read(struct fid_cntr *cntr_fid)
{
	struct opx_cntr *c;
	uint64_t v;

	if (!cntr_fid)
		return 0;
	c = opx_cntr_of(cntr_fid);
	opx_cntr_progress(c);
	v = atomic_load_explicit(&c->value, memory_order_acquire);
	opx_cntr_priv_of(c)->last_read = v;
	return v;
}

static uint64_t opx_cntr_readerr(struct fid_cntr *cntr_fid)
{
	struct opx_cntr *c;

	if (!cntr_fid)
		return 0;
	c = opx_cntr_of(cntr_fid);
	opx_cntr_progress(c);
	return atomic_load_explicit(&c->err, memory_order_acquire);
}

static int opx_cntr_add(struct fid_cntr *cntr_fid, uint64_t value)
{
	if (!cntr_fid)
		return -FI_EINVAL;
	atomic_fetch_add_explicit(&opx_cntr_of(cntr_fid)->value, value, memory_order_release);
	return 0;
}

static int opx_cntr_set(struct fid_cntr *cntr_fid, uint64_t value)
{
	if (!cntr_fid)
		return -FI_EINVAL;
	atomic_store_explicit(&opx_cntr_of(cntr_fid)->value, value, memory_order_release);
	return 0;
}

static int opx_cntr_adderr(struct fid_cntr *cntr_fid, uint64_t value)
{
	if (!cntr_fid)
		return -FI_EINVAL;
	atomic_fetch_add_explicit(&opx_cntr_of(cntr_fid)->err, value, memory_order_release);
	return 0;
}

static int opx_cntr_seterr(struct fid_cntr *cntr_fid, uint64_t value)
{
	if (!cntr_fid)
		return -FI_EINVAL;
	atomic_store_explicit(&opx_cntr_of(cntr_fid)->err, value, memory_order_release);
	return 0;
}

struct opx_cntr_wait_arg {
	struct opx_cntr *cntr;
	uint64_t threshold;
	uint64_t err_start;
};

static bool opx_cntr_wait_done(void *arg)
{
	struct opx_cntr_wait_arg *wa = arg;

	return atomic_load_explicit(&wa->cntr->value, memory_order_acquire) >= wa->threshold ||
	       atomic_load_explicit(&wa->cntr->err, memory_order_acquire) != wa->err_start;
}

static int opx_cntr_wait(struct fid_cntr *cntr_fid, uint64_t threshold, int timeout)
{
	struct opx_cntr_wait_arg wa;
	struct opx_cntr_priv *priv;
	struct opx_cntr *c;
	int ret;

	if (!cntr_fid)
		return -FI_EINVAL;
	c = opx_cntr_of(cntr_fid);
	priv = opx_cntr_priv_of(c);
	/* fi_cntr(3) calls waiting on a FI_WAIT_NONE counter invalid, but
	 * libfabric's util providers (and applications written against
	 * them) wait anyway, by progress.  The wait below needs no wait
	 * object of the counter's own: it progresses the bound endpoints and
	 * sleeps on their fds, so FI_WAIT_NONE waits like FI_WAIT_UNSPEC. */

	wa.cntr = c;
	wa.threshold = threshold;
	wa.err_start = atomic_load_explicit(&c->err, memory_order_acquire);

	opx_lock_acquire(&c->domain->lock);
	if (priv->armed) {
		opx_pset_disarm_locked(&c->pset);
		priv->armed = false;
	}
	ret = opx_pset_wait_locked(&c->pset, &c->domain->lock, timeout, opx_cntr_wait_done, &wa,
				   NULL);
	opx_lock_release(&c->domain->lock);
	if (atomic_load_explicit(&c->value, memory_order_acquire) >= threshold)
		return 0;
	if (atomic_load_explicit(&c->err, memory_order_acquire) != wa.err_start)
		return -FI_EAVAIL; /* an error unblocked us (man fi_cntr) */
	return ret ? ret : -FI_ETIMEDOUT;
}

static struct fi_ops_cntr opx_cntr_ops = {
	.size = sizeof(struct fi_ops_cntr),
	.read = opx_cntr_read,
	.readerr = opx_cntr_readerr,
	.add = opx_cntr_add,
	.set = opx_cntr_set,
	.wait = opx_cntr_wait,
	.adderr = opx_cntr_adderr,
	.seterr = opx_cntr_seterr,
};

/* ---------------------------------------------------------------------
 * Endpoint attach: called from the endpoint's bind/close without the
 * domain lock, so these take it.
 */
int opx_cntr_attach_ep(struct opx_cntr *cntr, struct opx_ep *ep)
{
	if (!cntr || !ep)
		return -FI_EINVAL;
	return opx_pset_attach(&cntr->domain->lock, &cntr->pset, cntr->epoll_fd, &cntr->refcnt,
			       ep);
}

void opx_cntr_detach_ep(struct opx_cntr *cntr, struct opx_ep *ep)
{
	if (cntr && ep)
		opx_pset_detach(&cntr->domain->lock, &cntr->pset, cntr->epoll_fd, &cntr->refcnt,
				ep);
}

/* ---------------------------------------------------------------------
 * fid ops and open.
 */
/* fi_trywait for a counter.  A counter has no "unread entry", so it is
 * ready when its value moved since the application last read it; then
 * blocking could sleep through a change that already happened. */
static int opx_cntr_trywait(struct opx_cntr *c)
{
	struct opx_cntr_priv *priv = opx_cntr_priv_of(c);
	int ret;

	if (c->wait_obj == FI_WAIT_NONE)
		return -FI_EINVAL;
	opx_lock_acquire(&c->domain->lock);
	opx_pset_progress_locked(&c->pset);
	ret = opx_pset_trywait_locked(
		&c->pset, &priv->armed,
		atomic_load_explicit(&c->value, memory_order_acquire) != priv->last_read);
	opx_lock_release(&c->domain->lock);
	return ret;
}

static int opx_cntr_control(struct fid *fid, int command, void *arg)
{
	struct opx_cntr *c = OPX_CONTAINER_OF(fid, struct opx_cntr, cntr_fid.fid);

	switch (command) {
	case OPX_CTL_TRYWAIT:
		return opx_cntr_trywait(c);
	case OPX_CTL_POLL:
		if (!arg)
			return -FI_EINVAL;
		opx_lock_acquire(&c->domain->lock);
		opx_pset_progress_locked(&c->pset);
		*(uint64_t *)arg = atomic_load_explicit(&c->value, memory_order_acquire) +
				   atomic_load_explicit(&c->err, memory_order_acquire);
		opx_lock_release(&c->domain->lock);
		return 0;
	default:
		return opx_wait_control(command, arg, c->epoll_fd, c->wait_obj);
	}
}

static int opx_cntr_close(struct fid *fid)
{
	struct opx_cntr *c = OPX_CONTAINER_OF(fid, struct opx_cntr, cntr_fid.fid);
	struct opx_domain *domain = c->domain;

	/* man fi_cntr: -FI_EBUSY while endpoints are still bound. */
	if (atomic_load(&c->refcnt) > 0)
		return -FI_EBUSY;
	opx_pset_free(&c->pset);
	if (c->epoll_fd >= 0)
		close(c->epoll_fd);
	free(opx_cntr_priv_of(c));
	atomic_fetch_sub(&domain->refcnt, 1);
	return 0;
}

static struct fi_ops opx_cntr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = opx_cntr_close,
	.bind = opx_init_no_bind,
	.control = opx_cntr_control,
	.ops_open = opx_init_no_ops_open,
};

int opx_cntr_open(struct fid_domain *domain_fid, struct fi_cntr_attr *attr, struct fid_cntr **cntr,
		  void *context)
{
	struct fi_cntr_attr def = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
	const struct fi_cntr_attr *a = attr ? attr : &def;
	struct opx_cntr_priv *priv;
	struct opx_domain *domain;
	struct opx_cntr *c;
	int ret;

	if (!domain_fid || !cntr)
		return -FI_EINVAL;
	if (a->events != FI_CNTR_EVENTS_COMP)
		return -FI_ENOSYS;
	ret = opx_wait_obj_check(a->wait_obj);
	if (ret)
		return ret;
	if (a->flags)
		return -FI_EBADFLAGS; /* reserved, must be 0 */
	domain = OPX_CONTAINER_OF(domain_fid, struct opx_domain, domain_fid);

	priv = calloc(1, sizeof(*priv));
	if (!priv)
		return -FI_ENOMEM;
	c = &priv->cntr;
	c->domain = domain;
	c->wait_obj = a->wait_obj;
	c->epoll_fd = -1;
	atomic_init(&c->value, 0);
	atomic_init(&c->err, 0);
	atomic_init(&c->refcnt, 0);
	if (c->wait_obj == FI_WAIT_FD) {
		c->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
		if (c->epoll_fd < 0) {
			ret = opx_init_err_from_shim(-errno);
			OPX_WARN(FI_LOG_CNTR, "cannot create counter wait fd: %d\n", errno);
			free(priv);
			return ret;
		}
	}
	c->cntr_fid.fid.fclass = FI_CLASS_CNTR;
	c->cntr_fid.fid.context = context;
	c->cntr_fid.fid.ops = &opx_cntr_fi_ops;
	c->cntr_fid.ops = &opx_cntr_ops;
	atomic_fetch_add(&domain->refcnt, 1);
	*cntr = &c->cntr_fid;
	return 0;
}
