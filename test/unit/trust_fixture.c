/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * trust_fixture.c - see trust_fixture.h.
 */
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "trust_fixture.h"

int t_warnings;
pid_t t_squatters[8]; /* neighbour processes still running */

#if T_NEW_SHIM
static void t_warn(const char *msg)
{
	t_warnings++;
	fprintf(stderr, "# shim warning: %s\n", msg);
}
#endif

double t_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct shim_dev *t_dev_open(void)
{
	struct shim_dev_params p = {
		.num_units = T_UNITS,
		.force_unit = -1,
		.mtu = T_MTU,
		.hdrq_cnt = T_HDRQ,
		.egr_bytes = T_EGR,
		.jkey = T_JKEY,
#if T_NEW_SHIM
		.warn = t_warn,
#endif
	};
	struct shim_dev *dev = NULL;

	assert_int_equal(shim_dev_open(&p, &dev), 0);
	return dev;
}

/* Start the next context-number search at n (new shim only: the old one
 * always searches from 0). */
void t_cursor(struct shim_dev *dev, unsigned int n)
{
#if T_NEW_SHIM
	atomic_store(&dev->ctx_next[T_UNIT], n % SHIM_MAX_CTXTS);
#else
	(void)dev;
	(void)n;
#endif
}

void t_seg_path(char *buf, size_t len, uint32_t uid, unsigned int ctx)
{
	char name[SHIM_NAME_MAX];

	shim_dev_name_segment(name, sizeof(name), uid, T_UNIT, ctx);
	snprintf(buf, len, "/dev/shm%s", name);
}

/* Wait for a child, at most T_DEADLINE_S; kill it past that.  Returns
 * its exit status, or 128 + signal. */
int t_wait(pid_t pid)
{
	double end = t_now() + T_DEADLINE_S;
	int st = 0;

	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (t_now() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			break;
		}
		usleep(2000);
	}
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* The first context number of T_UNIT, from SHIM_MAX_CTXTS / 2 up, with
 * no segment of our uid; fails the test when there is none. */
unsigned int t_free_number(void)
{
	char p[96];
	struct stat st;

	for (unsigned int n = SHIM_MAX_CTXTS / 2; n < SHIM_MAX_CTXTS; n++) {
		t_seg_path(p, sizeof(p), (uint32_t)geteuid(), n);
		if (lstat(p, &st) < 0)
			return n;
	}
	fail_msg("no free context number on unit %d", T_UNIT);
	return 0;
}

/* After every test, pass or fail: what the neighbour planted goes, its
 * processes end, so one failure cannot cascade into the next test. */
int t_teardown(void **state)
{
	char p[96];
	struct stat st;

	(void)state;
	for (size_t i = 0; i < sizeof(t_squatters) / sizeof(t_squatters[0]); i++) {
		if (t_squatters[i]) {
			kill(t_squatters[i], SIGKILL);
			waitpid(t_squatters[i], NULL, 0);
			t_squatters[i] = 0;
		}
	}
	for (unsigned int i = 0; i < SHIM_MAX_CTXTS; i++) {
		t_seg_path(p, sizeof(p), (uint32_t)geteuid(), i);
		if (lstat(p, &st) == 0 && st.st_uid == T_OTHER_UID)
			(void)unlink(p);
	}
	snprintf(p, sizeof(p), "/dev/shm/opx.%u.%u.lock", (unsigned int)geteuid(), T_UNIT);
	if (lstat(p, &st) == 0 && (S_ISLNK(st.st_mode) || st.st_uid == T_OTHER_UID))
		(void)unlink(p);
	snprintf(p, sizeof(p), "/dev/shm/opx-trust-victim.%d", (int)getpid());
	(void)unlink(p);
	snprintf(p, sizeof(p), "/dev/shm/opx-trust-victim2.%d", (int)getpid());
	(void)unlink(p);
	return 0;
}
