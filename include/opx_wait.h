/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_wait.h - progress sets and blocking waits (opx_pset.c): the
 * endpoints a CQ or counter drives; the wait objects, the wait fds and
 * fi_trywait (opx_wait.c); and the poll sets of opx_poll.c.  Lock rules
 * as in opx.h.
 */
#ifndef OPX_WAIT_H
#define OPX_WAIT_H

#include "opx.h"

/* ---------------------------------------------------------------------
 * Progress sets (opx_pset.c): the endpoints a CQ or counter drives, and
 * the blocking wait shared by fi_cq_sread and fi_cntr_wait.
 */
struct opx_ep;

struct opx_pset {
	struct opx_ep **eps;
	size_t count;
	size_t cap;
};

int opx_pset_add(struct opx_pset *ps, struct opx_ep *ep);
void opx_pset_remove(struct opx_pset *ps, struct opx_ep *ep);
void opx_pset_free(struct opx_pset *ps);
/* Attach/detach an endpoint and its wait fd (epoll_fd < 0: no wait fd);
 * detach returns whether the endpoint was attached.  Lock held. */
int opx_pset_attach_locked(struct opx_pset *ps, int epoll_fd, struct opx_ep *ep);
bool opx_pset_detach_locked(struct opx_pset *ps, int epoll_fd, struct opx_ep *ep);
/* The same for a CQ or counter's bind/close (control path): takes the
 * domain lock, counts the bound endpoints in refcnt. */
int opx_pset_attach(struct opx_lock *lock, struct opx_pset *ps, int epoll_fd,
		    _Atomic int *refcnt, struct opx_ep *ep);
void opx_pset_detach(struct opx_lock *lock, struct opx_pset *ps, int epoll_fd,
		     _Atomic int *refcnt, struct opx_ep *ep);
/* The wait objects a CQ or counter takes: 0, -FI_ENOSYS (a wait set, a
 * mutex: not offered) or -FI_EINVAL. */
int opx_wait_obj_check(enum fi_wait_obj wait_obj);
/* FI_GETWAIT / FI_GETWAITOBJ of a CQ, counter or EQ (fd < 0: none the
 * application may use, -FI_ENODATA); -FI_ENOSYS for other commands. */
int opx_wait_control(int command, void *arg, int fd, enum fi_wait_obj wait_obj);
/* Progress every endpoint of the set once; returns the largest spin
 * cost of them (opx_progress_locked). */
uint32_t opx_pset_progress_locked(struct opx_pset *ps);
/* Block until done(arg) is true or timeout_ms (<0: forever) passes,
 * progressing the set; spins (FI_OPX_SPIN_COUNT, counted in the steps'
 * spin costs), then yields, then sleeps on the endpoints' wait fds in
 * bounded slices.  Called and returns with lock held.
 * Returns 0, -FI_ETIMEDOUT, or -FI_ECANCELED (fi_cq_signal/fi_cntr... ). */
int opx_pset_wait_locked(struct opx_pset *ps, struct opx_lock *lock, int timeout_ms,
			 bool (*done)(void *arg), void *arg, _Atomic int *signaled);
/* Arm every endpoint of the set for sleeping; -FI_EAGAIN (none left armed)
 * if one has work pending.  Lock held. */
int opx_pset_arm_locked(struct opx_pset *ps);
void opx_pset_disarm_locked(struct opx_pset *ps);
/* fi_trywait of one CQ or counter, after progress: -FI_EAGAIN when it is
 * ready (has something to read), else arm its endpoints once (*armed).
 * Lock held. */
int opx_pset_trywait_locked(struct opx_pset *ps, bool *armed, bool ready);
/* One endpoint's wake-up (opx_wait.c): its wait fd; arm before sleeping
 * (-FI_EAGAIN if work is pending), disarm after. */
int opx_wait_ep_fd(const struct opx_ep *ep);
int opx_wait_ep_arm(struct opx_ep *ep);
void opx_wait_ep_disarm(struct opx_ep *ep);
/* fabric->ops->trywait: 0 when every fid may block, -FI_EAGAIN when one
 * has work pending (the caller reads it instead of waiting). */
int opx_wait_trywait(struct fid_fabric *fabric, struct fid **fids, int count);
/* fid control command answered by opx CQs and counters: fi_trywait for
 * that one object (0, -FI_EAGAIN, -FI_EINVAL without a wait object). */
#define OPX_CTL_TRYWAIT ((int)(FI_PROV_SPECIFIC | 0x7477u))
/* fid control command for poll sets (opx_poll.c), after progress: a CQ
 * returns 1 when it has completions or an error to read, else 0; a
 * counter returns 0 and stores value + error count in *(uint64_t *)arg. */
#define OPX_CTL_POLL ((int)(FI_PROV_SPECIFIC | 0x706cu))
int opx_poll_open(struct fid_domain *domain, struct fi_poll_attr *attr, struct fid_poll **pollset);

#endif /* OPX_WAIT_H */
