/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_shm.c - the send side of the shm wire: mapping a peer's receive
 * context (on this host, of our uid) as a PIO target, checking it is the
 * context the address names, telling whether its owner still lives, and
 * waking it when it sleeps.  Its operations are the shm wire's struct
 * shim_wire_ops (shim_peer.c calls them); the udp wire also opens one of
 * these on its own context, to deliver what it receives.
 *
 * Everything read from the peer's control block is validated against the
 * mapping before it is used to compute an address: the segment belongs
 * to another process and may be corrupt or from another ABI.  It is read
 * once, into a private snapshot that is checked and then used, because
 * any process of our uid can rewrite it between two reads.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim_internal.h"
#include "shim_trust.h"

static void shim_shm_put(struct shim_peer_priv *pp);
static bool shim_shm_alive(const struct shim_peer_priv *pp);
static void shim_shm_wake(struct shim_peer_priv *pp);

const struct shim_wire_ops shim_shm_wire = {
	.name = "shm",
	.put = shim_shm_put,
	.alive = shim_shm_alive,
	.wake = shim_shm_wake,
};

static bool shim_shm_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* Check the identity and geometry of a control block: s is our private
 * copy of it (shim_ctl_snapshot), ready the flag read with it, map_len
 * the size actually mapped.  Every range is checked with shim_range_ok,
 * so no offset near 2^64 can wrap a sum back into the mapping; the
 * counts are bounded first, so their products cannot overflow either. */
static int shim_shm_ctl_check(const struct shim_rcv_ctl *s, uint32_t ready, size_t map_len,
			      const struct shim_addr *addr, uint16_t jkey)
{
	uint64_t hdrq_bytes, egr_bytes, claim_bytes;

	if (s->magic != SHIM_CTL_MAGIC || (s->abi_version >> 16) != SHIM_ABI_MAJOR)
		return -EPROTO;
	if (!ready)
		return -EAGAIN; /* being created, or closed by its owner */
	if (s->nonce != addr->nonce)
		return -ESTALE; /* the number was reused by another context */
	if (s->ctx != addr->ctx || s->unit != addr->unit)
		return -EPROTO;
	if (s->jkey != jkey)
		return -EACCES; /* another job: refused before the first packet */
	if (!shim_shm_pow2(s->hdrq_cnt) || s->hdrq_cnt < 64 || s->hdrq_cnt > 65536 ||
	    !shim_shm_pow2(s->egr_blocks) || s->egr_blocks > SHIM_RHF_EGRIDX_MASK + 1u ||
	    s->mtu < SHIM_BLOCK || s->mtu > SHIM_MTU_MAX || s->mtu % SHIM_BLOCK)
		return -EPROTO;
	if (s->claim_cnt == 0 || s->claim_cnt > SHIM_CLAIM_SLOTS)
		return -EPROTO;
	hdrq_bytes = (uint64_t)s->hdrq_cnt * sizeof(struct shim_rhq_entry);
	egr_bytes = (uint64_t)s->egr_blocks * SHIM_BLOCK;
	claim_bytes = (uint64_t)s->claim_cnt * sizeof(struct shim_claim);
	/* in order: control block, header queue, eager ring, claim table */
	if (s->seg_size > map_len || s->hdrq_off % SHIM_BLOCK || s->egr_off % SHIM_BLOCK ||
	    s->claim_off % SHIM_BLOCK || s->hdrq_off < sizeof(*s) ||
	    !shim_range_ok(s->hdrq_off, hdrq_bytes, s->seg_size) ||
	    s->egr_off < s->hdrq_off + hdrq_bytes ||
	    !shim_range_ok(s->egr_off, egr_bytes, s->seg_size) ||
	    s->claim_off < s->egr_off + egr_bytes ||
	    !shim_range_ok(s->claim_off, claim_bytes, s->seg_size))
		return -EPROTO;
	/* a region table (minor 2) after the claim table, or none */
	if (s->rgn_cnt &&
	    (!shim_shm_pow2(s->rgn_cnt) || s->rgn_cnt > SHIM_RGN_SLOTS || s->rgn_off % SHIM_BLOCK ||
	     s->rgn_off < s->claim_off + claim_bytes ||
	     !shim_range_ok(s->rgn_off, (uint64_t)s->rgn_cnt * sizeof(struct shim_rgn),
			    s->seg_size)))
		return -EPROTO;
	return 0;
}

/* Record the owner's identity from the snapshot s, and only if the
 * process with that pid really started when the control block says: the
 * shared copy can change under us, a packet can say anything. */
static void shim_shm_owner_record(struct shim_peer_priv *pp, const struct shim_rcv_ctl *s)
{
	pid_t pid = (pid_t)s->owner_pid;
	uint64_t start = s->owner_start, now = 0;

	pp->owner_pid = 0;
	pp->owner_start = 0;
	pp->owner_pidfd = -1;
	if (pid <= 0 || !start || shim_dev_proc_starttime(pid, &now) || now != start)
		return; /* gone, recycled, or in another pid namespace */
	pp->owner_pid = pid;
	pp->owner_start = start;
	/* A pidfd names the process, not the number: once it is verified
	 * (same start time after the open as before it), "is it alive" is
	 * one cheap syscall around every copy instead of a /proc read, and a
	 * live process's pid cannot have been recycled. */
	pp->owner_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pp->owner_pidfd >= 0 && (shim_dev_proc_starttime(pid, &now) || now != start)) {
		close(pp->owner_pidfd);
		pp->owner_pidfd = -1;
		pp->owner_pid = 0; /* recycled in between: not the process we checked */
	}
}

int shim_shm_peer_open(struct shim_dev *dev, const struct shim_addr *addr,
		       struct shim_peer **peerp)
{
	char name[SHIM_NAME_MAX];
	struct shim_peer_priv *pp;
	struct shim_rcv_ctl *ctl, snap;
	struct shim_peer *p;
	struct stat st;
	uint32_t ready;
	size_t len;
	int fd, ret;

	if (!dev || !addr || !peerp)
		return -EINVAL;
	if (addr->host_id != dev->host_id)
		return -EHOSTUNREACH;
	if (addr->unit >= SHIM_MAX_UNITS || addr->ctx >= SHIM_MAX_CTXTS)
		return -EINVAL;
	if (addr->uid != (uint32_t)geteuid())
		return -EACCES; /* the trust boundary is the uid */
	ret = shim_dev_name_segment(name, sizeof(name), addr->uid, addr->unit, addr->ctx);
	if (ret)
		return ret;
	/* no symlink, a regular file of ours, 0600: checked on the fd */
	fd = shim_trust_seg_open_checked(name, &st);
	if (fd < 0)
		return fd;
	if (st.st_size == 0) {
		ret = -EAGAIN; /* created but not sized yet */
		goto err_close;
	}
	if ((size_t)st.st_size < SHIM_CTL_PAD) {
		ret = -EPROTO;
		goto err_close;
	}
	len = (size_t)st.st_size;
	/* Read-only until the control block checks out: a look-alike is
	 * never mapped writable.  From here on only the snapshot is read:
	 * what was checked is what is used. */
	ctl = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	if (ctl == MAP_FAILED) {
		ret = -errno;
		goto err_close;
	}
	ready = shim_ctl_snapshot(&snap, ctl);
	ret = shim_shm_ctl_check(&snap, ready, len, addr, dev->params.jkey);
	if (!ret && mprotect(ctl, len, PROT_READ | PROT_WRITE) < 0)
		ret = -errno;
	if (ret)
		goto err_unmap;
	shim_dev_prefault(ctl, len);

	pp = calloc(1, sizeof(*pp));
	if (!pp) {
		ret = -ENOMEM;
		goto err_unmap;
	}
	pp->dev = dev;
	pp->wire = &shim_shm_wire;
	pp->owner_lock = snap.flags & SHIM_CTL_F_OWNER_LOCK;
	pp->claim_off = snap.claim_off;
	pp->claim_cnt = snap.claim_cnt;
	pp->rgn_off = snap.rgn_off;
	pp->rgn_cnt = snap.rgn_cnt;
	pp->pub.ctl = ctl;
	shim_shm_owner_record(pp, &snap);
	/* the fd stays open: it holds the lock of our claim slot, and the
	 * owner's liveness lock is tested through it */
	ret = shim_claim_register(pp, fd);
	if (ret) {
		if (pp->owner_pidfd >= 0)
			close(pp->owner_pidfd);
		free(pp);
		goto err_unmap;
	}
	shim_dev_name_wake(&pp->wake_addr, &pp->wake_len, addr->uid, addr->unit, addr->ctx,
			   addr->nonce);
	p = &pp->pub;
	p->ctl = ctl;
	p->hdrq = (void *)((uint8_t *)ctl + snap.hdrq_off);
	p->egr = (uint8_t *)ctl + snap.egr_off;
	p->hdrq_cnt = snap.hdrq_cnt;
	p->egr_blocks = snap.egr_blocks;
	p->hdrq_mask = snap.hdrq_cnt - 1;
	p->egr_mask = snap.egr_blocks - 1;
	/* credits: positions, only ever compared modulo the ring sizes */
	p->hdr_credit_head = atomic_load_explicit(&ctl->hdr_head, memory_order_acquire);
	p->egr_credit_head = atomic_load_explicit(&ctl->egr_head, memory_order_acquire);
	p->mtu = snap.mtu;
	p->jkey = snap.jkey;
	p->lid = snap.lid;
	p->ctx = snap.ctx;
	p->addr = *addr;
	p->map_len = len;
	atomic_init(&p->refcnt, 1);
	*peerp = p;
	return 0;

err_unmap:
	munmap(ctl, len);
err_close:
	close(fd);
	return ret;
}

/* The last reference is gone (shim_peer_close): unmap and forget. */
static void shim_shm_put(struct shim_peer_priv *pp)
{
	shim_claim_unregister(pp); /* closes seg_fd */
	if (pp->owner_pidfd >= 0)
		close(pp->owner_pidfd);
	munmap(pp->pub.ctl, pp->pub.map_len);
	free(pp);
}

void shim_shm_peer_free(struct shim_peer *peer)
{
	if (peer && atomic_fetch_sub_explicit(&peer->refcnt, 1, memory_order_acq_rel) == 1)
		shim_shm_put((struct shim_peer_priv *)peer);
}

static bool shim_shm_alive(const struct shim_peer_priv *pp)
{
	const struct shim_rcv_ctl *ctl = pp->pub.ctl;

	/* a context closed by its owner will never be drained again */
	if (!atomic_load_explicit(&ctl->ready, memory_order_acquire))
		return false;
	/* The owner's lock on the segment, which the kernel drops when it
	 * dies: no pid involved, so PID namespaces cannot fool it.  An
	 * error means we cannot tell: alive. */
	if (pp->owner_lock)
		return shim_trust_seg_lock_probe(pp->seg_fd) != 0;
	return !shim_dev_proc_gone((pid_t)ctl->owner_pid, ctl->owner_start); /* older shim */
}

static void shim_shm_wake(struct shim_peer_priv *pp)
{
	const char byte = 0;

	/* Best effort: a full socket already holds a wake-up (EAGAIN), a
	 * vanished owner cannot be woken (ECONNREFUSED, ENOENT). */
	(void)sendto(pp->dev->wake_fd, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
		     (const struct sockaddr *)&pp->wake_addr, pp->wake_len);
}

void shim_shm_peer_wake(struct shim_peer *peer)
{
	shim_shm_wake((struct shim_peer_priv *)peer);
}

int shim_shm_jkey(struct shim_dev *dev, const struct shim_addr *addr, uint16_t *jkey,
		   uint8_t *src)
{
	char name[SHIM_NAME_MAX];
	const struct shim_rcv_ctl *ctl;
	struct shim_rcv_ctl snap;
	struct stat st;
	int fd, ret = 0;

	if (!dev || !addr || !jkey || !src || addr->unit >= SHIM_MAX_UNITS ||
	    addr->ctx >= SHIM_MAX_CTXTS)
		return -EINVAL;
	if (addr->uid != (uint32_t)geteuid())
		return -EACCES;
	ret = shim_dev_name_segment(name, sizeof(name), addr->uid, addr->unit, addr->ctx);
	if (ret)
		return ret;
	fd = shim_trust_seg_open_checked(name, &st);
	if (fd < 0)
		return fd;
	if ((size_t)st.st_size < sizeof(*ctl)) {
		close(fd);
		return -EPROTO;
	}
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (ctl == MAP_FAILED)
		return -errno;
	(void)shim_ctl_snapshot(&snap, ctl);
	munmap((void *)ctl, sizeof(*ctl));
	if (snap.magic != SHIM_CTL_MAGIC) {
		ret = -EPROTO;
	} else if (snap.nonce != addr->nonce) {
		ret = -ESTALE;
	} else {
		*jkey = snap.jkey;
		*src = snap.jkey_src;
	}
	return ret;
}
