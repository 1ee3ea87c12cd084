/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_trust.c - what the shim may believe on a host shared with other
 * users, other jobs and processes that crash.
 *
 * /dev/shm is world-writable (sticky), so any local user can plant a
 * symlink, a FIFO or a look-alike file at a name opx will use.  The rules:
 *
 *  - Nothing is opened through a symlink (O_NOFOLLOW; shm_open adds it
 *    too, we do not rely on that) and nothing that could block an open
 *    (O_NONBLOCK, so a planted FIFO cannot hang us).
 *  - A file is used only if fstat() on the open descriptor says it is a
 *    regular file (or, for the wake-up directory, a directory) owned by
 *    our euid with owner-only permissions.  The check is on the
 *    descriptor, not the name, so it cannot be raced.
 *  - Liveness is a lock, not a pid.  The owner of a receive context holds
 *    an OFD write lock on its segment for its whole life; the kernel
 *    drops it when the last descriptor of that open file goes away, i.e.
 *    when the owner (and any child it forked without exec) is gone.
 *    Pids are meaningless across PID namespaces that share /dev/shm.
 *
 * OFD locks rather than flock(): F_OFD_GETLK tests a lock without taking
 * it, so a peer's liveness check never makes a live context look busy to
 * someone else, and it is one syscall.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim_internal.h"
#include "shim_trust.h"

void shim_trust_warn(const struct shim_dev *dev, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (!dev || !dev->params.warn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	dev->params.warn(msg);
}

int shim_trust_seg_check(int fd, struct stat *st)
{
	struct stat tmp;

	if (!st)
		st = &tmp;
	if (fstat(fd, st) < 0)
		return -errno;
	if (!S_ISREG(st->st_mode) || st->st_uid != geteuid() || (st->st_mode & 07777) != 0600)
		return -EACCES;
	return 0;
}

int shim_trust_seg_open_checked(const char *name, struct stat *st)
{
	int fd, ret;

	fd = shm_open(name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
	if (fd < 0)
		return errno == ELOOP ? -EACCES : -errno; /* ELOOP: a symlink */
	ret = shim_trust_seg_check(fd, st);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

static void shim_trust_seg_flock_init(struct flock *fl)
{
	memset(fl, 0, sizeof(*fl));
	fl->l_type = F_WRLCK;
	fl->l_whence = SEEK_SET;
	fl->l_start = 0;
	fl->l_len = 1; /* byte 0 only: senders lock their claim slots' bytes */
	fl->l_pid = 0; /* required for OFD locks */
}

/* Never F_OFD_SETLKW: whoever holds a lock we want, we do not wait on it. */
int shim_trust_seg_lock(int fd)
{
	struct flock fl;

	shim_trust_seg_flock_init(&fl);
	if (fcntl(fd, F_OFD_SETLK, &fl) < 0)
		return errno == EACCES || errno == EAGAIN ? -EAGAIN : -errno;
	return 0;
}

int shim_trust_seg_lock_probe(int fd)
{
	struct flock fl;

	shim_trust_seg_flock_init(&fl);
	if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
		return -errno;
	return fl.l_type != F_UNLCK;
}

int shim_trust_wake_dir_check(uint32_t uid)
{
	char dir[SHIM_NAME_MAX];
	struct stat st;
	int fd, ret = 0;

	shim_dev_name_wake_dir(dir, sizeof(dir), uid);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP || errno == ENOTDIR ? -EACCES : -errno;
	if (fstat(fd, &st) < 0)
		ret = -errno;
	else if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		ret = -EACCES;
	else if ((st.st_mode & 07777) != 0700 && fchmod(fd, 0700) < 0)
		ret = -EACCES; /* ours, but the umask or someone widened it */
	close(fd);
	return ret;
}
