/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_auto.c - FI_PROGRESS_AUTO (issue 31, item 6).
 *  - fi_getinfo: AUTO is given when asked for (control and data), MANUAL
 *    stays the default; other values are refused.
 *  - a target that never calls into libfabric: a child opens an
 *    auto-progress endpoint, registers a region, posts one large tagged
 *    receive (rendezvous), tells the parent, then only sleeps in
 *    nanosleep.  The parent writes the region, reads it back, and sends
 *    the large message: every operation completes while the child sleeps
 *    (no target progress but its thread).  The child then finds its
 *    receive completed with the data, and the region written; and its
 *    thread did not spin while idle (CPU time over an idle second).
 * Every wait is bounded.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include <rdma/fi_rma.h>

#define TA_WAIT_MS 30000u
#define TA_REGION (256u << 10)
#define TA_MSG (1u << 20) /* rendezvous */
#define TA_TAG 0x55u

/* What the child tells the parent. */
struct ta_hello {
	char name[64];
	size_t name_len;
	uint64_t key;
	uint64_t addr;
};

static uint8_t ta_pat(unsigned seed, size_t i)
{
	return (uint8_t)(seed * 101u + i * 7u + (i >> 9));
}

static int ta_info(enum fi_progress progress, struct fi_info **info)
{
	struct fi_info *hints = fx_hints(FI_RMA | FI_TAGGED);
	int ret;

	if (!hints)
		return -FI_ENOMEM;
	hints->domain_attr->data_progress = progress;
	hints->domain_attr->control_progress = progress;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
	ret = fx_getinfo_hints(hints, info);
	fi_freeinfo(hints);
	return ret;
}

static int ta_open(struct fx_env *e, enum fi_progress progress)
{
	struct fi_info *info;

	memset(e, 0, sizeof(*e));
	if (ta_info(progress, &info))
		return -1;
	info->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
	return fx_open_info(e, info, NULL) ? -1 : 0;
}

static void test_auto_getinfo(void **state)
{
	struct fi_info *info;

	(void)state;
	assert_int_equal(ta_info(FI_PROGRESS_AUTO, &info), 0);
	assert_int_equal(info->domain_attr->data_progress, FI_PROGRESS_AUTO);
	assert_int_equal(info->domain_attr->control_progress, FI_PROGRESS_AUTO);
	fi_freeinfo(info);
	assert_int_equal(ta_info(FI_PROGRESS_UNSPEC, &info), 0);
	assert_int_equal(info->domain_attr->data_progress, FI_PROGRESS_MANUAL);
	assert_int_equal(info->domain_attr->control_progress, FI_PROGRESS_MANUAL);
	fi_freeinfo(info);
	assert_int_equal(ta_info((enum fi_progress)7, &info), -FI_ENODATA);
}

static double ta_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec * 1e-6;
}

/* The child target: exits 0 when its receive completed with the data,
 * the region holds what the parent wrote, and it stayed idle while idle;
 * the idle CPU time (ms) goes back on wfd before the exit. */
static void ta_child(int rfd, int wfd)
{
	static uint8_t region[TA_REGION], msg[TA_MSG];
	struct ta_hello h;
	struct fx_env e;
	struct fid_mr *mr;
	struct fi_cq_tagged_entry ent;
	struct timespec nap = {0, 5000000};
	double cpu0;
	char c;
	int ms;

	memset(region, 0, sizeof(region));
	memset(msg, 0, sizeof(msg));
	memset(&h, 0, sizeof(h));
	h.name_len = sizeof(h.name);
	if (ta_open(&e, FI_PROGRESS_AUTO) ||
	    fi_mr_reg(e.domain, region, sizeof(region), FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0,
		      &mr, NULL) ||
	    fi_getname(&e.ep->fid, h.name, &h.name_len) ||
	    fi_trecv(e.ep, msg, sizeof(msg), NULL, FI_ADDR_UNSPEC, TA_TAG, 0, msg))
		_exit(2);
	h.key = fi_mr_key(mr);
	h.addr = (uint64_t)(uintptr_t)region;
	if (write(wfd, &h, sizeof(h)) != sizeof(h))
		_exit(3);
	/* no libfabric call from here until the parent says it is done */
	for (;;) {
		ssize_t n = read(rfd, &c, 1);

		if (n == 1)
			break;
		if (n == 0)
			_exit(8); /* the parent is gone */
		nanosleep(&nap, NULL);
	}
	/* everything happened while we slept */
	if (fi_cq_read(e.cq, &ent, 1) != 1 || ent.op_context != msg || ent.len != TA_MSG)
		_exit(4);
	for (size_t i = 0; i < TA_MSG; i++)
		if (msg[i] != ta_pat(2, i))
			_exit(5);
	for (size_t i = 0; i < TA_REGION; i++)
		if (region[i] != ta_pat(1, i))
			_exit(6);
	/* idle: the thread sleeps (a second without traffic) */
	cpu0 = ta_cpu_s();
	nap.tv_sec = 1;
	nap.tv_nsec = 0;
	nanosleep(&nap, NULL);
	ms = (int)((ta_cpu_s() - cpu0) * 1000.0);
	if (write(wfd, &ms, sizeof(ms)) != sizeof(ms))
		_exit(7);
	fi_close(&mr->fid);
	fx_close(&e);
	_exit(0);
}

static int ta_wait(struct fx_env *e, void *ctx)
{
	uint64_t end = fx_now_ms() + TA_WAIT_MS;

	while (fx_now_ms() < end) {
		struct fi_cq_tagged_entry ent;
		struct fi_cq_err_entry err;
		ssize_t n = fi_cq_read(e->cq, &ent, 1);

		if (n == 1 && ent.op_context == ctx)
			return 0;
		if (n == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			fi_cq_readerr(e->cq, &err, 0);
			return err.err ? err.err : FI_EIO;
		}
	}
	return -FI_ETIMEDOUT;
}

static void test_auto_sleeping_target(void **state)
{
	static uint8_t out[TA_REGION], back[TA_REGION], msg[TA_MSG];
	struct ta_hello h;
	struct fx_env e;
	int down[2], up[2], st, ms = -1;
	fi_addr_t t;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(down), 0);
	assert_int_equal(pipe(up), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char r[16], w[16];

		close(down[1]);
		close(up[0]);
		snprintf(r, sizeof(r), "%d", down[0]);
		snprintf(w, sizeof(w), "%d", up[1]);
		execl("/proc/self/exe", "test_auto", "target", r, w, (char *)NULL);
		_exit(127);
	}
	close(down[0]);
	close(up[1]);
	assert_int_equal(read(up[0], &h, sizeof(h)), (ssize_t)sizeof(h));
	assert_int_equal(ta_open(&e, FI_PROGRESS_MANUAL), 0);
	assert_int_equal(fi_av_insert(e.av, h.name, 1, &t, 0, NULL), 1);
	for (size_t i = 0; i < TA_REGION; i++)
		out[i] = ta_pat(1, i);
	for (size_t i = 0; i < TA_MSG; i++)
		msg[i] = ta_pat(2, i);
	/* write the region, read it back, every size class */
	assert_int_equal(fi_write(e.ep, out, 8, NULL, t, h.addr, h.key, out), 0);
	assert_int_equal(ta_wait(&e, out), 0);
	assert_int_equal(fi_write(e.ep, out + 8, TA_REGION - 8, NULL, t, h.addr + 8, h.key, out),
			 0);
	assert_int_equal(ta_wait(&e, out), 0);
	memset(back, 0, sizeof(back));
	assert_int_equal(fi_read(e.ep, back, TA_REGION, NULL, t, h.addr, h.key, back), 0);
	assert_int_equal(ta_wait(&e, back), 0);
	assert_memory_equal(back, out, TA_REGION);
	/* the large message: the sleeping receiver's thread takes it */
	assert_int_equal(fi_tsend(e.ep, msg, TA_MSG, NULL, t, TA_TAG, msg), 0);
	assert_int_equal(ta_wait(&e, msg), 0);
	assert_int_equal(write(down[1], "d", 1), 1);
	assert_int_equal(read(up[0], &ms, sizeof(ms)), (ssize_t)sizeof(ms));
	print_message("      sleeping target's CPU time over an idle second: %d ms\n", ms);
	assert_true(ms >= 0 && ms < 200);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	close(down[1]);
	close(up[0]);
	fx_close(&e);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auto_getinfo),
		cmocka_unit_test(test_auto_sleeping_target),
	};

	if (argc == 4 && !strcmp(argv[1], "target"))
		ta_child(atoi(argv[2]), atoi(argv[3]));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
