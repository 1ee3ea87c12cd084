/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_wait.c - wait objects and fi_trywait: the wait objects a CQ or
 * counter takes and FI_GETWAIT / FI_GETWAITOBJ, fabric->ops->trywait, and
 * an endpoint's wake-up (its wait fd, armed before sleeping).  The
 * progress sets and the blocking wait built on them are in opx_pset.c.
 */
#include "opx_ep.h"
#include "opx_wait.h"

int opx_wait_obj_check(enum fi_wait_obj wait_obj)
{
	switch (wait_obj) {
	case FI_WAIT_NONE:
	case FI_WAIT_UNSPEC:
	case FI_WAIT_FD:
	case FI_WAIT_YIELD: /* our wait spins and yields before it sleeps */
		return 0;
	case FI_WAIT_SET:
	case FI_WAIT_MUTEX_COND: /* the application could ask for the mutex */
		return -FI_ENOSYS;
	default:
		return -FI_EINVAL;
	}
}

int opx_wait_control(int command, void *arg, int fd, enum fi_wait_obj wait_obj)
{
	switch (command) {
	case FI_GETWAIT:
		if (!arg)
			return -FI_EINVAL;
		if (fd < 0)
			return -FI_ENODATA; /* no fd the application may use */
		*(int *)arg = fd;
		return 0;
	case FI_GETWAITOBJ:
		if (!arg)
			return -FI_EINVAL;
		*(enum fi_wait_obj *)arg = wait_obj;
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

/* ---------------------------------------------------------------------
 * fi_trywait.  Whether a CQ, counter or EQ has unread work, and which of
 * its endpoints it armed, is private to opx_cq.c / opx_cntr.c / opx_eq.c; they
 * answer a provider-specific control command so this file needs none of
 * their internals.
 */
int opx_wait_trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
	if (!fabric || count < 0 || (count > 0 && !fids))
		return -FI_EINVAL;

	for (int i = 0; i < count; i++) {
		struct fid *fid = fids[i];
		int ret;

		/* fi_poll(3): CQs, counters and EQs may be waited on. */
		if (!fid || (fid->fclass != FI_CLASS_CQ && fid->fclass != FI_CLASS_CNTR &&
			     fid->fclass != FI_CLASS_EQ))
			return -FI_EINVAL;
		ret = fid->ops->control(fid, OPX_CTL_TRYWAIT, NULL);
		if (ret)
			return ret;
	}
	return 0;
}

/* ---------------------------------------------------------------------
 * An endpoint's wake-up, as the waits above and opx_auto.c use it: the
 * shim context's wait fd, armed before sleeping and disarmed after.
 */
int opx_wait_ep_fd(const struct opx_ep *ep)
{
	return shim_ctx_wait_fd(ep->shim);
}

int opx_wait_ep_arm(struct opx_ep *ep)
{
	int rc = shim_ctx_sleep_arm(ep->shim);

	if (rc)
		return -FI_EAGAIN;
	ep->armed = true;
	return 0;
}

void opx_wait_ep_disarm(struct opx_ep *ep)
{
	if (ep->armed)
		shim_ctx_sleep_disarm(ep->shim);
	ep->armed = false;
}
