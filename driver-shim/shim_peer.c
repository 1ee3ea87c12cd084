/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_peer.c - the send side of the shm wire: mapping a peer's receive
 * context as a PIO target, checking it is the context the address names,
 * and waking it when it sleeps.
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
#include <time.h>
#include <unistd.h>

#include "shim_internal.h"

static bool shim_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* Check the identity and geometry of a control block: s is our private
 * copy of it (shim_ctl_snapshot), ready the flag read with it, map_len
 * the size actually mapped.  Every range is checked with shim_range_ok,
 * so no offset near 2^64 can wrap a sum back into the mapping; the
 * counts are bounded first, so their products cannot overflow either. */
static int shim_peer_ctl_check(const struct shim_rcv_ctl *s, uint32_t ready, size_t map_len,
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
	if (!shim_pow2(s->hdrq_cnt) || s->hdrq_cnt < 64 || s->hdrq_cnt > 65536 ||
	    !shim_pow2(s->egr_blocks) || s->egr_blocks > SHIM_RHF_EGRIDX_MASK + 1u ||
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
	return 0;
}

/* Record the owner's identity from the snapshot s, and only if the
 * process with that pid really started when the control block says: the
 * shared copy can change under us, a packet can say anything. */
static void shim_peer_owner_record(struct shim_peer_priv *pp, const struct shim_rcv_ctl *s)
{
	pid_t pid = (pid_t)s->owner_pid;
	uint64_t start = s->owner_start, now = 0;

	pp->owner_pid = 0;
	pp->owner_start = 0;
	pp->owner_pidfd = -1;
	if (pid <= 0 || !start || shim_proc_starttime(pid, &now) || now != start)
		return; /* gone, recycled, or in another pid namespace */
	pp->owner_pid = pid;
	pp->owner_start = start;
	/* A pidfd names the process, not the number: once it is verified
	 * (same start time after the open as before it), "is it alive" is
	 * one cheap syscall around every copy instead of a /proc read, and a
	 * live process's pid cannot have been recycled. */
	pp->owner_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pp->owner_pidfd >= 0 && (shim_proc_starttime(pid, &now) || now != start)) {
		close(pp->owner_pidfd);
		pp->owner_pidfd = -1;
		pp->owner_pid = 0; /* recycled in between: not the process we checked */
	}
}

/*
 * How long a check that found the owner alive is trusted.  A pid is only
 * handed out again after the owner died *and* the kernel's cyclic pid
 * allocator came all the way round to it; neither dying nor a full turn
 * of the allocator fits in a millisecond, so within that window "alive a
 * moment ago" still means "this pid is that process".  Without the
 * window every rendezvous pull paid a syscall (about 1.2 us on these
 * virtual machines: 16 KiB latency was 20 % worse than before the check).
 */
#define SHIM_PEER_ALIVE_NS 1000000ull

static uint64_t shim_peer_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no syscall */
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The verified owner still runs: its pidfd, else (old kernels) its start
 * time in /proc; a positive answer is reused for SHIM_PEER_ALIVE_NS. */
static bool shim_peer_owner_running(const struct shim_peer_priv *pp)
{
	/* the cache is the only thing written through a const peer */
	struct shim_peer_priv *cache = (struct shim_peer_priv *)pp;
	uint64_t now = shim_peer_now_ns(), start = 0;
	bool alive;

	if (now - atomic_load_explicit(&pp->owner_seen_ns, memory_order_relaxed) <
	    SHIM_PEER_ALIVE_NS)
		return true;
	if (pp->owner_pidfd >= 0)
		alive = syscall(SYS_pidfd_send_signal, pp->owner_pidfd, 0, NULL, 0) == 0;
	else
		alive = !shim_proc_starttime(pp->owner_pid, &start) && start == pp->owner_start;
	if (alive)
		atomic_store_explicit(&cache->owner_seen_ns, now, memory_order_relaxed);
	return alive;
}

/* A peer on the udp wire has no process here to copy with, even when it
 * happens to run on this host (FI_OPX_WIRE=udp): nothing verified it, and
 * on another host its pid names some unrelated local process.  Its link
 * never records one (shim_udp_link_new); the wire check says so
 * explicitly, so no change there can make CMA reach a stranger. */
static bool shim_peer_cma_none(const struct shim_peer_priv *pp)
{
	return pp->pub.wire == SHIM_WIRE_UDP || !pp->owner_pid;
}

int shim_peer_cma_pid_recorded(const struct shim_peer *peer, pid_t *pid)
{
	const struct shim_peer_priv *pp = (const struct shim_peer_priv *)peer;

	if (!peer || !pid)
		return -EINVAL;
	if (shim_peer_cma_none(pp))
		return -ESRCH;
	*pid = pp->owner_pid;
	return 0;
}

int shim_peer_cma_pid(const struct shim_peer *peer, pid_t *pid)
{
	const struct shim_peer_priv *pp = (const struct shim_peer_priv *)peer;

	if (!peer || !pid)
		return -EINVAL;
	if (shim_peer_cma_none(pp) || !shim_peer_owner_running(pp))
		return -ESRCH;
	*pid = pp->owner_pid;
	return 0;
}

int shim_peer_open(struct shim_dev *dev, const struct shim_addr *addr, struct shim_peer **peerp)
{
	return shim_peer_open_via(dev, NULL, addr, peerp);
}

int shim_peer_open_via(struct shim_dev *dev, struct shim_ctx *via, const struct shim_addr *addr,
		       struct shim_peer **peerp)
{
	if (!dev || !addr || !peerp)
		return -EINVAL;
	if (addr->host_id != dev->host_id || dev->params.wire == SHIM_WIRE_UDP)
		return shim_udp_peer_open(dev, via && via->udp ? via : dev->udp_home, addr, peerp);
	return shim_peer_open_shm(dev, addr, peerp);
}

int shim_peer_open_shm(struct shim_dev *dev, const struct shim_addr *addr,
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
	ret = shim_name_segment(name, sizeof(name), addr->uid, addr->unit, addr->ctx);
	if (ret)
		return ret;
	/* no symlink, a regular file of ours, 0600: checked on the fd */
	fd = shim_seg_open_checked(name, &st);
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
	ret = shim_peer_ctl_check(&snap, ready, len, addr, dev->params.jkey);
	if (!ret && mprotect(ctl, len, PROT_READ | PROT_WRITE) < 0)
		ret = -errno;
	if (ret)
		goto err_unmap;
	shim_prefault(ctl, len);

	pp = calloc(1, sizeof(*pp));
	if (!pp) {
		ret = -ENOMEM;
		goto err_unmap;
	}
	pp->dev = dev;
	pp->owner_lock = snap.flags & SHIM_CTL_F_OWNER_LOCK;
	pp->claim_off = snap.claim_off;
	pp->claim_cnt = snap.claim_cnt;
	pp->pub.ctl = ctl;
	shim_peer_owner_record(pp, &snap);
	/* the fd stays open: it holds the lock of our claim slot, and the
	 * owner's liveness lock is tested through it */
	ret = shim_claim_register(pp, fd);
	if (ret) {
		if (pp->owner_pidfd >= 0)
			close(pp->owner_pidfd);
		free(pp);
		goto err_unmap;
	}
	shim_name_wake(&pp->wake_addr, &pp->wake_len, addr->uid, addr->unit, addr->ctx,
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

void shim_peer_close(struct shim_peer *peer)
{
	struct shim_peer_priv *pp;

	if (!peer)
		return;
	/* Shared peers (several AV entries naming one context, rendezvous
	 * still in flight) hold references taken with shim_peer_get(). */
	if (atomic_fetch_sub_explicit(&peer->refcnt, 1, memory_order_acq_rel) > 1)
		return;
	pp = (struct shim_peer_priv *)peer;
	if (pp->link) {
		shim_udp_peer_put(pp);
		return;
	}
	shim_claim_unregister(pp); /* closes seg_fd */
	if (pp->owner_pidfd >= 0)
		close(pp->owner_pidfd);
	munmap(peer->ctl, peer->map_len);
	free(pp);
}

struct shim_peer *shim_peer_get(struct shim_peer *peer)
{
	if (peer)
		atomic_fetch_add_explicit(&peer->refcnt, 1, memory_order_relaxed);
	return peer;
}

bool shim_peer_alive(const struct shim_peer *peer)
{
	const struct shim_peer_priv *pp = (const struct shim_peer_priv *)peer;
	const struct shim_rcv_ctl *ctl;

	if (!peer)
		return false;
	if (pp->link)
		return shim_udp_peer_alive(pp);
	ctl = peer->ctl;
	/* a context closed by its owner will never be drained again */
	if (!atomic_load_explicit(&ctl->ready, memory_order_acquire))
		return false;
	/* The owner's lock on the segment, which the kernel drops when it
	 * dies: no pid involved, so PID namespaces cannot fool it.  An
	 * error means we cannot tell: alive. */
	if (pp->owner_lock)
		return shim_seg_lock_probe(pp->seg_fd) != 0;
	return !shim_proc_gone((pid_t)ctl->owner_pid, ctl->owner_start); /* older shim */
}

int shim_peer_jkey(struct shim_dev *dev, const struct shim_addr *addr, uint16_t *jkey,
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
	ret = shim_name_segment(name, sizeof(name), addr->uid, addr->unit, addr->ctx);
	if (ret)
		return ret;
	fd = shim_seg_open_checked(name, &st);
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

void shim_peer_wake(struct shim_peer *peer)
{
	struct shim_peer_priv *pp = (struct shim_peer_priv *)peer;
	const char byte = 0;

	if (!peer)
		return;
	if (pp->link) {
		shim_udp_kick(pp); /* the udp wire transmits what was published */
		return;
	}
	/* Best effort: a full socket already holds a wake-up (EAGAIN), a
	 * vanished owner cannot be woken (ECONNREFUSED, ENOENT). */
	(void)sendto(pp->dev->wake_fd, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
		     (const struct sockaddr *)&pp->wake_addr, pp->wake_len);
}

const char *shim_strerror(int err)
{
	switch (err < 0 ? -err : err) {
	case 0:
		return "success";
	case EINVAL:
		return "invalid argument";
	case ENOMEM:
		return "out of memory";
	case EAGAIN:
		return "no credits or not ready: progress and retry";
	case EMSGSIZE:
		return "reservation larger than the ring";
	case EBUSY:
		return "all receive contexts of the unit are in use";
	case ENOENT:
		return "no such receive context";
	case ESTALE:
		return "receive context was reused (nonce mismatch)";
	case EPROTO:
		return "receive context has an incompatible or corrupt layout";
	case EHOSTUNREACH:
		return "peer is on another host";
	case EACCES:
	case EPERM:
		return "permission denied";
	case ENAMETOOLONG:
		return "name too long";
	case EUSERS:
		return "receive context has no free sender slot";
	default:
		return "unknown shim error";
	}
}
