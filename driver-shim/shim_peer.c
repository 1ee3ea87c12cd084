/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_peer.c - a peer: a receive context we send to, on whichever wire
 * reaches it.  Opening chooses the wire (the shm wire, shim_shm.c, for a
 * context of this host and uid; the udp wire, shim_udp.c, otherwise or
 * when FI_OPX_WIRE=udp says so) and the peer keeps that wire's operations
 * (struct shim_wire_ops: wake, alive, put); closing, liveness and wake-ups
 * go through them, so this file sits above both wires and neither calls
 * back into it.  It also answers whether, and to which verified process,
 * a peer may be copied with CMA.
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

/* The verified owner still runs: its pidfd, else (old kernels) its start
 * time in /proc; a positive answer is reused for SHIM_PEER_ALIVE_NS. */
static bool shim_peer_owner_running(const struct shim_peer_priv *pp)
{
	/* the cache is the only thing written through a const peer */
	struct shim_peer_priv *cache = (struct shim_peer_priv *)pp;
	uint64_t now = shim_now_ns(), start = 0;
	bool alive;

	if (now - atomic_load_explicit(&pp->owner_seen_ns, memory_order_relaxed) <
	    SHIM_PEER_ALIVE_NS)
		return true;
	if (pp->owner_pidfd >= 0)
		alive = syscall(SYS_pidfd_send_signal, pp->owner_pidfd, 0, NULL, 0) == 0;
	else
		alive = !shim_dev_proc_starttime(pp->owner_pid, &start) && start == pp->owner_start;
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
	return shim_shm_peer_open(dev, addr, peerp);
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
	pp->wire->put(pp);
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

	return peer && pp->wire->alive(pp);
}

void shim_peer_wake(struct shim_peer *peer)
{
	struct shim_peer_priv *pp = (struct shim_peer_priv *)peer;

	if (peer)
		pp->wire->wake(pp);
}
