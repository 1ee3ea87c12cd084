/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * trust_fixture.h - what the trust suites (test_trust: names, squatting,
 * look-alikes, another user, limits; test_trust_shm: hostile control
 * blocks, holes of dead senders, killed contexts; test_trust_job: jobs
 * through the provider) share: the shim device and its geometry, the
 * neighbour's uid, bounded waits for children, and the teardown that
 * removes what a failed test left behind.
 *
 * Shim tests use unit 5 of 8 (test_shim uses 7, test_sdma 6, the
 * provider 0).  Each of the three binaries takes fx_exclusive("trust-unit")
 * before its tests, so none runs beside another or beside itself.
 */
#ifndef OPX_TEST_TRUST_FIXTURE_H
#define OPX_TEST_TRUST_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fixture.h"
#include "../../driver-shim/shim_internal.h"

#define T_MTU 1024u
#define T_HDRQ 64u
#define T_EGR (16u * 1024u)
#define T_UNITS ((int)SHIM_MAX_UNITS)
#define T_UNIT (T_UNITS - 3)
#define T_JKEY 0x7472
#define T_OTHER_UID 59999u /* the neighbour: any uid but ours */
#define T_OTHER_GID 59999u
#define T_HANG_S 10        /* what "never hangs" is allowed to take */
#define T_DEADLINE_S 60

/* The new shim has a warning hook, a context cursor and the owner lock;
 * without them (the code before the fix) these files still build, so the
 * same tests can be run against it and seen to fail. */
#ifdef SHIM_CTL_F_OWNER_LOCK
#define T_NEW_SHIM 1
#else
#define T_NEW_SHIM 0
#endif

/* Neighbour processes (and tracked children) still running; t_teardown kills them. */
extern pid_t t_squatters[8];
/* Shim warnings counted by the device's warning hook (new shim only). */
extern int t_warnings;

/* CLOCK_MONOTONIC in seconds. */
double t_now(void);
/* A shim device of T_UNITS units with the suite's geometry and T_JKEY; fails the test on error. */
struct shim_dev *t_dev_open(void);
/* Start the next context-number search on T_UNIT at n (new shim only). */
void t_cursor(struct shim_dev *dev, unsigned int n);
/* The /dev/shm path of the segment of uid's context ctx on T_UNIT. */
void t_seg_path(char *buf, size_t len, uint32_t uid, unsigned int ctx);
/* Wait for a child, at most T_DEADLINE_S (killed past that): its exit status, or 128 + signal. */
int t_wait(pid_t pid);
/* A context number of T_UNIT (SHIM_MAX_CTXTS / 2 and up) with no segment of ours; fails if none. */
unsigned int t_free_number(void);
/* cmocka teardown: kill t_squatters, remove the neighbour's files and the lock-file symlink. */
int t_teardown(void **state);

#endif /* OPX_TEST_TRUST_FIXTURE_H */
