/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_rgn.c - one-sided copies a peer makes by itself: the region table
 * of a receive context (struct shim_rgn, shim_rgn.h) and the Cross Memory
 * Attach copy into or out of a region it names.
 *
 * Owner.  shim_rgn_publish() puts a region in the first free slot of
 * its key's probe sequence (SHIM_RGN_PROBE slots from a hash of the key);
 * a key whose slots are all taken is not published, and peers then use
 * the owner's progress as before.  shim_rgn_retract() takes it out and
 * returns only when no peer can still be copying into or out of it, so the
 * owner may give the memory back as soon as it returns:
 *
 *   owner (retract)                       peer (copy)
 *   seq = old + 1            (seq_cst)    s = seq; entry copied; seq == s
 *                                         rgn_busy = (slot + 1, s) (seq_cst)
 *   for each claim slot:                  seq == s again?      (seq_cst)
 *     while rgn_busy == (slot + 1, old)     no: rgn_busy = 0, no copy
 *       and its holder is alive: wait       yes: copy, then rgn_busy = 0
 *
 * Both sides store, then load the other's word, all sequentially
 * consistent: at least one of them sees the other's store, so either the
 * peer does not copy or the owner waits for the copy to end.  The wait is
 * bounded by the holder's liveness (the kernel drops a dead holder's lock)
 * and by SHIM_RGN_WAIT_NS; a copy is one system call, so a live holder
 * normally clears its word within microseconds.  Only a process of the
 * same uid can hold a claim slot, and it could copy into the owner with
 * CMA anyway: the wait protects the owner from an honest peer racing a
 * close, not from a hostile one.
 *
 * Peer.  The entry is read between two equal even reads of its seq,
 * copied once, and only the copy is checked and used: the offset and
 * length inside the region (without overflow) and the access.  The copy
 * goes to the process the shim verified behind the peer (shim_peer.c),
 * never to a pid read from shared memory, and that process is checked to
 * be the same one after the copy.  Anything short of a whole copy returns
 * an error and the caller sends the operation through the owner instead,
 * which gives it the owner's verdict (and writes it again, whole).
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <time.h>

#include "shim_internal.h"
#include "shim_trust.h"

#define SHIM_RGN_WAIT_NS (10ull * 1000000000ull) /* a copy that never ends */

static inline uint32_t shim_rgn_hash(uint64_t key)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 40);
}

static struct shim_rgn *shim_rgn_table(const struct shim_ctx *ctx)
{
	return (struct shim_rgn *)((uint8_t *)ctx->map + ctx->rgn_off);
}

/* The owner's slot of key: its index, or -1 (and *free_slot the first
 * free one of its probe sequence, -1 when none). */
static int shim_rgn_find(const struct shim_ctx *ctx, uint64_t key, int *free_slot)
{
	uint32_t mask = ctx->rgn_cnt - 1, h = shim_rgn_hash(key);

	*free_slot = -1;
	for (uint32_t i = 0; i < SHIM_RGN_PROBE && i < ctx->rgn_cnt; i++) {
		uint32_t j = (h + i) & mask;
		bool valid = ctx->rgn_seq[j] && !(ctx->rgn_seq[j] & 1u);

		if (valid && ctx->rgn_key[j] == key)
			return (int)j;
		if (!valid && *free_slot < 0)
			*free_slot = (int)j;
	}
	return -1;
}

int shim_rgn_publish(struct shim_ctx *ctx, uint64_t key, uint64_t raddr, const void *base,
		     uint64_t len, uint32_t access)
{
	struct shim_rgn *e;
	uint32_t seq;
	int slot;

	if (!ctx || !len || !access || (access & ~(SHIM_RGN_READ | SHIM_RGN_WRITE)))
		return -EINVAL;
	if (!ctx->rgn_cnt)
		return -ENOSPC;
	if (shim_rgn_find(ctx, key, &slot) >= 0)
		return -EEXIST;
	if (slot < 0)
		return -ENOSPC;
	e = &shim_rgn_table(ctx)[slot];
	seq = ctx->rgn_seq[slot] | 1u; /* odd: being changed (0 the first time) */
	atomic_store_explicit(&e->seq, seq, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&e->access, access, memory_order_relaxed);
	atomic_store_explicit(&e->key, key, memory_order_relaxed);
	atomic_store_explicit(&e->raddr, raddr, memory_order_relaxed);
	atomic_store_explicit(&e->vaddr, (uint64_t)(uintptr_t)base, memory_order_relaxed);
	atomic_store_explicit(&e->len, len, memory_order_relaxed);
	seq += 1u;
	if (!seq)
		seq = 2u; /* after 2^32 changes of one slot: never 0 */
	atomic_store_explicit(&e->seq, seq, memory_order_release);
	ctx->rgn_key[slot] = key;
	ctx->rgn_seq[slot] = seq;
	return 0;
}

int shim_rgn_retract(struct shim_ctx *ctx, uint64_t key)
{
	struct shim_claim *tab;
	struct shim_rgn *e;
	uint64_t busy, deadline = 0;
	uint32_t old;
	int slot, unused;

	if (!ctx)
		return -EINVAL;
	if (!ctx->rgn_cnt || (slot = shim_rgn_find(ctx, key, &unused)) < 0)
		return -ENOENT;
	e = &shim_rgn_table(ctx)[slot];
	old = ctx->rgn_seq[slot];
	ctx->rgn_seq[slot] = old + 1u;
	atomic_store_explicit(&e->seq, old + 1u, memory_order_seq_cst);
	busy = ((uint64_t)(slot + 1) << 32) | old;
	tab = shim_claim_slots(ctx);
	for (uint32_t i = 0; i < ctx->claim_cnt; i++) {
		unsigned int spins = 0;

		while (atomic_load_explicit(&tab[i].rgn_busy, memory_order_seq_cst) == busy) {
			uint64_t now;

			if (++spins < 64)
				continue;
			now = shim_now_ns();
			if (!deadline)
				deadline = now + SHIM_RGN_WAIT_NS;
			if (!shim_claim_alive(ctx, i))
				break; /* its holder is gone, and its copy with it */
			if (now >= deadline) {
				shim_trust_warn(
					ctx->dev,
					"a peer copying with region key 0x%llx did not finish in "
					"%llu s: retracted anyway\n",
					(unsigned long long)key,
					(unsigned long long)(SHIM_RGN_WAIT_NS / 1000000000ull));
				return -ETIMEDOUT;
			}
			sched_yield();
		}
	}
	return 0;
}

static uint32_t shim_rgn_now_ms(void)
{
	return (uint32_t)(shim_now_ns() / 1000000ull);
}

bool shim_rgn_owner_polling(const struct shim_peer *peer, uint32_t within_ms)
{
	const struct shim_peer_priv *pp = (const struct shim_peer_priv *)peer;
	uint32_t then;

	if (!peer || peer->wire == SHIM_WIRE_UDP || !pp->rgn_cnt)
		return true;
	if (atomic_load_explicit(&peer->ctl->sleeping, memory_order_relaxed))
		return false;
	then = atomic_load_explicit(&peer->ctl->polled_ms, memory_order_relaxed);
	/* modulo 2^32: a value from the future (another writer) counts as now */
	return (int32_t)(shim_rgn_now_ms() - then) <= (int32_t)within_ms;
}

/* A peer's private copy of a region table entry. */
struct shim_rgn_view {
	uint32_t access;
	uint64_t raddr, vaddr, len;
};

/* The peer's region table entry of key, copied into *out between two equal
 * even reads of its seq: its slot, or -1 when none is published. */
static int shim_rgn_peer_lookup(const struct shim_peer_priv *pp, uint64_t key,
				struct shim_rgn_view *out, uint32_t *seqp)
{
	const struct shim_rgn *tab =
		(const struct shim_rgn *)((const uint8_t *)pp->pub.ctl + pp->rgn_off);
	uint32_t mask = pp->rgn_cnt - 1, h = shim_rgn_hash(key);

	for (uint32_t i = 0; i < SHIM_RGN_PROBE && i < pp->rgn_cnt; i++) {
		const struct shim_rgn *e = &tab[(h + i) & mask];

		for (int tries = 0; tries < 4; tries++) {
			uint32_t s1 = atomic_load_explicit(&e->seq, memory_order_acquire);
			uint64_t k;

			if (!s1 || (s1 & 1u))
				break; /* empty, or being changed: not this one now */
			k = atomic_load_explicit(&e->key, memory_order_relaxed);
			out->access = atomic_load_explicit(&e->access, memory_order_relaxed);
			out->raddr = atomic_load_explicit(&e->raddr, memory_order_relaxed);
			out->vaddr = atomic_load_explicit(&e->vaddr, memory_order_relaxed);
			out->len = atomic_load_explicit(&e->len, memory_order_relaxed);
			atomic_thread_fence(memory_order_acquire);
			if (atomic_load_explicit(&e->seq, memory_order_relaxed) != s1)
				continue; /* changed while we read it */
			if (k != key)
				break;
			*seqp = s1;
			return (int)((h + i) & mask);
		}
	}
	return -1;
}

ssize_t shim_rgn_peer_copy(struct shim_peer *peer, uint64_t key, uint64_t raddr,
			   const struct iovec *liov, size_t lcnt, size_t len, bool write)
{
	struct shim_peer_priv *pp = (struct shim_peer_priv *)peer;
	const struct shim_rgn *tab;
	struct shim_rgn_view e;
	struct iovec riov;
	uint64_t off, busy;
	uint32_t seq;
	pid_t pid, again;
	ssize_t n;
	int slot;

	if (!peer || (lcnt && !liov) || lcnt > IOV_MAX)
		return -EINVAL;
	if (!pp->rgn_cnt || !peer->claim)
		return -ENOENT; /* no table (another minor), or no slot to say we copy */
	if (shim_peer_cma_pid(peer, &pid))
		return -ESRCH; /* no verified process: the udp wire, another pid namespace */
	slot = shim_rgn_peer_lookup(pp, key, &e, &seq);
	if (slot < 0)
		return -ENOENT;
	/* the copy is checked, overflow-safe, the offset first */
	if (!(e.access & (write ? SHIM_RGN_WRITE : SHIM_RGN_READ)))
		return -EACCES;
	if (raddr < e.raddr)
		return -ERANGE;
	off = raddr - e.raddr;
	if (off > e.len || len > e.len - off || e.vaddr > UINT64_MAX - e.len)
		return -ERANGE;
	if (!len)
		return 0;
	riov.iov_base = (void *)(uintptr_t)(e.vaddr + off);
	riov.iov_len = len;

	busy = ((uint64_t)(slot + 1) << 32) | seq;
	tab = (const struct shim_rgn *)((const uint8_t *)peer->ctl + pp->rgn_off);
	atomic_store_explicit(&peer->claim->rgn_busy, busy, memory_order_seq_cst);
	if (atomic_load_explicit(&tab[slot].seq, memory_order_seq_cst) != seq) {
		atomic_store_explicit(&peer->claim->rgn_busy, 0, memory_order_release);
		return -EAGAIN; /* retracted meanwhile */
	}
	n = write ? process_vm_writev(pid, liov, (unsigned long)lcnt, &riov, 1, 0)
		  : process_vm_readv(pid, liov, (unsigned long)lcnt, &riov, 1, 0);
	atomic_store_explicit(&peer->claim->rgn_busy, 0, memory_order_release);
	if (n < 0)
		return -errno;
	/* the pid still names the process verified at open */
	if (shim_peer_cma_pid(peer, &again) || again != pid)
		return -ESRCH;
	return (size_t)n == len ? n : -EFAULT;
}
