/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * test_trust.c - the shim's trust rules (driver-shim/shim_trust.c, with
 * the context names of shim_ctx.c) on a host shared with other users,
 * other PID namespaces and crashing processes: liveness by the owner's
 * lock across PID namespaces and after the owner died, squatted context
 * names (some or all of a unit's) and a symlinked or held lock file,
 * look-alike segments that are not used, another user's wake-up
 * datagrams ignored, and a unit filled with contexts.  Hostile control
 * blocks and killed contexts: test_trust_shm; jobs through the provider:
 * test_trust_job.
 *
 * The hostile neighbour is this test itself in a forked child that drops
 * to another uid (setresuid, so no account has to exist); those tests
 * are skipped, with the reason, when we are not root.  Shim tests use
 * unit 5 of 8 (test_shim uses 7, test_sdma 6, the provider 0).  Every
 * operation that could hang on the old code runs in a child under
 * alarm(), every loop is bounded in count and time.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "trust_fixture.h"
#include "../../driver-shim/shim_trust.h"

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
		shim_dev_name_wake(&sun, &len, a.uid, a.unit, a.ctx, a.nonce);
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

	shim_dev_name_wake_dir(dir, sizeof(dir), fake_uid);
	(void)rmdir(dir);
	t_squat_start(&s);
	pid = t_squat_fork(&s);
	if (pid == 0)
		t_squat_hold(&s, mkdir(dir, 0777) ? 1 : 0);
	assert_int_equal(t_squat_wait(&s), 0);
	assert_int_equal(shim_trust_wake_dir_check(fake_uid), -EACCES);
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

int main(void)
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
	};

	signal(SIGPIPE, SIG_IGN);
	/* every context name of unit T_UNIT is squatted and filled here: a
	 * concurrent run of this test or of the other trust suites (another
	 * build tree's make check, or this one's in parallel) waits for this
	 * one instead of meeting its names */
	if (fx_exclusive("trust-unit", 15 * 60 * 1000) < 0) {
		fprintf(stderr, "test_trust: another run held the unit for 15 minutes\n");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
