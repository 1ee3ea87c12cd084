/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_lock.c - the domain lock's debug checks (include/opx_lock.h).
 *
 * A debug build (--enable-debug) records which thread holds an opx_lock,
 * whether or not it is a real mutex, and every *_locked function asserts
 * that its caller holds the lock.  Here a forked child breaks a rule and
 * must die of SIGABRT with a message naming the function; the same call
 * with the lock held must go through.  In other builds the checks compile
 * out: the death tests skip and one test shows the call simply runs.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/resource.h>
#include <sys/wait.h>

#include "fixture.h"
#include "opx.h"

static struct opx_domain *domain_of(struct fx_env *e)
{
	return OPX_CONTAINER_OF(e->domain, struct opx_domain, domain_fid);
}

#ifdef OPX_DEBUG
/* What a child did: its wait status and what it wrote to stderr. */
struct child_result {
	int status;
	char err[512];
};

/* Run fn(arg) in a forked child with stderr captured; the child exits 0
 * if fn returns. */
static void run_child(void (*fn)(void *arg), void *arg, struct child_result *r)
{
	int fds[2];
	pid_t pid;
	size_t got = 0;

	memset(r, 0, sizeof(*r));
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit no_core = {0, 0};

		(void)setrlimit(RLIMIT_CORE, &no_core); /* an expected abort */
		signal(SIGABRT, SIG_DFL);                /* not the test runner's */
		close(fds[0]);
		dup2(fds[1], STDERR_FILENO);
		fn(arg);
		_exit(0);
	}
	close(fds[1]);
	for (;;) {
		ssize_t n = read(fds[0], r->err + got, sizeof(r->err) - 1 - got);

		if (n > 0 && got + (size_t)n < sizeof(r->err) - 1) {
			got += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		break;
	}
	close(fds[0]);
	assert_int_equal(waitpid(pid, &r->status, 0), pid);
}

static void assert_aborted(const struct child_result *r, const char *want)
{
	if (!WIFSIGNALED(r->status) || WTERMSIG(r->status) != SIGABRT)
		fail_msg("child did not abort (status 0x%x), stderr: %s", r->status, r->err);
	if (!strstr(r->err, want))
		fail_msg("abort message lacks \"%s\": %s", want, r->err);
}

static void find_unlocked(void *arg)
{
	(void)opx_mr_find_locked(arg, 1);
}

static void find_locked(void *arg)
{
	struct opx_domain *d = arg;

	opx_lock_acquire(&d->lock);
	(void)opx_mr_find_locked(d, 1);
	opx_lock_release(&d->lock);
}

static void acquire_twice(void *arg)
{
	struct opx_domain *d = arg;

	opx_lock_acquire(&d->lock);
	opx_lock_acquire(&d->lock);
}

/* A *_locked function called without the lock aborts, with its name and
 * file in the message; with the lock it runs.  Both with a real mutex
 * (FI_THREAD_SAFE) and without one (FI_THREAD_DOMAIN). */
static void check_assert_fires(const char *threading, bool on)
{
	struct fx_env e;
	struct child_result r;

	assert_int_equal(fx_open_domain(&e, threading), 0);
	assert_int_equal(domain_of(&e)->lock.on, on);

	run_child(find_unlocked, domain_of(&e), &r);
	assert_aborted(&r, "opx_mr_find_locked");
	assert_non_null(strstr(r.err, "opx_mr.c"));

	run_child(find_locked, domain_of(&e), &r);
	if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0)
		fail_msg("child with the lock failed (status 0x%x): %s", r.status, r.err);

	run_child(acquire_twice, domain_of(&e), &r);
	assert_aborted(&r, "already holds");
	fx_close(&e);
}
#endif

static void test_assert_fires_lock_off(void **state)
{
	(void)state;
#ifdef OPX_DEBUG
	check_assert_fires("domain", false);
#else
	skip();
#endif
}

static void test_assert_fires_lock_on(void **state)
{
	(void)state;
#ifdef OPX_DEBUG
	check_assert_fires("safe", true);
#else
	skip();
#endif
}

#ifdef OPX_DEBUG
static void *held_elsewhere(void *arg)
{
	return (void *)(uintptr_t)opx_lock_held(arg);
}
#endif

/* Ownership is per thread, tracked whether or not the mutex is real. */
static void test_lock_owner(void **state)
{
	(void)state;
#ifdef OPX_DEBUG
	for (int on = 0; on < 2; on++) {
		struct opx_lock l;
		pthread_t t;
		void *ret;

		opx_lock_init(&l, on);
		assert_false(opx_lock_held(&l));
		opx_lock_acquire(&l);
		assert_true(opx_lock_held(&l));
		assert_int_equal(pthread_create(&t, NULL, held_elsewhere, &l), 0);
		assert_int_equal(pthread_join(t, &ret), 0);
		assert_null(ret); /* another thread does not hold it */
		opx_lock_release(&l);
		assert_false(opx_lock_held(&l));
		opx_lock_destroy(&l);
	}
#else
	skip();
#endif
}

/* Without --enable-debug the assertion is gone: the same call runs. */
static void test_assert_compiled_out(void **state)
{
	(void)state;
#ifdef OPX_DEBUG
	skip();
#else
	struct fx_env e;

	assert_int_equal(fx_open_domain(&e, "domain"), 0);
	assert_null(opx_mr_find_locked(domain_of(&e), 1));
	fx_close(&e);
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_assert_fires_lock_off),
		cmocka_unit_test(test_assert_fires_lock_on),
		cmocka_unit_test(test_lock_owner),
		cmocka_unit_test(test_assert_compiled_out),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
