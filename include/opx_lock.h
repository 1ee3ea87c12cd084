/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_lock.h - the lock every object of a domain shares (domain->lock).
 *
 * It is a real mutex only when the domain needs one (FI_THREAD_SAFE, or
 * a progress thread); otherwise the application promised not to call
 * into the domain concurrently and taking it is a predictable branch.
 * Functions named *_locked expect their caller to hold it (opx.h).
 */
#ifndef OPX_LOCK_H
#define OPX_LOCK_H

#include <pthread.h>
#include <stdbool.h>

struct opx_lock {
	pthread_mutex_t mutex;
	bool on;
};

static inline void opx_lock_init(struct opx_lock *l, bool on)
{
	pthread_mutex_init(&l->mutex, NULL);
	l->on = on;
}
static inline void opx_lock_destroy(struct opx_lock *l)
{
	pthread_mutex_destroy(&l->mutex);
}
static inline void opx_lock_acquire(struct opx_lock *l)
{
	if (l->on)
		pthread_mutex_lock(&l->mutex);
}
static inline void opx_lock_release(struct opx_lock *l)
{
	if (l->on)
		pthread_mutex_unlock(&l->mutex);
}

#endif /* OPX_LOCK_H */
