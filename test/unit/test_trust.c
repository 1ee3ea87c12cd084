/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_trust.c - a host shared with other users, other jobs, other PID
 * namespaces and crashing processes (issue 6 items 5, 7, 8, 9, 10, 20),
 * and processes of our own uid that rewrite a context's control block or
 * are killed with their contexts open (issue 28 item 8).
 *
 * The hostile neighbour is this test itself in a forked child that drops
 * to another uid (setresuid, so no account has to exist); those tests
 * are skipped, with the reason, when we are not root.  Shim tests use
 * unit 5 of 8 (test_shim uses 7, test_sdma 6, the provider 0).  Provider
 * tests run in re-executed copies of this binary (--role ...) so each
 * has its own parameters (FI_OPX_UUID) and its own device.  Every
 * operation that could hang on the old code runs in a child under
 * alarm(), every loop is bounded in count and time.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
#define T_MANY_EPS 300     /* item 20: 256 ranks of one job, and more */

/* The new shim has a warning hook, a context cursor and the owner lock;
 * without them (the code before the fix) this file still builds, so the
 * same tests can be run against it and seen to fail. */
#ifdef SHIM_CTL_F_OWNER_LOCK
#define T_NEW_SHIM 1
#else
#define T_NEW_SHIM 0
#endif

static const char *t_self; /* argv[0], for the --role children */
static int t_warnings;
static pid_t t_squatters[8]; /* neighbour processes still running */

#if T_NEW_SHIM
static void t_warn(const char *msg)
{
	t_warnings++;
	fprintf(stderr, "# shim warning: %s\n", msg);
}
#endif

static double t_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct shim_dev *t_dev_open(void)
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
static void t_cursor(struct shim_dev *dev, unsigned int n)
{
#if T_NEW_SHIM
	atomic_store(&dev->ctx_next[T_UNIT], n % SHIM_MAX_CTXTS);
#else
	(void)dev;
	(void)n;
#endif
}

static void t_seg_path(char *buf, size_t len, uint32_t uid, unsigned int ctx)
{
	char name[SHIM_NAME_MAX];

	shim_name_segment(name, sizeof(name), uid, T_UNIT, ctx);
	snprintf(buf, len, "/dev/shm%s", name);
}

static bool t_root(void)
{
	if (geteuid() == 0)
		return true;
	fprintf(stderr, "# skipped: acting as a second user needs root (setresuid)\n");
	return false;
}

static void t_become_other(void)
{
	if (setgroups(0, NULL) || setresgid(T_OTHER_GID, T_OTHER_GID, T_OTHER_GID) ||
	    setresuid(T_OTHER_UID, T_OTHER_UID, T_OTHER_UID))
		_exit(99);
}

/* Wait for a child, at most T_DEADLINE_S; kill it past that.  Returns
 * its exit status, or 128 + signal. */
static int t_wait(pid_t pid)
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

/* Open a context of dev on T_UNIT in a child that is killed if it takes
 * more than T_HANG_S (the old code blocked for ever).  The child reports
 * the result and the context number through a pipe.  Returns 0 and the
 * number, the shim's -errno, or -ETIMEDOUT. */
static int t_open_bounded(struct shim_dev *dev, unsigned int *num)
{
	int fds[2], st;
	int32_t res[2] = {-ETIMEDOUT, -1};
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct shim_ctx *c = NULL;
		struct shim_addr a;

		close(fds[0]);
		alarm(T_HANG_S);
		res[0] = shim_ctx_open(dev, T_UNIT, &c, NULL, NULL);
		if (!res[0]) {
			shim_ctx_addr(c, &a);
			res[1] = a.ctx;
		}
		if (write(fds[1], res, sizeof(res)) != (ssize_t)sizeof(res))
			_exit(1);
		if (c)
			shim_ctx_close(c);
		_exit(0);
	}
	close(fds[1]);
	if (read(fds[0], res, sizeof(res)) != (ssize_t)sizeof(res))
		res[0] = -ETIMEDOUT;
	close(fds[0]);
	st = t_wait(pid);
	if (st == 128 + SIGALRM)
		res[0] = -ETIMEDOUT;
	if (num)
		*num = (unsigned int)res[1];
	return res[0];
}

/* After every test, pass or fail: what the neighbour planted goes, its
 * processes end, so one failure cannot cascade into the next test. */
static int t_teardown(void **state)
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

/* ---------------------------------------------------------------------
 * Item 5: liveness across PID namespaces that share /dev/shm.
 */
/* In a fresh PID namespace (pid 1 there): the outside context must look
 * alive and must not be reclaimed; then publish our own context and live
 * until told.  Exit codes say what went wrong. */
static int t_pidns_inner(struct shim_dev *dev, const struct shim_addr *outside, int up, int down)
{
	struct shim_peer *peer = NULL;
	struct shim_ctx *c = NULL;
	struct shim_addr mine;
	char b;

	if (getpid() != 1)
		return 10;
	if (shim_peer_open(dev, outside, &peer))
		return 11;
	if (!shim_peer_alive(peer))
		return 12; /* old code: the outside pid does not exist here */
	t_cursor(dev, outside->ctx); /* make the search meet the outside context */
	if (shim_ctx_open(dev, T_UNIT, &c, NULL, NULL))
		return 13;
	shim_ctx_addr(c, &mine);
	if (mine.ctx == outside->ctx)
		return 14; /* took a live context's number */
	shim_peer_close(peer);
	if (shim_peer_open(dev, outside, &peer))
		return 15; /* the outside context is gone or replaced */
	shim_peer_close(peer);
	if (write(up, &mine, sizeof(mine)) != (ssize_t)sizeof(mine))
		return 16;
	if (read(down, &b, 1) < 0) /* until the outside has looked at us */
		return 17;
	shim_ctx_close(c);
	return 0;
}

static void test_pidns_liveness(void **state)
{
	struct shim_dev *dev = t_dev_open();
	struct shim_addr outside, inner;
	struct shim_peer *peer;
	struct shim_ctx *c;
	int up[2], down[2], st;
	pid_t pid;

	(void)state;
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
	shim_ctx_addr(c, &outside);
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		pid_t inner_pid;

		close(up[0]);
		close(down[1]);
		alarm(T_DEADLINE_S);
		if (unshare(CLONE_NEWPID) < 0)
			_exit(77);
		inner_pid = fork();
		if (inner_pid < 0)
			_exit(78);
		if (inner_pid == 0)
			_exit(t_pidns_inner(dev, &outside, up[1], down[0]));
		_exit(t_wait(inner_pid));
	}
	close(up[1]);
	close(down[0]);
	if (read(up[0], &inner, sizeof(inner)) == (ssize_t)sizeof(inner)) {
		/* the inner context, seen from outside: its owner is pid 1
		 * over there, which is some other process here */
		assert_int_equal(shim_peer_open(dev, &inner, &peer), 0);
		assert_true(shim_peer_alive(peer));
		shim_peer_close(peer);
		unsigned int n = 0;
		t_cursor(dev, inner.ctx);
		assert_int_equal(t_open_bounded(dev, &n), 0);
		assert_int_not_equal(n, inner.ctx);
		assert_int_equal(shim_peer_open(dev, &inner, &peer), 0);
		shim_peer_close(peer);
	}
	close(down[1]);
	close(up[0]);
	st = t_wait(pid);
	if (st == 77) {
		fprintf(stderr, "# skipped: unshare(CLONE_NEWPID) not permitted here\n");
	} else {
		if (st)
			fprintf(stderr, "# PID-namespace child failed with %d\n", st);
		assert_int_equal(st, 0);
	}
	/* ours survived all of it */
	assert_int_equal(shim_peer_open(dev, &outside, &peer), 0);
	assert_true(shim_peer_alive(peer));
	shim_peer_close(peer);
	shim_ctx_close(c);
	shim_dev_close(dev);
}

/* A context whose owner died is still seen dead (and reclaimed) through
 * the lock, with no pid involved. */
static void test_dead_owner_lock(void **state)
{
	struct shim_dev *dev = t_dev_open();
	struct shim_peer *peer;
	struct shim_addr a;
	int fds[2];
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct shim_ctx *c;

		if (shim_ctx_open(dev, T_UNIT, &c, NULL, NULL))
			_exit(1);
		shim_ctx_addr(c, &a);
		if (write(fds[1], &a, sizeof(a)) != (ssize_t)sizeof(a))
			_exit(2);
		_exit(0); /* dies without closing */
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &a, sizeof(a)), (ssize_t)sizeof(a));
	close(fds[0]);
	assert_int_equal(t_wait(pid), 0);
	assert_int_equal(shim_peer_open(dev, &a, &peer), 0);
	assert_false(shim_peer_alive(peer));
	shim_peer_close(peer);
	unsigned int n = 0;
	t_cursor(dev, a.ctx);
	assert_int_equal(t_open_bounded(dev, &n), 0);
	if (T_NEW_SHIM)
		assert_int_equal(n, a.ctx); /* reclaimed */
	assert_int_equal(shim_peer_open(dev, &a, &peer), -ENOENT);
	shim_dev_close(dev);
}

/* ---------------------------------------------------------------------
 * Item 7: symlinks, squatted names, a held lock file.
 */
struct t_squat {
	int ready[2]; /* child -> parent: planted */
	int done[2];  /* parent -> child: closed when the child may go */
};

static void t_squat_start(struct t_squat *s)
{
	assert_int_equal(pipe(s->ready), 0);
	assert_int_equal(pipe(s->done), 0);
}

/* In the child, once planted: tell the parent, wait (holding whatever we
 * hold) until it is done. */
static void t_squat_hold(struct t_squat *s, int status)
{
	struct pollfd pfd = {.fd = s->done[0], .events = POLLIN};
	char b = (char)status;

	if (write(s->ready[1], &b, 1) != 1)
		_exit(3);
	poll(&pfd, 1, T_DEADLINE_S * 1000);
	_exit(0);
}

static pid_t t_squat_fork(struct t_squat *s)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	for (size_t i = 0; pid > 0 && i < sizeof(t_squatters) / sizeof(t_squatters[0]); i++) {
		if (!t_squatters[i]) {
			t_squatters[i] = pid;
			break;
		}
	}
	if (pid == 0) {
		close(s->ready[0]);
		close(s->done[1]);
		alarm(T_DEADLINE_S);
		t_become_other();
	}
	return pid;
}

/* Back-date a planted file by a minute: an old, magic-less segment of
 * ours would be reclaimed, one of the neighbour's must still be left. */
static int t_age(int fd)
{
	struct timespec ts[2];

	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= 60;
	ts[1] = ts[0];
	return futimens(fd, ts);
}

/* Parent side: wait for the child to have planted; 0 when it did. */
static int t_squat_wait(struct t_squat *s)
{
	char b = 1;

	close(s->ready[1]);
	close(s->done[0]);
	if (read(s->ready[0], &b, 1) != 1)
		return -1;
	return b;
}

static int t_squat_end(struct t_squat *s, pid_t pid)
{
	close(s->done[1]);
	close(s->ready[0]);
	for (size_t i = 0; i < sizeof(t_squatters) / sizeof(t_squatters[0]); i++)
		if (t_squatters[i] == pid)
			t_squatters[i] = 0;
	return t_wait(pid);
}

static void test_lockfile_symlink(void **state)
{
	char lock[96], victim[96];
	struct shim_dev *dev;
	struct t_squat s;
	struct stat st;
	pid_t pid;

	(void)state;
	if (!t_root())
		return;
	dev = t_dev_open();
	snprintf(lock, sizeof(lock), "/dev/shm/opx.%u.%u.lock", (unsigned int)geteuid(), T_UNIT);
	snprintf(victim, sizeof(victim), "/dev/shm/opx-trust-victim.%d", (int)getpid());
	(void)unlink(lock);
	(void)unlink(victim);

	/* 1. the per-unit lock file as a symlink to a file we would create */
	t_squat_start(&s);
	pid = t_squat_fork(&s);
	if (pid == 0)
		t_squat_hold(&s, symlink(victim, lock) ? 1 : 0);
	assert_int_equal(t_squat_wait(&s), 0);
	assert_int_equal(t_open_bounded(dev, NULL), 0);
	errno = 0;
	assert_true(lstat(victim, &st) < 0 && errno == ENOENT); /* never created */
	assert_int_equal(t_squat_end(&s, pid), 0);
	(void)unlink(lock);
	(void)unlink(victim);

	/* 2. the lock file as the neighbour's file, held locked */
	t_squat_start(&s);
	pid = t_squat_fork(&s);
	if (pid == 0) {
		int fd = open(lock, O_RDWR | O_CREAT | O_EXCL, 0666);

		t_squat_hold(&s, fd < 0 || flock(fd, LOCK_EX) ? 1 : 0);
	}
	assert_int_equal(t_squat_wait(&s), 0);
	assert_int_equal(t_open_bounded(dev, NULL), 0); /* old code: blocked for ever */
	assert_int_equal(t_squat_end(&s, pid), 0);
	(void)unlink(lock);
	shim_dev_close(dev);
}

/* Segment names squatted by the neighbour: a file, a symlink, a FIFO.
 * They are skipped (with a warning), never followed or removed, and
 * never block the open. */
static void test_squatted_names(void **state)
{
	char path[3][96], victim[96];
	struct shim_dev *dev;
	struct t_squat s;
	struct stat st;
	unsigned int base, n = 0;
	pid_t pid;

	(void)state;
	if (!t_root())
		return;
	dev = t_dev_open();
	snprintf(victim, sizeof(victim), "/dev/shm/opx-trust-victim2.%d", (int)getpid());
	/* three consecutive free numbers */
	for (base = 1;; base += 4) {
		bool free3 = true;

		assert_true(base < SHIM_MAX_CTXTS - 3);
		for (int i = 0; i < 3; i++) {
			t_seg_path(path[i], sizeof(path[i]), (uint32_t)geteuid(), base + (unsigned)i);
			if (lstat(path[i], &st) == 0)
				free3 = false;
		}
		if (free3)
			break;
	}
	t_squat_start(&s);
	pid = t_squat_fork(&s);
	if (pid == 0) {
		int fd = open(path[0], O_RDWR | O_CREAT | O_EXCL, 0666);
		int bad = fd < 0 || symlink(victim, path[1]) || mkfifo(path[2], 0666) ||
			  t_age(fd); /* old enough to pass for an abandoned segment */

		t_squat_hold(&s, bad);
	}
	assert_int_equal(t_squat_wait(&s), 0);
	t_warnings = 0;
	t_cursor(dev, base);
	assert_int_equal(t_open_bounded(dev, &n), 0); /* old code: blocked on the FIFO */
	assert_true(n < base || n > base + 2);
	errno = 0;
	assert_true(lstat(victim, &st) < 0 && errno == ENOENT);
	for (int i = 0; i < 3; i++) { /* untouched */
		assert_int_equal(lstat(path[i], &st), 0);
		assert_int_equal(st.st_uid, T_OTHER_UID);
	}
	/* the warning was given in the child that opened; here, directly */
	if (T_NEW_SHIM) {
		struct shim_ctx *c;

		t_cursor(dev, base);
		assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
		assert_int_equal(t_warnings, 1);
		shim_ctx_close(c);
	}
	assert_int_equal(t_squat_end(&s, pid), 0);
	for (int i = 0; i < 3; i++)
		(void)unlink(path[i]);
	shim_dev_close(dev);
}

/* Every name of the unit squatted: a clear -EBUSY (and a warning), in
 * bounded time, never a hang. */
static void test_all_names_squatted(void **state)
{
	struct shim_dev *dev;
	struct t_squat s;
	double t0;
	pid_t pid;
	int ret;

	(void)state;
	if (!t_root())
		return;
	dev = t_dev_open();
	/* Our own abandoned contexts on the unit (a crashed earlier run)
	 * would rightly be reclaimed: fill the unit once, which reclaims
	 * them, and empty it again, so only live names and squats remain. */
	static struct shim_ctx *c[SHIM_MAX_CTXTS];
	int nc = 0;
	while (nc < (int)SHIM_MAX_CTXTS && shim_ctx_open(dev, T_UNIT, &c[nc], NULL, NULL) == 0)
		nc++;
	while (nc > 0)
		shim_ctx_close(c[--nc]);
	t_squat_start(&s);
	pid = t_squat_fork(&s);
	if (pid == 0) {
		char p[96];

		/* names already taken (other suites' live contexts) stay
		 * theirs; planting fails there, which is fine */
		for (unsigned int i = 0; i < SHIM_MAX_CTXTS; i++) {
			t_seg_path(p, sizeof(p), 0, i);
			int fd = open(p, O_RDWR | O_CREAT | O_EXCL, 0666);
			if (fd >= 0) {
				(void)t_age(fd);
				close(fd);
			}
		}
		t_squat_hold(&s, 0);
	}
	assert_int_equal(t_squat_wait(&s), 0);
	t_warnings = 0;
	t0 = t_now();
	ret = t_open_bounded(dev, NULL);
	fprintf(stderr, "# all names squatted: open returned %d in %.3f s\n", ret, t_now() - t0);
	assert_int_equal(ret, -EBUSY);
	assert_int_equal(t_squat_end(&s, pid), 0);
	for (unsigned int i = 0; i < SHIM_MAX_CTXTS; i++) {
		char p[96];
		struct stat st;

		t_seg_path(p, sizeof(p), 0, i);
		if (lstat(p, &st) == 0 && st.st_uid == T_OTHER_UID)
			(void)unlink(p);
	}
	shim_dev_close(dev);
}

/* ---------------------------------------------------------------------
 * Item 8: a look-alike segment is never mapped.
 */
/* Write a copy of a real control block, renumbered to ctx n with the
 * given nonce, into a new segment at path with the given mode. */
static int t_plant_lookalike(const char *path, const struct shim_rcv_ctl *tmpl, unsigned int n,
			     uint32_t nonce, mode_t mode)
{
	struct shim_rcv_ctl *ctl;
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, mode);

	if (fd < 0 || fchmod(fd, mode) || ftruncate(fd, (off_t)tmpl->seg_size))
		return -1;
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (ctl == MAP_FAILED)
		return -1;
	memcpy(ctl, tmpl, sizeof(*ctl));
	ctl->ctx = (uint16_t)n;
	ctl->nonce = nonce;
	atomic_store(&ctl->ready, 1);
	munmap(ctl, sizeof(*ctl));
	close(fd);
	return 0;
}

static unsigned int t_free_number(void)
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

static void test_lookalike_segment(void **state)
{
	struct shim_dev *dev = t_dev_open();
	struct shim_peer *peer = NULL;
	struct shim_addr real, fake;
	struct shim_ctx *c;
	struct t_squat s;
	char path[96];
	unsigned int n;
	pid_t pid;

	(void)state;
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
	shim_ctx_addr(c, &real);
	n = t_free_number();
	t_seg_path(path, sizeof(path), real.uid, n);
	fake = real;
	fake.ctx = (uint16_t)n;
	fake.nonce = real.nonce ^ 0x1234567u;

	/* ours, but group/other readable and writable: refused */
	assert_int_equal(t_plant_lookalike(path, shim_ctx_rx(c)->ctl, n, fake.nonce, 0666), 0);
	assert_int_equal(shim_peer_open(dev, &fake, &peer), -EACCES);
	assert_int_equal(unlink(path), 0);
	/* the same file with 0600 is a proper segment of ours */
	assert_int_equal(t_plant_lookalike(path, shim_ctx_rx(c)->ctl, n, fake.nonce, 0600), 0);
	assert_int_equal(shim_peer_open(dev, &fake, &peer), 0);
	shim_peer_close(peer);
	assert_int_equal(unlink(path), 0);

	if (t_root()) {
		/* the neighbour's look-alike at our name, 0600 and all */
		t_squat_start(&s);
		pid = t_squat_fork(&s);
		if (pid == 0)
			t_squat_hold(&s, t_plant_lookalike(path, shim_ctx_rx(c)->ctl, n, fake.nonce,
							   0600) ? 1 : 0);
		assert_int_equal(t_squat_wait(&s), 0);
		peer = NULL;
		assert_int_equal(shim_peer_open(dev, &fake, &peer), -EACCES);
		assert_null(peer);
		assert_int_equal(t_squat_end(&s, pid), 0);
		(void)unlink(path);
	}
	/* an address naming another uid is not ours to map */
	fake = real;
	fake.uid = T_OTHER_UID;
	assert_int_equal(shim_peer_open(dev, &fake, &peer), -EACCES);
	shim_ctx_close(c);
	shim_dev_close(dev);
}

/* ---------------------------------------------------------------------
 * Item 9: another user's datagram cannot wake an endpoint.
 */
static void test_wake_other_user(void **state)
{
	struct shim_dev *dev;
	struct shim_addr a;
	struct shim_ctx *c;
	struct pollfd pfd;
	int fds[2], sent = -1;
	pid_t pid;

	(void)state;
	if (!t_root())
		return;
	dev = t_dev_open();
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
	shim_ctx_addr(c, &a);
	assert_int_equal(shim_ctx_sleep_arm(c), 0);
	pfd.fd = shim_ctx_wait_fd(c);
	pfd.events = POLLIN;
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sockaddr_un sun;
		socklen_t len;
		int ok = 0, fd;

		close(fds[0]);
		alarm(T_DEADLINE_S);
		t_become_other();
		fd = socket(AF_UNIX, SOCK_DGRAM, 0);
		shim_name_wake(&sun, &len, a.uid, a.unit, a.ctx, a.nonce);
		for (int i = 0; i < 100; i++) /* a small flood */
			if (sendto(fd, "x", 1, MSG_DONTWAIT, (struct sockaddr *)&sun, len) == 1)
				ok++;
		if (write(fds[1], &ok, sizeof(ok)) != (ssize_t)sizeof(ok))
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &sent, sizeof(sent)), (ssize_t)sizeof(sent));
	close(fds[0]);
	assert_int_equal(t_wait(pid), 0);
	assert_int_equal(sent, 0);
	assert_int_equal(poll(&pfd, 1, 100), 0); /* not woken */

	/* our own peers still wake it */
	struct shim_peer *peer;
	assert_int_equal(shim_peer_open(dev, &a, &peer), 0);
	shim_peer_wake(peer);
	assert_int_equal(poll(&pfd, 1, 5000), 1);
	shim_ctx_sleep_disarm(c);
	shim_peer_close(peer);
	shim_ctx_close(c);

#if T_NEW_SHIM
	/* a wake-up directory name planted by the neighbour is refused */
	char dir[SHIM_NAME_MAX];
	struct t_squat s;
	uint32_t fake_uid = T_OTHER_UID + 1;

	shim_name_wake_dir(dir, sizeof(dir), fake_uid);
	(void)rmdir(dir);
	t_squat_start(&s);
	pid = t_squat_fork(&s);
	if (pid == 0)
		t_squat_hold(&s, mkdir(dir, 0777) ? 1 : 0);
	assert_int_equal(t_squat_wait(&s), 0);
	assert_int_equal(shim_wake_dir_check(fake_uid), -EACCES);
	assert_int_equal(t_squat_end(&s, pid), 0);
	(void)rmdir(dir);
#endif
	shim_dev_close(dev);
}

/* ---------------------------------------------------------------------
 * Item 20a: many contexts on one unit.
 */
static void test_unit_limit(void **state)
{
	static struct shim_ctx *c[SHIM_MAX_CTXTS + 1];
	struct shim_dev *dev = t_dev_open();
	int n = 0, ret = 0;
	double t0 = t_now();

	(void)state;
	/* fill the unit (other suites may hold a few of its names) */
	while (n <= (int)SHIM_MAX_CTXTS && t_now() - t0 < T_DEADLINE_S) {
		ret = shim_ctx_open(dev, T_UNIT, &c[n], NULL, NULL);
		if (ret)
			break;
		n++;
	}
	fprintf(stderr, "# %d contexts on one unit in %.3f s, then %d\n", n, t_now() - t0, ret);
	assert_int_equal(ret, -EBUSY);
	assert_true(n >= 300);
	assert_true(n <= (int)SHIM_MAX_CTXTS);
	while (n > 0)
		shim_ctx_close(c[--n]);
	shim_dev_close(dev);
}

/* ---------------------------------------------------------------------
 * Issue 28 item 8: a process of our own uid rewrites a live context's
 * control block; endpoints killed with their contexts open.
 */
#define T_WRAP(len) ((uint64_t)0 - (uint64_t)(len)) /* 2^64 - len: + len wraps to 0 */

/* A child of ours the teardown kills if the test fails before it ends. */
static void t_track(pid_t pid)
{
	for (size_t i = 0; i < sizeof(t_squatters) / sizeof(t_squatters[0]); i++) {
		if (!t_squatters[i]) {
			t_squatters[i] = pid;
			return;
		}
	}
}

static void t_untrack(pid_t pid)
{
	for (size_t i = 0; i < sizeof(t_squatters) / sizeof(t_squatters[0]); i++)
		if (t_squatters[i] == pid)
			t_squatters[i] = 0;
}

/* The segment of a context, mapped a second time as another process of
 * our uid would: whatever is written here, the owner's mapping sees. */
static struct shim_rcv_ctl *t_ctl_map(const struct shim_addr *a)
{
	char name[SHIM_NAME_MAX];
	struct shim_rcv_ctl *ctl;
	int fd;

	shim_name_segment(name, sizeof(name), a->uid, a->unit, a->ctx);
	fd = shm_open(name, O_RDWR | O_NOFOLLOW, 0);
	assert_true(fd >= 0);
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	assert_true(ctl != MAP_FAILED);
	return ctl;
}

/* The geometry fields of the control block, as the owner wrote them or
 * as the attacker sets them. */
struct t_geom {
	uint64_t hdrq_off, egr_off, seg_size, claim_off;
	uint32_t claim_cnt;
};

static void t_geom_get(const struct shim_rcv_ctl *ctl, struct t_geom *g)
{
	g->hdrq_off = ctl->hdrq_off;
	g->egr_off = ctl->egr_off;
	g->seg_size = ctl->seg_size;
	g->claim_off = ctl->claim_off;
	g->claim_cnt = ctl->claim_cnt;
}

static void t_geom_set(struct shim_rcv_ctl *ctl, const struct t_geom *g)
{
	ctl->hdrq_off = g->hdrq_off;
	ctl->egr_off = g->egr_off;
	ctl->seg_size = g->seg_size;
	ctl->claim_off = g->claim_off;
	ctl->claim_cnt = g->claim_cnt;
}

/* One header-only packet with tag.  0, or the reservation's -errno. */
static int t_send1(struct shim_peer *p, uint64_t tag)
{
	struct shim_pio_resv r = {0};
	struct shim_rhq_entry *e;
	int ret = shim_pio_reserve(p, 1, 0, &r);

	if (ret)
		return ret;
	e = shim_pio_entry(p, &r, 0);
	memset(&e->hdr, 0, sizeof(e->hdr));
	e->hdr.jkey = p->jkey;
	e->hdr.dlid = p->lid;
	e->hdr.dctx = p->ctx;
	e->hdr.tag = tag;
	shim_pio_publish(p, &r, 0, 0);
	return 0;
}

/* Bit 0: the open returned what it should; bit 1: an opened peer's claim
 * slot lies inside its mapping; bit 2: a send through it went in. */
#define T_PEER_OK 7
static int t_peer_try(struct shim_dev *dev, const struct shim_addr *a, int want)
{
	struct shim_peer *p = NULL;
	int ret = shim_peer_open(dev, a, &p), res = 0;

	if (ret == want)
		res |= 1;
	if (ret == 0) {
		const uint8_t *base = (const uint8_t *)p->ctl, *c = (const uint8_t *)p->claim;

		if (c >= base && c + sizeof(struct shim_claim) <= base + p->map_len)
			res |= 2;
		if (t_send1(p, 0x5e4d) == 0)
			res |= 4;
		shim_peer_close(p);
	} else {
		res |= 6;
	}
	return res;
}

/* In a child that runs a sender against a hostile block: a crash must
 * kill it, not be caught by cmocka's handlers, which would go on running
 * the suite in the child. */
static void t_child_crash_plainly(void)
{
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_DFL);
	alarm(T_HANG_S);
}

/* Run t_peer_try in a child, so that a sender that crashes fails this
 * case by name instead of taking the suite with it.  Returns the child's
 * T_PEER_OK bits, or 128 + the signal that killed it. */
static int t_peer_try_child(struct shim_dev *dev, const struct shim_addr *a, int want)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		t_child_crash_plainly();
		_exit(t_peer_try(dev, a, want));
	}
	return t_wait(pid);
}

/* Take the packets of t_send1 (and anything else) off the ring. */
static unsigned int t_drain_all(struct shim_ctx *c)
{
	struct shim_rx *rx = shim_ctx_rx(c);
	struct shim_rhq_entry *e;
	unsigned int n = 0;

	while ((e = shim_rx_peek(rx))) {
		shim_rx_release(rx, e);
		n++;
	}
	return n;
}

/* A child that maps a (before the attack), waits for a byte on go[0],
 * then reserves npkts header entries and nbytes of eager space without
 * publishing them, says so on up[1] and waits to be killed. */
static pid_t t_reserver(const struct shim_addr *a, uint32_t npkts, uint32_t nbytes, int *go)
{
	int up[2], dn[2];
	pid_t pid;
	char b;

	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(dn), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct shim_dev_params prm = {.force_unit = -1};
		struct shim_pio_resv r = {0};
		struct shim_dev *dev;
		struct shim_peer *p;

		close(up[0]);
		close(dn[1]);
		alarm(T_DEADLINE_S);
		if (shim_dev_open(&prm, &dev) || shim_peer_open(dev, a, &p))
			_exit(2);
		b = 'o';
		if (write(up[1], &b, 1) != 1 || read(dn[0], &b, 1) != 1)
			_exit(3);
		if (shim_pio_reserve(p, npkts, nbytes, &r))
			_exit(4);
		b = 'r';
		if (write(up[1], &b, 1) != 1)
			_exit(5);
		pause();
		_exit(6);
	}
	close(up[1]);
	close(dn[0]);
	assert_int_equal(read(up[0], &b, 1), 1); /* mapped */
	go[0] = up[0];
	go[1] = dn[1];
	return pid;
}

/* Let a t_reserver child reserve, then kill it: its hole stays. */
static void t_reserver_kill(pid_t pid, int *go)
{
	char b = 'g';
	int st = 0;

	assert_int_equal(write(go[1], &b, 1), 1);
	assert_int_equal(read(go[0], &b, 1), 1);
	assert_int_equal(b, 'r');
	close(go[0]);
	close(go[1]);
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st));
}

/* Consume until a packet with tag arrives or T_HANG_S pass, driving the
 * dead-sender recovery while the ring is idle; *dead counts the entries
 * the recovery filled.  True when the tagged packet arrived. */
static bool t_recv_tag(struct shim_ctx *c, uint64_t tag, unsigned int *dead)
{
	struct shim_rx *rx = shim_ctx_rx(c);
	double end = t_now() + T_HANG_S;

	while (t_now() < end) {
		struct shim_rhq_entry *e = shim_rx_peek(rx);
		bool hit;

		if (!e) {
			shim_rx_recover(c);
			usleep(1000);
			continue;
		}
		hit = !(e->rhf & SHIM_RHF_ERR_DEAD) && e->hdr.tag == tag;
		if (e->rhf & SHIM_RHF_ERR_DEAD)
			(*dead)++;
		shim_rx_release(rx, e);
		if (hit)
			return true;
	}
	return false;
}

/* While a live sender holds an unpublished reservation for several grace
 * periods, the recovery must find it alive and fill nothing. */
static void t_live_hole_waits(struct shim_ctx *c, struct shim_peer *slow)
{
	struct shim_rx *rx = shim_ctx_rx(c);
	uint64_t waits = c->hole.waits, skipped = atomic_load(&rx->ctl->holes_skipped);
	double end = t_now() + 4.0 * SHIM_HOLE_GRACE_NS / 1e9 + 0.05;
	struct shim_pio_resv r = {0};
	struct shim_rhq_entry *e;
	unsigned int dead = 0;

	assert_int_equal(shim_pio_reserve(slow, 1, 0, &r), 0);
	while (t_now() < end) {
		assert_int_equal(shim_rx_recover(c), 0);
		assert_null(shim_rx_peek(rx));
		usleep(2000);
	}
	assert_true(c->hole.waits > waits);
	assert_int_equal(atomic_load(&rx->ctl->holes_skipped), skipped);
	e = shim_pio_entry(slow, &r, 0);
	memset(&e->hdr, 0, sizeof(e->hdr));
	e->hdr.tag = 0x510;
	shim_pio_publish(slow, &r, 0, 0);
	assert_true(t_recv_tag(c, 0x510, &dead));
	assert_int_equal(dead, 0);
}

static void test_hostile_geometry(void **state)
{
	struct shim_dev *dev = t_dev_open();
	struct shim_peer *live;
	struct shim_rcv_ctl *evil;
	struct shim_addr a;
	struct shim_ctx *c;
	struct t_geom v;
	unsigned int dead = 0;
	int go[2];
	pid_t pid;

	(void)state;
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
	shim_ctx_addr(c, &a);
	evil = t_ctl_map(&a);
	t_geom_get(evil, &v);

	const uint64_t hdrq_bytes = (uint64_t)T_HDRQ * sizeof(struct shim_rhq_entry);
	const uint64_t egr_end = v.egr_off + T_EGR;
	const uint64_t slot = sizeof(struct shim_claim);
	const uint32_t slots = SHIM_CLAIM_SLOTS;
	/* the owner's layout: the claim table, then the region table ends
	 * the segment */
	const uint64_t rgn_off = v.claim_off + slots * slot;
	assert_int_equal(v.claim_off, egr_end);
	assert_int_equal(rgn_off + SHIM_RGN_SLOTS * sizeof(struct shim_rgn), v.seg_size);
	const struct {
		const char *what;
		struct t_geom g;
		int want;
	} cases[] = {
		{"as the owner wrote it", v, 0},
		{"issue 28: claim_off 2^64 - 64 KiB, 1024 slots",
		 {v.hdrq_off, v.egr_off, v.seg_size, T_WRAP(65536), 1024}, -EPROTO},
		{"claim_off 2^64 - 64, 1 slot", {v.hdrq_off, v.egr_off, v.seg_size, T_WRAP(64), 1},
		 -EPROTO},
		{"no slots", {v.hdrq_off, v.egr_off, v.seg_size, v.claim_off, 0}, -EPROTO},
		{"one slot more than SHIM_CLAIM_SLOTS",
		 {v.hdrq_off, v.egr_off, v.seg_size, v.claim_off, slots + 1}, -EPROTO},
		{"2^32 - 1 slots", {v.hdrq_off, v.egr_off, v.seg_size, v.claim_off, UINT32_MAX},
		 -EPROTO},
		{"claim_off + 1", {v.hdrq_off, v.egr_off, v.seg_size, v.claim_off + 1, slots - 1},
		 -EPROTO},
		{"claim_off - 1", {v.hdrq_off, v.egr_off, v.seg_size, v.claim_off - 1, slots},
		 -EPROTO},
		{"claim_off half a slot on",
		 {v.hdrq_off, v.egr_off, v.seg_size, v.claim_off + slot / 2, slots - 1}, -EPROTO},
		{"claim table one slot into the eager ring",
		 {v.hdrq_off, v.egr_off, v.seg_size, egr_end - slot, slots}, -EPROTO},
		{"claim table over the eager ring",
		 {v.hdrq_off, v.egr_off, v.seg_size, v.egr_off, slots}, -EPROTO},
		{"claim table one slot past the end",
		 {v.hdrq_off, v.egr_off, v.seg_size, egr_end + slot, slots}, -EPROTO},
		{"claim table one slot shorter, ending at the end",
		 {v.hdrq_off, v.egr_off, v.seg_size, egr_end + slot, slots - 1}, 0},
		{"one slot, the last one before the region table",
		 {v.hdrq_off, v.egr_off, v.seg_size, rgn_off - slot, 1}, 0},
		{"one slot, the region table's first", {v.hdrq_off, v.egr_off, v.seg_size, rgn_off, 1},
		 -EPROTO},
		{"one slot at the end", {v.hdrq_off, v.egr_off, v.seg_size, v.seg_size, 1}, -EPROTO},
		{"seg_size one slot past the mapping",
		 {v.hdrq_off, v.egr_off, v.seg_size + slot, v.claim_off, slots}, -EPROTO},
		{"seg_size 2^64 - 1, claim_off 2^64 - 64 KiB",
		 {v.hdrq_off, v.egr_off, UINT64_MAX, T_WRAP(65536), 1024}, -EPROTO},
		{"hdrq_off wraps to 0", {T_WRAP(hdrq_bytes), v.egr_off, v.seg_size, v.claim_off, slots},
		 -EPROTO},
		{"egr_off wraps to 0", {v.hdrq_off, T_WRAP(T_EGR), v.seg_size, v.claim_off, slots},
		 -EPROTO},
		{"hdrq_off inside the control block", {0, v.egr_off, v.seg_size, v.claim_off, slots},
		 -EPROTO},
		{"eager ring over the header queue",
		 {v.hdrq_off, v.hdrq_off + hdrq_bytes - SHIM_BLOCK, v.seg_size, v.claim_off, slots},
		 -EPROTO},
	};

	/* Senders: refused, never a crash; the valid edges still work. */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int res;

		t_geom_set(evil, &cases[i].g);
		res = t_peer_try_child(dev, &a, cases[i].want);
		t_geom_set(evil, &v);
		if (res != T_PEER_OK)
			fail_msg("case '%s': sender %s %d (want open %d)", cases[i].what,
				 res >= 128 ? "killed by signal" : "got result bits", res & 127,
				 cases[i].want);
		assert_int_equal(t_drain_all(c), cases[i].want ? 0 : 1);
	}

	/* A sender checks one snapshot: the block flipping between the valid
	 * and the geometry while it opens never gets through. */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		double end = t_now() + 2.0;

		t_child_crash_plainly();
		for (int n = 0; n < 2000 && t_now() < end; n++) {
			struct shim_peer *p = NULL;
			int ret = shim_peer_open(dev, &a, &p);

			if (ret && ret != -EPROTO)
				_exit(1);
			if (!ret) {
				const uint8_t *base = (const uint8_t *)p->ctl;

				if ((const uint8_t *)p->claim < base ||
				    (const uint8_t *)(p->claim + 1) > base + p->map_len)
					_exit(2);
				shim_peer_close(p);
			}
		}
		_exit(0);
	}
	double end = t_now() + T_DEADLINE_S;
	pid_t w = 0;
	int st = 0;
	for (uint64_t n = 0; !w && t_now() < end; n++) {
		t_geom_set(evil, n & 1 ? &cases[1].g : &v);
		if (!(n % 64))
			w = waitpid(pid, &st, WNOHANG);
	}
	t_geom_set(evil, &v);
	if (!w)
		(void)t_wait(pid); /* past its alarm: reap it, fail below */
	assert_int_equal(w, pid);
	if (WIFSIGNALED(st))
		fail_msg("a sender died of signal %d while the block flipped", WTERMSIG(st));
	assert_int_equal(WEXITSTATUS(st), 0);

	/* The owner: a sender killed with a reservation open while the block
	 * says the claim table is elsewhere.  Its own geometry finds the
	 * claim, the hole is filled and the live sender's packet behind it
	 * arrives; a live sender's hole is waited for. */
	assert_int_equal(shim_peer_open(dev, &a, &live), 0);
	pid = t_reserver(&a, 2, 200, go);
	t_reserver_kill(pid, go);
	t_geom_set(evil, &cases[1].g);
	assert_int_equal(t_send1(live, 0x1e9), 0);
	assert_true(t_recv_tag(c, 0x1e9, &dead));
	assert_int_equal(dead, 2);
	assert_int_equal(atomic_load(&shim_ctx_rx(c)->ctl->holes_skipped), 2);
	t_live_hole_waits(c, live);
	/* the same with no slots at all, as far as the block says */
	t_geom_set(evil, &cases[3].g);
	t_live_hole_waits(c, live);
	t_geom_set(evil, &v);
	assert_int_equal(t_peer_try_child(dev, &a, 0), T_PEER_OK);
	assert_int_equal(t_drain_all(c), 1);

	shim_peer_close(live);
	munmap(evil, sizeof(*evil));
	shim_ctx_close(c);
	shim_dev_close(dev);
}

/* The owner tests the senders' claim locks on its own segment, not on
 * whatever its name opens now: with the name unlinked and taken by
 * another context, a live sender's hole is still waited for, and with
 * the name gone a dead sender's hole is still filled. */
static void test_hole_name_replaced(void **state)
{
	struct shim_dev *dev = t_dev_open();
	struct shim_peer *slow, *other;
	struct shim_ctx *c, *c2;
	struct shim_addr a, a2;
	char name[SHIM_NAME_MAX];
	unsigned int dead = 0;
	int go[2];
	pid_t pid;

	(void)state;
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
	shim_ctx_addr(c, &a);
	assert_int_equal(shim_peer_open(dev, &a, &slow), 0);
	assert_int_equal(shim_peer_open(dev, &a, &other), 0);
	pid = t_reserver(&a, 1, 100, go);
	t_track(pid);
	shim_name_segment(name, sizeof(name), a.uid, a.unit, a.ctx);
	assert_int_equal(shm_unlink(name), 0);
	t_cursor(dev, a.ctx);
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c2, NULL, NULL), 0);
	shim_ctx_addr(c2, &a2);
	assert_int_equal(a2.ctx, a.ctx); /* the name is another segment's now */

	t_live_hole_waits(c, slow);
	assert_int_equal(t_send1(other, 0x2e9), 0);
	assert_true(t_recv_tag(c, 0x2e9, &dead));
	assert_int_equal(dead, 0);

	shim_ctx_close(c2); /* and now no segment has the name */
	t_reserver_kill(pid, go);
	t_untrack(pid);
	assert_int_equal(t_send1(other, 0x3e9), 0);
	assert_true(t_recv_tag(c, 0x3e9, &dead));
	assert_int_equal(dead, 1);

	shim_peer_close(slow);
	shim_peer_close(other);
	shim_ctx_close(c);
	shim_dev_close(dev);
}

/* A child with a context on T_UNIT: reports its address on up, then
 * lives until dn closes (or it is killed). */
static pid_t t_ctx_child(struct shim_dev *dev, struct shim_addr *a, int *dn_w)
{
	int up[2], dn[2];
	pid_t pid;

	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(dn), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct pollfd pfd = {.fd = dn[0], .events = POLLIN};
		struct shim_ctx *c = NULL;

		close(up[0]);
		close(dn[1]);
		alarm(T_DEADLINE_S);
		memset(a, 0, sizeof(*a));
		if (shim_ctx_open(dev, T_UNIT, &c, NULL, NULL) == 0)
			shim_ctx_addr(c, a);
		if (write(up[1], a, sizeof(*a)) != (ssize_t)sizeof(*a))
			_exit(1);
		poll(&pfd, 1, T_DEADLINE_S * 1000);
		if (c)
			shim_ctx_close(c);
		_exit(0);
	}
	close(up[1]);
	close(dn[0]);
	assert_int_equal(read(up[0], a, sizeof(*a)), (ssize_t)sizeof(*a));
	close(up[0]);
	assert_int_not_equal(a->lid, 0); /* it has its context */
	*dn_w = dn[1];
	return pid;
}

/* How many segment names of our uid on T_UNIT /dev/shm holds. */
static unsigned int t_seg_count(void)
{
	char prefix[32];
	struct dirent *de;
	unsigned int n = 0;
	DIR *d = opendir("/dev/shm");

	assert_non_null(d);
	snprintf(prefix, sizeof(prefix), "opx.%u.%d.", (unsigned int)geteuid(), T_UNIT);
	while ((de = readdir(d)))
		n += !strncmp(de->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

static bool t_seg_exists(unsigned int ctx)
{
	char p[96];
	struct stat st;

	t_seg_path(p, sizeof(p), (uint32_t)geteuid(), ctx);
	return lstat(p, &st) == 0;
}

#define T_KILLED 4
/* Endpoints killed with their contexts open leave their segments; the
 * next open reclaims them all, even with a search that never passes
 * their names, and leaves the live ones (another process's, its own). */
static void test_sweep_killed(void **state)
{
	struct shim_addr dead[T_KILLED], live, mine, fresh;
	struct shim_dev *dev = t_dev_open();
	struct shim_ctx *c, *c2;
	struct shim_peer *peer;
	pid_t pid[T_KILLED], live_pid;
	int dn[T_KILLED], live_dn;
	unsigned int before, after, left = 0;
	uint64_t reclaimed;

	(void)state;
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c, NULL, NULL), 0);
	shim_ctx_addr(c, &mine);
	live_pid = t_ctx_child(dev, &live, &live_dn);
	t_track(live_pid);
	/* all open before any dies: each child's own open would sweep the
	 * ones killed before it */
	for (int i = 0; i < T_KILLED; i++)
		pid[i] = t_ctx_child(dev, &dead[i], &dn[i]);
	for (int i = 0; i < T_KILLED; i++) {
		int st = 0;

		assert_int_equal(kill(pid[i], SIGKILL), 0);
		assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
		assert_true(WIFSIGNALED(st));
		close(dn[i]);
		assert_true(t_seg_exists(dead[i].ctx)); /* left behind */
	}
	before = t_seg_count();
	reclaimed = atomic_load(&dev->stale_reclaimed);
	/* a free number to start from: the search itself passes no name */
	t_cursor(dev, t_free_number());
	assert_int_equal(shim_ctx_open(dev, T_UNIT, &c2, NULL, NULL), 0);
	shim_ctx_addr(c2, &fresh);
	after = t_seg_count();
	fprintf(stderr, "# unit %d segments: %u before the open, %u after\n", T_UNIT, before,
		after);
	for (int i = 0; i < T_KILLED; i++) {
		assert_int_not_equal(fresh.ctx, dead[i].ctx);
		left += t_seg_exists(dead[i].ctx);
	}
	assert_int_equal(left, 0);
	assert_true(atomic_load(&dev->stale_reclaimed) >= reclaimed + T_KILLED);
	/* the live ones stay, and stay usable */
	assert_true(t_seg_exists(live.ctx));
	assert_true(t_seg_exists(mine.ctx));
	assert_int_equal(shim_peer_open(dev, &live, &peer), 0);
	assert_true(shim_peer_alive(peer));
	shim_peer_close(peer);
	assert_int_equal(shim_peer_open(dev, &mine, &peer), 0);
	assert_true(shim_peer_alive(peer));
	shim_peer_close(peer);

	close(live_dn);
	assert_int_equal(t_wait(live_pid), 0);
	t_untrack(live_pid);
	shim_ctx_close(c2);
	shim_ctx_close(c);
	shim_dev_close(dev);
}

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
		cmocka_unit_test_teardown(test_pidns_liveness, t_teardown),
		cmocka_unit_test_teardown(test_dead_owner_lock, t_teardown),
		cmocka_unit_test_teardown(test_lockfile_symlink, t_teardown),
		cmocka_unit_test_teardown(test_squatted_names, t_teardown),
		cmocka_unit_test_teardown(test_all_names_squatted, t_teardown),
		cmocka_unit_test_teardown(test_lookalike_segment, t_teardown),
		cmocka_unit_test_teardown(test_wake_other_user, t_teardown),
		cmocka_unit_test_teardown(test_unit_limit, t_teardown),
		cmocka_unit_test_teardown(test_hostile_geometry, t_teardown),
		cmocka_unit_test_teardown(test_hole_name_replaced, t_teardown),
		cmocka_unit_test_teardown(test_sweep_killed, t_teardown),
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
	/* every context name of unit T_UNIT is squatted and filled here: a
	 * concurrent run of this test (another build tree's make check)
	 * waits for this one instead of meeting its names */
	if (fx_exclusive("trust-unit", 15 * 60 * 1000) < 0) {
		fprintf(stderr, "test_trust: another run held the unit for 15 minutes\n");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
