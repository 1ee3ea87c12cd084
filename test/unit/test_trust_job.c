/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_trust_job.c - job separation through the provider: two jobs of
 * one user with different job keys (FI_OPX_UUID or the launcher's job
 * id, opx_param.c; a context records its key, shim_ctx.c, and a sender
 * whose key differs cannot map it, shim_shm.c) cannot reach each other,
 * and one process opens hundreds of endpoints with the defaults.
 *
 * The provider tests run in re-executed copies of this binary (--role
 * ...) so each has its own parameters (FI_OPX_UUID) and its own device.
 * Every child runs under alarm(), every loop is bounded in count and
 * time.
 */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "trust_fixture.h"

#define T_MANY_EPS 300 /* item 20: 256 ranks of one job, and more */

static const char *t_self; /* argv[0], for the --role children */

/* ---------------------------------------------------------------------
 * Provider roles (run as re-executed children).
 */
static int t_role_fail(const char *what, int ret)
{
	fprintf(stderr, "# role: %s: %d (%s)\n", what, ret, fi_strerror(ret < 0 ? -ret : ret));
	return 1;
}

/* Poll the CQ for one completion, bounded. */
static int t_cq_wait(struct fid_cq *cq, struct fi_cq_tagged_entry *ce)
{
	double end = t_now() + T_HANG_S;

	while (t_now() < end) {
		ssize_t r = fi_cq_read(cq, ce, 1);

		if (r == 1)
			return 0;
		if (r != -FI_EAGAIN)
			return (int)r;
		sched_yield();
	}
	return -FI_ETIMEDOUT;
}

#define T_MSG 256

/* Receiver: print the address (hex) on stdout, then expect `expect`
 * messages of the pattern; wait for stdin to close. */
static int t_role_recv(int expect)
{
	uint8_t name[64], buf[T_MSG];
	size_t len = sizeof(name);
	struct fi_cq_tagged_entry ce;
	struct fx_env e;
	int ret;

	ret = fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED);
	if (ret)
		return t_role_fail("fx_open", ret);
	ret = fi_getname(&e.ep->fid, name, &len);
	if (ret)
		return t_role_fail("fi_getname", ret);
	for (size_t i = 0; i < len; i++)
		printf("%02x", name[i]);
	printf("\n");
	fflush(stdout);
	for (int m = 0; m < expect; m++) {
		memset(buf, 0, sizeof(buf));
		ret = (int)fi_trecv(e.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 7, 0, NULL);
		if (ret)
			return t_role_fail("fi_trecv", ret);
		ret = t_cq_wait(e.cq, &ce);
		if (ret)
			return t_role_fail("receive", ret);
		for (int i = 0; i < T_MSG; i++)
			if (buf[i] != (uint8_t)(i * 3 + 1))
				return t_role_fail("payload", i);
	}
	/* a send from another job must not have arrived either */
	memset(buf, 0, sizeof(buf));
	ret = (int)fi_trecv(e.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 7, 0, NULL);
	if (ret)
		return t_role_fail("fi_trecv", ret);
	char b;
	while (read(0, &b, 1) > 0) /* until the parent closes our stdin */
		;
	ret = (int)fi_cq_read(e.cq, &ce, 1);
	if (ret != -FI_EAGAIN)
		return t_role_fail("unexpected delivery", ret);
	fx_close(&e);
	return 0;
}

/* Sender: send one message to the hex address; exit 0 when the send
 * completed, 2 when it was refused with -FI_EACCES, 1 otherwise. */
static int t_role_send(const char *hex)
{
	uint8_t name[64], buf[T_MSG];
	struct fi_cq_tagged_entry ce;
	size_t len = strlen(hex) / 2;
	fi_addr_t peer;
	struct fx_env e;
	double end;
	int ret;

	if (len > sizeof(name))
		return 1;
	for (size_t i = 0; i < len; i++) {
		unsigned int v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return 1;
		name[i] = (uint8_t)v;
	}
	ret = fx_open(&e, FI_AV_TABLE, FI_CQ_FORMAT_TAGGED);
	if (ret)
		return t_role_fail("fx_open", ret);
	if (fi_av_insert(e.av, name, 1, &peer, 0, NULL) != 1)
		return t_role_fail("fi_av_insert", 0);
	for (int i = 0; i < T_MSG; i++)
		buf[i] = (uint8_t)(i * 3 + 1);
	end = t_now() + T_HANG_S;
	do {
		ret = (int)fi_tsend(e.ep, buf, sizeof(buf), NULL, peer, 7, NULL);
		if (ret == -FI_EAGAIN)
			(void)fi_cq_read(e.cq, &ce, 0);
	} while (ret == -FI_EAGAIN && t_now() < end);
	if (ret == -FI_EACCES) {
		fx_close(&e);
		return 2;
	}
	if (ret)
		return t_role_fail("fi_tsend", ret);
	ret = t_cq_wait(e.cq, &ce);
	if (ret)
		return t_role_fail("send completion", ret);
	fx_close(&e);
	return 0;
}

/* Open T_MANY_EPS endpoints with the defaults, each with its own context
 * on the one default unit; all must open, in bounded time. */
static int t_role_many(void)
{
	static struct fx_env e[T_MANY_EPS];
	struct rlimit rl;
	double t0;
	int n, ret = 0;

	/* two descriptors per endpoint, at least */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	t0 = t_now();
	for (n = 0; n < T_MANY_EPS && t_now() - t0 < T_DEADLINE_S; n++) {
		ret = fx_open(&e[n], FI_AV_TABLE, FI_CQ_FORMAT_TAGGED);
		if (ret)
			break;
	}
	fprintf(stderr, "# %d endpoints opened in %.3f s%s%s\n", n, t_now() - t0,
		ret ? ", then: " : "", ret ? fi_strerror(-ret) : "");
	for (int i = 0; i < n; i++)
		fx_close(&e[i]);
	return n == T_MANY_EPS ? 0 : 1;
}

/* Run this binary as --role args... with extra environment; returns a
 * pid, and the child's stdout / stdin through *out / *in when asked. */
static pid_t t_spawn(const char *const *env, const char *role, const char *arg, int *out, int *in)
{
	int o[2], i[2];
	pid_t pid;

	assert_int_equal(pipe(o), 0);
	assert_int_equal(pipe(i), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(o[1], 1);
		dup2(i[0], 0);
		close(o[0]);
		close(o[1]);
		close(i[0]);
		close(i[1]);
		unsetenv("FI_OPX_UUID");
		unsetenv("FI_OPX_JKEY");
		for (; env && *env; env += 2)
			setenv(env[0], env[1], 1);
		alarm(T_DEADLINE_S);
		execl(t_self, t_self, "--role", role, arg, (char *)NULL);
		_exit(127);
	}
	close(o[1]);
	close(i[0]);
	if (out)
		*out = o[0];
	else
		close(o[0]);
	if (in)
		*in = i[1];
	else
		close(i[1]);
	return pid;
}

static void t_read_line(int fd, char *buf, size_t len)
{
	size_t n = 0;

	while (n + 1 < len && read(fd, &buf[n], 1) == 1 && buf[n] != '\n')
		n++;
	buf[n] = '\0';
}

/* Item 10: two jobs of one user with different FI_OPX_UUID. */
static void test_jkey_jobs(void **state)
{
	static const char *const job_a[] = {"FI_OPX_UUID", "job-a-1234", NULL};
	static const char *const job_b[] = {"FI_OPX_UUID", "job-b-5678", NULL};
	static const char *const mpi_a[] = {"PMIX_NAMESPACE", "4242", NULL};
	static const char *const mpi_b[] = {"PMIX_NAMESPACE", "4343", NULL};
	char addr[160];
	int out, in;
	pid_t rx;

	(void)state;
	/* job A receives two messages: one from a peer of job A, one from a
	 * rank of the same launch; job B's send is refused, not dropped */
	rx = t_spawn(job_a, "recv", "1", &out, &in);
	t_read_line(out, addr, sizeof(addr));
	assert_true(strlen(addr) > 0);
	assert_int_equal(t_wait(t_spawn(job_b, "send", addr, NULL, NULL)), 2);
	assert_int_equal(t_wait(t_spawn(job_a, "send", addr, NULL, NULL)), 0);
	close(in);
	close(out);
	assert_int_equal(t_wait(rx), 0);

	/* launcher job ids the same way, and the uid key by hand */
	rx = t_spawn(mpi_a, "recv", "1", &out, &in);
	t_read_line(out, addr, sizeof(addr));
	assert_int_equal(t_wait(t_spawn(mpi_b, "send", addr, NULL, NULL)), 2);
	assert_int_equal(t_wait(t_spawn(mpi_a, "send", addr, NULL, NULL)), 0);
	close(in);
	close(out);
	assert_int_equal(t_wait(rx), 0);

	rx = t_spawn(NULL, "recv", "1", &out, &in);
	t_read_line(out, addr, sizeof(addr));
	assert_int_equal(t_wait(t_spawn(NULL, "send", addr, NULL, NULL)), 0);
	close(in);
	close(out);
	assert_int_equal(t_wait(rx), 0);
}

/* Item 20a through the provider with its defaults. */
static void test_many_endpoints(void **state)
{
	(void)state;
	assert_int_equal(t_wait(t_spawn(NULL, "many", "", NULL, NULL)), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_jkey_jobs, t_teardown),
		cmocka_unit_test_teardown(test_many_endpoints, t_teardown),
	};

	t_self = argv[0];
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 3 && !strcmp(argv[1], "--role")) {
		if (!strcmp(argv[2], "recv"))
			return t_role_recv(argc > 3 ? atoi(argv[3]) : 1);
		if (!strcmp(argv[2], "send") && argc > 3)
			return t_role_send(argv[3]);
		if (!strcmp(argv[2], "many"))
			return t_role_many();
		return 1;
	}
	/* the provider's default unit gets T_MANY_EPS contexts here, and the
	 * trust suites take turns on the host: a concurrent run of this test
	 * or of test_trust / test_trust_shm (another build tree's make check,
	 * or this one's in parallel) waits for this one */
	if (fx_exclusive("trust-unit", 15 * 60 * 1000) < 0) {
		fprintf(stderr, "test_trust_job: another run held the unit for 15 minutes\n");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
