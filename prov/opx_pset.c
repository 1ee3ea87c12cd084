/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_pset.c - progress sets and blocking waits.
 *
 * A progress set is the list of endpoints a CQ or counter drives: with
 * manual progress, reading a CQ is what moves packets.  The same endpoint
 * may be attached twice (bound for transmit and receive in two calls);
 * duplicates are kept next to each other so progress and poll can skip
 * them in O(1) while remove still pairs with add.
 *
 * Blocking (fi_cq_sread, fi_cntr_wait) escalates: spin on progress, then
 * yield, then sleep in poll() on the endpoints' wait fds.  Every sleep is
 * a bounded slice (FI_OPX_SLEEP_MS), because a wake-up can be missed
 * (a sender checks the sleep flag relaxed, another thread disarms, a
 * completion is reported by a thread that writes no fd): a missed wake
 * then costs one slice, never a hang.
 */
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/epoll.h>

#include "opx_ep.h"
#include "opx_wait.h"

/* sched_yield() rounds after the spin phase, before sleeping. */
#define OPX_PSET_YIELDS 64

/* A set's *_locked functions need the domain lock of its endpoints (a CQ,
 * counter or progress thread drives endpoints of its own domain only); an
 * empty set touches nothing shared. */
#ifdef OPX_DEBUG
#define OPX_PSET_ASSERT_LOCKED(ps)                                                                 \
	do {                                                                                       \
		if ((ps)->count)                                                                   \
			OPX_ASSERT_LOCKED(&(ps)->eps[0]->domain->lock);                            \
	} while (0)
#else
#define OPX_PSET_ASSERT_LOCKED(ps) ((void)0)
#endif

int opx_pset_add(struct opx_pset *ps, struct opx_ep *ep)
{
	size_t pos = ps->count;

	if (!ep)
		return -FI_EINVAL;
	if (ps->count == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 4;
		struct opx_ep **eps = realloc(ps->eps, cap * sizeof(*eps));

		if (!eps)
			return -FI_ENOMEM;
		ps->eps = eps;
		ps->cap = cap;
	}
	for (size_t i = 0; i < ps->count; i++) {
		if (ps->eps[i] == ep) {
			pos = i + 1;
			break;
		}
	}
	memmove(&ps->eps[pos + 1], &ps->eps[pos], (ps->count - pos) * sizeof(*ps->eps));
	ps->eps[pos] = ep;
	ps->count++;
	return 0;
}

void opx_pset_remove(struct opx_pset *ps, struct opx_ep *ep)
{
	for (size_t i = 0; i < ps->count; i++) {
		if (ps->eps[i] != ep)
			continue;
		memmove(&ps->eps[i], &ps->eps[i + 1], (ps->count - i - 1) * sizeof(*ps->eps));
		ps->count--;
		return;
	}
}

/* An endpoint attached twice is progressed once and sits in the epoll
 * set (epoll_fd >= 0: FI_WAIT_FD) once. */
static bool opx_pset_has(const struct opx_pset *ps, const struct opx_ep *ep)
{
	for (size_t i = 0; i < ps->count; i++) {
		if (ps->eps[i] == ep)
			return true;
	}
	return false;
}

int opx_pset_attach_locked(struct opx_pset *ps, int epoll_fd, struct opx_ep *ep)
{
	OPX_ASSERT_LOCKED(&ep->domain->lock);
	bool first = !opx_pset_has(ps, ep);
	int ret = opx_pset_add(ps, ep);

	if (ret)
		return ret;
	if (first && epoll_fd >= 0) {
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ep};

		if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, opx_wait_ep_fd(ep), &ev)) {
			ret = opx_init_err_from_shim(-errno);
			OPX_WARN(FI_LOG_CQ, "cannot add endpoint wait fd: %d\n", errno);
			opx_pset_remove(ps, ep);
			return ret;
		}
	}
	return 0;
}

bool opx_pset_detach_locked(struct opx_pset *ps, int epoll_fd, struct opx_ep *ep)
{
	OPX_ASSERT_LOCKED(&ep->domain->lock);
	if (!opx_pset_has(ps, ep))
		return false;
	opx_pset_remove(ps, ep);
	if (epoll_fd >= 0 && !opx_pset_has(ps, ep))
		(void)epoll_ctl(epoll_fd, EPOLL_CTL_DEL, opx_wait_ep_fd(ep), NULL);
	return true;
}

int opx_pset_attach(struct opx_lock *lock, struct opx_pset *ps, int epoll_fd,
		    _Atomic int *refcnt, struct opx_ep *ep)
{
	int ret;

	opx_lock_acquire(lock);
	ret = opx_pset_attach_locked(ps, epoll_fd, ep);
	if (!ret)
		atomic_fetch_add(refcnt, 1);
	opx_lock_release(lock);
	return ret;
}

void opx_pset_detach(struct opx_lock *lock, struct opx_pset *ps, int epoll_fd,
		     _Atomic int *refcnt, struct opx_ep *ep)
{
	opx_lock_acquire(lock);
	if (opx_pset_detach_locked(ps, epoll_fd, ep))
		atomic_fetch_sub(refcnt, 1);
	opx_lock_release(lock);
}

int opx_pset_trywait_locked(struct opx_pset *ps, bool *armed, bool ready)
{
	OPX_PSET_ASSERT_LOCKED(ps);
	int ret;

	if (ready)
		return -FI_EAGAIN;
	if (*armed)
		return 0; /* still armed from an earlier trywait */
	ret = opx_pset_arm_locked(ps);
	if (ret == 0)
		*armed = true;
	return ret;
}

void opx_pset_free(struct opx_pset *ps)
{
	free(ps->eps);
	ps->eps = NULL;
	ps->count = 0;
	ps->cap = 0;
}

uint32_t opx_pset_progress_locked(struct opx_pset *ps)
{
	OPX_PSET_ASSERT_LOCKED(ps);
	uint32_t cost = 0;

	for (size_t i = 0; i < ps->count; i++) {
		if (i > 0 && ps->eps[i] == ps->eps[i - 1])
			continue;
		uint32_t c = opx_progress_locked(ps->eps[i]);

		if (c > cost)
			cost = c;
	}
	return cost;
}

/* Arm every endpoint for sleeping.  -FI_EAGAIN (and nothing left armed)
 * when one of them already has work. */
int opx_pset_arm_locked(struct opx_pset *ps)
{
	OPX_PSET_ASSERT_LOCKED(ps);
	for (size_t i = 0; i < ps->count; i++) {
		if (i > 0 && ps->eps[i] == ps->eps[i - 1])
			continue;
		int ret = opx_wait_ep_arm(ps->eps[i]);

		if (ret) {
			while (i-- > 0) {
				if (i > 0 && ps->eps[i] == ps->eps[i - 1])
					continue;
				opx_wait_ep_disarm(ps->eps[i]);
			}
			return ret;
		}
	}
	return 0;
}

void opx_pset_disarm_locked(struct opx_pset *ps)
{
	OPX_PSET_ASSERT_LOCKED(ps);
	for (size_t i = 0; i < ps->count; i++) {
		if (i > 0 && ps->eps[i] == ps->eps[i - 1])
			continue;
		opx_wait_ep_disarm(ps->eps[i]);
	}
}

static int64_t opx_pset_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool opx_pset_take_signal(_Atomic int *signaled)
{
	return signaled && atomic_load_explicit(signaled, memory_order_relaxed) &&
	       atomic_exchange(signaled, 0);
}

/* Sleep on the set's wait fds for at most slice_ms, lock released. */
static void opx_pset_sleep(struct opx_pset *ps, struct opx_lock *lock, int slice_ms)
{
	struct pollfd fds[OPX_MAX_EPS];
	nfds_t n = 0;

	for (size_t i = 0; i < ps->count && n < OPX_MAX_EPS; i++) {
		if (i > 0 && ps->eps[i] == ps->eps[i - 1])
			continue;
		int fd = opx_wait_ep_fd(ps->eps[i]);

		if (fd < 0)
			continue;
		fds[n].fd = fd;
		fds[n].events = POLLIN;
		fds[n].revents = 0;
		n++;
	}
	opx_lock_release(lock);
	/* An endpoint beyond OPX_MAX_EPS is only noticed at the end of the
	 * slice; EINTR just ends the slice early. */
	(void)poll(n ? fds : NULL, n, slice_ms);
	opx_lock_acquire(lock);
}

int opx_pset_wait_locked(struct opx_pset *ps, struct opx_lock *lock, int timeout_ms,
			 bool (*done)(void *arg), void *arg, _Atomic int *signaled)
{
	uint32_t spin_max = opx_env.spin_count > 0 ? (uint32_t)opx_env.spin_count : 0;
	int sleep_ms = opx_env.sleep_ms > 0 ? opx_env.sleep_ms : 1;
	int64_t deadline = timeout_ms >= 0 ? opx_pset_now_ms() + timeout_ms : 0;
	uint32_t spins = 0, cost;
	int yields = 0;

	if (!ps || !lock || !done)
		return -FI_EINVAL;
	OPX_ASSERT_LOCKED(lock);

	for (;;) {
		cost = opx_pset_progress_locked(ps);
		if (done(arg))
			return 0;
		if (opx_pset_take_signal(signaled))
			return -FI_ECANCELED;

		int remaining = sleep_ms;

		if (timeout_ms >= 0) {
			int64_t left = deadline - opx_pset_now_ms();

			if (left <= 0)
				return -FI_ETIMEDOUT;
			if (left < remaining)
				remaining = (int)left;
		}

		/* FI_OPX_SPIN_COUNT is counted as the endpoints' own idle
		 * polls count it: a pass that polled a udp socket (a system
		 * call) weighs as much as some 25 looks at the rings, so a
		 * wait on udp peers goes to sleep after as much time spun,
		 * not after 25 times as much */
		if (spins < spin_max) {
			spins += cost ? cost : 1;
			/* Let another thread of a FI_THREAD_SAFE domain report
			 * between our polls; with a no-op lock this is free. */
			opx_lock_release(lock);
			opx_lock_acquire(lock);
			continue;
		}
		if (yields < OPX_PSET_YIELDS) {
			yields++;
			opx_lock_release(lock);
			sched_yield();
			opx_lock_acquire(lock);
			continue;
		}

		int ret = opx_pset_arm_locked(ps);

		if (ret == -FI_EAGAIN)
			continue; /* a packet is already waiting: progress it */
		if (ret) {
			/* Cannot sleep on the fds: a plain bounded nap is
			 * still correct, just slower to wake. */
			opx_lock_release(lock);
			(void)poll(NULL, 0, remaining);
			opx_lock_acquire(lock);
			continue;
		}
		opx_pset_sleep(ps, lock, remaining);
		opx_pset_disarm_locked(ps);
	}
}
