/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_trust.h - the trust checks of shim_trust.c, private to driver-shim/
 * like shim_internal.h.
 */
#ifndef SHIM_TRUST_H
#define SHIM_TRUST_H

#include <stdint.h>
#include <sys/stat.h>

#include "shim_internal.h"

/* Trust on a shared host (shim_trust.c).  Everything opx opens in
 * /dev/shm goes through these: never through a symlink, never a file
 * another uid owns, and liveness from a lock rather than a pid. */
void shim_trust_warn(const struct shim_dev *dev, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Open an existing segment read-write without following a symlink and
 * check it: a regular file of our euid, mode 0600.  fd or -errno
 * (-EACCES for a file that is not ours). */
int shim_trust_seg_open_checked(const char *name, struct stat *st);
int shim_trust_seg_check(int fd, struct stat *st);
/* The owner's liveness lock: take it without waiting (0, -EAGAIN when
 * held through another open file, -errno), or test it without taking it
 * (1 held elsewhere, 0 free, -errno). */
int shim_trust_seg_lock(int fd);
int shim_trust_seg_lock_probe(int fd);
/* The per-uid 0700 directory holding wake-up sockets: created if
 * missing, refused (-EACCES) if a symlink, not a directory, or not ours. */
int shim_trust_wake_dir_check(uint32_t uid);

#endif /* SHIM_TRUST_H */
