/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_lock.h - the lock every object of a domain shares (domain->lock).
 *
 * It is a real mutex only when the domain needs one (FI_THREAD_SAFE, or
 * a progress thread); otherwise the application promised not to call
 * into the domain concurrently and taking it is a predictable branch.
 * Functions named *_locked expect their caller to hold it (opx.h).
 *
 * A debug build (--enable-debug, OPX_DEBUG) also records which thread
 * holds the lock, even when it is not a real mutex (the promise makes the
 * owner well defined there too), so that OPX_ASSERT_LOCKED at the top of
 * a *_locked function catches a caller that forgot to take it in every
 * threading mode.  The lock is not recursive: in a debug build taking it
 * twice, or releasing it unheld, aborts as well.  Other builds compile
 * all of this out.
 */
#ifndef OPX_LOCK_H
#define OPX_LOCK_H

#include <pthread.h>
#include <stdbool.h>

#ifdef OPX_DEBUG
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#endif

struct opx_lock {
	pthread_mutex_t mutex;
	bool on;
#ifdef OPX_DEBUG
	/* Written by the holder only, read by any thread (atomics, relaxed:
	 * no data race, no ordering needed).  A thread that does not hold
	 * the lock may see a stale owner, never itself: it cleared held
	 * before it last let go, and sets owner before held. */
	_Atomic(pthread_t) owner;
	_Atomic bool held;
#endif
};

#ifdef OPX_DEBUG
/* Whether the calling thread holds l. */
static inline bool opx_lock_held(const struct opx_lock *l)
{
	return atomic_load_explicit(&l->held, memory_order_relaxed) &&
	       pthread_equal(atomic_load_explicit(&l->owner, memory_order_relaxed), pthread_self());
}

/* Debug builds only: a broken lock rule is a bug in opx, and carrying on
 * would corrupt the domain's state in ways much harder to trace back. */
static inline void opx_lock_fail(const char *what, const char *func, const char *file, int line)
{
	fprintf(stderr, "opx: %s:%d: %s: %s\n", file, line, func, what);
	fflush(stderr);
	abort();
}

#define OPX_ASSERT_LOCKED(lockptr)                                                                 \
	do {                                                                                       \
		if (!opx_lock_held(lockptr))                                                       \
			opx_lock_fail("called without holding the lock " #lockptr, __func__,       \
				      __FILE__, __LINE__);                                         \
	} while (0)
#else
#define OPX_ASSERT_LOCKED(lockptr) ((void)0)
#endif

static inline void opx_lock_init(struct opx_lock *l, bool on)
{
	pthread_mutex_init(&l->mutex, NULL);
	l->on = on;
#ifdef OPX_DEBUG
	atomic_init(&l->owner, (pthread_t)0);
	atomic_init(&l->held, false);
#endif
}
static inline void opx_lock_destroy(struct opx_lock *l)
{
	pthread_mutex_destroy(&l->mutex);
}
#ifdef OPX_DEBUG
/* The caller's name, file and line go into the message. */
#define opx_lock_acquire(l) opx_lock_acquire_at((l), __func__, __FILE__, __LINE__)
#define opx_lock_release(l) opx_lock_release_at((l), __func__, __FILE__, __LINE__)

static inline void opx_lock_acquire_at(struct opx_lock *l, const char *func, const char *file,
				       int line)
{
	/* With a real mutex this would deadlock; without one it would
	 * silently work, and deadlock only under FI_THREAD_SAFE. */
	if (opx_lock_held(l))
		opx_lock_fail("takes the lock it already holds", func, file, line);
	if (l->on)
		pthread_mutex_lock(&l->mutex);
	atomic_store_explicit(&l->owner, pthread_self(), memory_order_relaxed);
	atomic_store_explicit(&l->held, true, memory_order_relaxed);
}
static inline void opx_lock_release_at(struct opx_lock *l, const char *func, const char *file,
				       int line)
{
	if (!opx_lock_held(l))
		opx_lock_fail("releases the lock without holding it", func, file, line);
	atomic_store_explicit(&l->held, false, memory_order_relaxed);
	if (l->on)
		pthread_mutex_unlock(&l->mutex);
}
#else
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
#endif

#endif /* OPX_LOCK_H */
