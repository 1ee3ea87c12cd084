/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_auto.c - FI_PROGRESS_AUTO: a progress thread per domain.
 *
 * With manual progress (the default) the application's calls move every
 * packet.  An application that asks for automatic progress
 * (domain_attr control_progress or data_progress FI_PROGRESS_AUTO) may
 * compute for long stretches while a peer waits on a rendezvous it posted
 * the receive for, or reads and writes its memory: the domain then runs
 * one thread that progresses the domain's enabled endpoints, so RMA
 * targets answer, rendezvous data moves and completions are written
 * while the application does not call in.  The domain lock is real then
 * (the thread and the application share every object).
 *
 * The thread never spins while idle:
 *   - while the application progresses by itself (an endpoint's
 *     app_progress moved within OPX_AUTO_BUSY_NS), the thread only looks
 *     every OPX_AUTO_TICK_NS, without arming anything, so a busy
 *     application's senders never pay a wake-up;
 *   - otherwise it arms the endpoints' wake-ups (the receive contexts'
 *     sleep flags, opx_wait_ep_arm) and sleeps in poll() on their wait
 *     fds and its own stop fd, a bounded slice (FI_OPX_SLEEP_MS) at a
 *     time: a missed wake-up costs a slice, never a hang (opx_pset.c).
 * Endpoints join at fi_enable and leave at close (opx_ep.c); the thread
 * stops at domain close.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "opx_ep.h"
#include "opx_wait.h"

#define OPX_AUTO_BUSY_NS 2000000ull /* the application progressed this recently */
#define OPX_AUTO_TICK_NS 200000ull   /* the thread's look while it does */

struct opx_auto {
	struct opx_domain *domain;
	pthread_t thread;
	int stop_fd;          /* eventfd: the domain closes */
	bool stop;            /* lock held */
	struct opx_pset eps;  /* enabled endpoints, lock held */
	uint64_t app_seen;    /* sum of their app_progress at the last look */
	uint64_t app_ns;      /* when it last moved */
};

static uint64_t opx_auto_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Whether the application progressed lately (lock held). */
static bool opx_auto_app_busy(struct opx_auto *a, uint64_t now)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < a->eps.count; i++)
		sum += a->eps.eps[i]->tel.app_progress;
	if (sum != a->app_seen) {
		a->app_seen = sum;
		a->app_ns = now;
	}
	return now - a->app_ns < OPX_AUTO_BUSY_NS;
}

/* Sleep on the endpoints' wait fds and the stop fd, lock released. */
static void opx_auto_sleep(struct opx_auto *a, int slice_ms)
{
	struct pollfd fds[OPX_MAX_EPS + 1];
	nfds_t n = 0;

	fds[n++] = (struct pollfd){.fd = a->stop_fd, .events = POLLIN};
	for (size_t i = 0; i < a->eps.count && n < OPX_MAX_EPS + 1; i++) {
		int fd = opx_wait_ep_fd(a->eps.eps[i]);

		if (fd >= 0)
			fds[n++] = (struct pollfd){.fd = fd, .events = POLLIN};
	}
	opx_lock_release(&a->domain->lock);
	(void)poll(fds, n, slice_ms);
	opx_lock_acquire(&a->domain->lock);
}

static void *opx_auto_main(void *arg)
{
	struct opx_auto *a = arg;
	struct opx_domain *d = a->domain;
	int slice_ms = opx_env.sleep_ms > 0 ? opx_env.sleep_ms : 1;

	opx_lock_acquire(&d->lock);
	a->app_ns = opx_auto_now();
	while (!a->stop) {
		uint64_t now;

		d->auto_self = true; /* not the application's progress */
		opx_pset_progress_locked(&a->eps);
		d->auto_self = false;
		now = opx_auto_now();
		if (opx_auto_app_busy(a, now)) {
			struct timespec ts = {0, (long)OPX_AUTO_TICK_NS};

			opx_lock_release(&d->lock);
			nanosleep(&ts, NULL);
			opx_lock_acquire(&d->lock);
			continue;
		}
		if (opx_pset_arm_locked(&a->eps) == -FI_EAGAIN)
			continue; /* a packet waits: progress it */
		opx_auto_sleep(a, slice_ms);
		opx_pset_disarm_locked(&a->eps);
	}
	opx_lock_release(&d->lock);
	return NULL;
}

int opx_auto_start(struct opx_domain *d)
{
	struct opx_auto *a = calloc(1, sizeof(*a));
	int rc;

	if (!a)
		return -FI_ENOMEM;
	a->domain = d;
	a->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (a->stop_fd < 0) {
		free(a);
		return -FI_ENOMEM;
	}
	d->autop = a;
	rc = pthread_create(&a->thread, NULL, opx_auto_main, a);
	if (rc) {
		OPX_WARN(FI_LOG_DOMAIN, "no progress thread: %s\n", strerror(rc));
		d->autop = NULL;
		close(a->stop_fd);
		free(a);
		return -FI_EOTHER;
	}
	return 0;
}

void opx_auto_stop(struct opx_domain *d)
{
	struct opx_auto *a = d->autop;
	uint64_t one = 1;

	if (!a)
		return;
	opx_lock_acquire(&d->lock);
	a->stop = true;
	opx_lock_release(&d->lock);
	if (write(a->stop_fd, &one, sizeof(one)) != sizeof(one))
		OPX_WARN(FI_LOG_DOMAIN, "progress thread stop: %s\n", strerror(errno));
	pthread_join(a->thread, NULL);
	opx_pset_free(&a->eps);
	close(a->stop_fd);
	free(a);
	d->autop = NULL;
}

int opx_auto_add_locked(struct opx_domain *d, struct opx_ep *ep)
{
	OPX_ASSERT_LOCKED(&d->lock);
	return d->autop ? opx_pset_add(&d->autop->eps, ep) : 0;
}

void opx_auto_remove_locked(struct opx_domain *d, struct opx_ep *ep)
{
	OPX_ASSERT_LOCKED(&d->lock);
	if (d->autop)
		opx_pset_remove(&d->autop->eps, ep);
}
