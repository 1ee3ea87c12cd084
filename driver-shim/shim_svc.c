/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_svc.c - the service registry (this host's IPv4 identity is
 * shim_dev.c's).
 *
 * fi_getinfo(node, service) names an endpoint the way IP does: a host
 * and a port.  On the shm wire there is no socket to bind, so the port is
 * a name in a registry: the file /dev/shm/opx.<uid>.svc.<host>.<port>
 * holds the full struct shim_addr of the endpoint that serves <port> for
 * <uid> on this host.  The udp wire binds the same port on a real socket
 * and keeps the registry for same-host peers, so addresses carry ipv4 and
 * udp_port.  <host> is the host id (boot id and network namespace, in
 * hex): ports belong to a network namespace, and namespaces that share
 * /dev/shm (hosts made of namespaces, containers) each have their own
 * port space, so one namespace's entry never hides or takes another's.
 *
 * Trust: the file is created mode 0600 and never opened through a
 * symlink; a reader checks it is a regular file of our uid, mode 0600,
 * of exactly one address, so another user can neither plant an entry nor
 * make us follow a link.  A claim publishes atomically: the address is
 * written to a private temporary file that is link()ed to the final name
 * (fails if the name exists).  An existing entry whose endpoint is gone
 * (no such context any more, or its owner died) is reclaimed by
 * rename(), which replaces it atomically; the claimer then reads the
 * entry back, so of two processes reclaiming at once exactly one keeps
 * it and the other gets -EADDRINUSE.  A release removes the entry only
 * while it still names the releasing endpoint.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim_internal.h"

#define SHIM_SVC_DIR "/dev/shm"
#define SHIM_SVC_PATH_MAX 96
/* Reclaims of a dead holder's entry before giving up (a live process
 * recreating the name between our steps is the only way to loop). */
#define SHIM_SVC_TRIES 4

static int shim_svc_path(char *buf, size_t len, const struct shim_dev *dev, uint16_t port)
{
	int n = snprintf(buf, len, SHIM_SVC_DIR "/opx.%u.svc.%" PRIx64 ".%u", (unsigned)geteuid(),
			 dev->host_id, (unsigned)port);

	return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

/* Read and check an entry: -ENOENT when there is none, -EPERM when it is
 * not a file we would have written (owner, mode, type, size). */
static int shim_svc_read(const char *path, struct shim_addr *out)
{
	struct stat st;
	ssize_t n;
	int fd, ret = 0;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return errno == ELOOP ? -EPERM : -errno;
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0777) != 0600 ||
	    st.st_size != (off_t)sizeof(*out)) {
		ret = -EPERM;
		goto out;
	}
	n = pread(fd, out, sizeof(*out), 0);
	if (n != (ssize_t)sizeof(*out))
		ret = n < 0 ? -errno : -EPERM;
out:
	close(fd);
	return ret;
}

/* Whether the endpoint an entry names still exists and its owner runs:
 * asked of its receive context on this host (pid and start time), also
 * when the endpoint speaks the udp wire, whose peer would only say that
 * it was not declared dead yet (a udp endpoint killed at a fixed port
 * kept it taken for good, and its restart got -EADDRINUSE). */
static bool shim_svc_live(struct shim_dev *dev, const struct shim_addr *a)
{
	struct shim_peer *p;
	bool live;
	int ret;

	if (a->host_id != dev->host_id || a->uid != (uint32_t)geteuid())
		return false; /* written in another boot or namespace */
	ret = shim_shm_peer_open(dev, a, &p);
	if (ret == -EAGAIN)
		return true; /* being created: not ours to take */
	if (ret)
		return false;
	live = shim_peer_alive(p);
	shim_peer_close(p);
	return live;
}

/* A private temporary file holding addr, mode 0600. */
static int shim_svc_tmp(char *tmp, size_t len, const struct shim_addr *addr)
{
	int fd, n;

	n = snprintf(tmp, len, SHIM_SVC_DIR "/opx.%u.svc.tmp.XXXXXX", (unsigned)geteuid());
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	fd = mkstemp(tmp); /* O_CREAT | O_EXCL, mode 0600 */
	if (fd < 0)
		return -errno;
	if (fchmod(fd, 0600) < 0 || write(fd, addr, sizeof(*addr)) != (ssize_t)sizeof(*addr)) {
		int ret = errno ? -errno : -EIO;

		close(fd);
		unlink(tmp);
		return ret;
	}
	close(fd);
	return 0;
}

int shim_svc_claim(struct shim_dev *dev, uint16_t port, const struct shim_addr *addr)
{
	char path[SHIM_SVC_PATH_MAX], tmp[SHIM_SVC_PATH_MAX];
	struct shim_addr cur;
	int ret;

	if (!dev || !addr || !port)
		return -EINVAL;
	ret = shim_svc_path(path, sizeof(path), dev, port);
	if (ret)
		return ret;
	ret = shim_svc_tmp(tmp, sizeof(tmp), addr);
	if (ret)
		return ret;
	for (int i = 0; i < SHIM_SVC_TRIES; i++) {
		if (link(tmp, path) == 0) {
			ret = 0;
			break;
		}
		if (errno != EEXIST) {
			ret = -errno;
			break;
		}
		ret = shim_svc_read(path, &cur);
		if (ret == -ENOENT)
			continue; /* released meanwhile: try again */
		if (ret || shim_svc_live(dev, &cur)) {
			/* a live holder, or not an entry we wrote (never
			 * replaced: it is not ours to judge) */
			ret = -EADDRINUSE;
			break;
		}
		/* the holder is gone: take the name over atomically */
		if (rename(tmp, path) < 0) {
			ret = -errno;
			break;
		}
		ret = shim_svc_read(path, &cur);
		if (ret == 0 && memcmp(&cur, addr, sizeof(cur)))
			ret = -EADDRINUSE; /* another reclaimer's rename came last */
		return ret;
	}
	unlink(tmp);
	return ret;
}

void shim_svc_release(struct shim_dev *dev, uint16_t port, const struct shim_addr *addr)
{
	char path[SHIM_SVC_PATH_MAX];
	struct shim_addr cur;

	if (!dev || !addr || !port || shim_svc_path(path, sizeof(path), dev, port))
		return;
	if (shim_svc_read(path, &cur) == 0 && !memcmp(&cur, addr, sizeof(cur)))
		unlink(path);
}

int shim_svc_lookup(struct shim_dev *dev, uint16_t port, struct shim_addr *addr)
{
	char path[SHIM_SVC_PATH_MAX];
	struct shim_addr cur;
	int ret;

	if (!dev || !addr || !port)
		return -EINVAL;
	ret = shim_svc_path(path, sizeof(path), dev, port);
	if (ret)
		return ret;
	ret = shim_svc_read(path, &cur);
	if (ret)
		return ret == -EPERM ? -EACCES : ret;
	if (!shim_svc_live(dev, &cur))
		return -ENOENT; /* a dead holder serves nothing */
	*addr = cur;
	return 0;
}

/* ---------------------------------------------------------------------
 * The address of a context, from its control block.
 */
int shim_svc_addr_lookup(struct shim_dev *dev, uint16_t lid, uint16_t ctx, struct shim_addr *addr)
{
	char name[SHIM_NAME_MAX];
	const struct shim_rcv_ctl *ctl;
	struct shim_rcv_ctl s;
	struct stat st;
	uint32_t ready;
	int unit = -1, fd, ret;

	if (!dev || !addr || ctx >= SHIM_MAX_CTXTS)
		return -EINVAL;
	for (int i = 0; i < dev->num_units; i++) {
		if (dev->units[i].lid == lid)
			unit = i;
	}
	if (unit < 0)
		return -ENOENT;
	ret = shim_dev_name_segment(name, sizeof(name), (uint32_t)geteuid(), (unsigned)unit, ctx);
	if (ret)
		return ret;
	fd = shm_open(name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (size_t)st.st_size < SHIM_CTL_PAD) {
		close(fd);
		return -ENOENT;
	}
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (ctl == MAP_FAILED)
		return -errno;
	ready = shim_ctl_snapshot(&s, ctl); /* one read of what a peer can rewrite */
	munmap((void *)ctl, sizeof(*ctl));
	ret = -ENOENT;
	if (s.magic == SHIM_CTL_MAGIC && (s.abi_version >> 16) == SHIM_ABI_MAJOR && ready &&
	    s.lid == lid && s.ctx == ctx && s.unit == unit) {
		memset(addr, 0, sizeof(*addr));
		addr->host_id = dev->host_id;
		addr->lid = lid;
		addr->ctx = ctx;
		addr->unit = (uint8_t)unit;
		addr->nonce = s.nonce;
		addr->uid = (uint32_t)geteuid();
		addr->pid = s.owner_pid;
		ret = 0;
	}
	return ret;
}
