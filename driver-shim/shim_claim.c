/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_claim.c - senders that die in the middle of a reservation.
 *
 * Senders reserve header entries (and eager blocks) in a receive context
 * with one compare-and-swap on ctl->tail, then write and publish them.  A
 * sender killed in between leaves a hole at the consumer's head that no
 * one will ever publish: every later packet queues behind it and every
 * other sender runs out of credits.  This file lets the consumer find out
 * who claimed the hole and whether that process still exists, and fill
 * the hole itself when it does not (the protocol is described at the top
 * of shim_abi.h).
 *
 * Liveness is the kernel's word, not a pid: each registered sender holds
 * an open-file-description (OFD) write lock on one byte of the receiver's
 * segment, the byte at its claim slot.  The kernel drops the lock when
 * the last descriptor of that open file goes away, i.e. when the sender
 * closed the peer or died, in whatever pid namespace it lived.  A forked
 * child shares its parent's open file, so the slot stays "alive" while
 * either runs, which errs on the side of waiting.
 *
 * Lock map of a segment: claim slot i is byte claim_off + 64 * i (inside
 * the claim table, past the rings).  Any other lock on the segment (an
 * owner-liveness lock, say) must not cover those bytes, or registering
 * would find every slot taken and a dead owner would look alive.
 *
 * The consumer only looks after a grace period (SHIM_HOLE_GRACE_NS) and
 * then at most every SHIM_HOLE_RECHECK_NS, from the idle path: nothing
 * here runs while packets flow.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shim_internal.h"

#define SHIM_CLAIM_HELD 1u

/* The table at claim_off of a mapping: claim_off is the owner's private
 * copy or a sender's checked snapshot, never ctl->claim_off itself. */
static struct shim_claim *shim_claim_table(void *map, uint64_t claim_off)
{
	return (struct shim_claim *)((uint8_t *)map + claim_off);
}

/* One OFD lock command on the byte of slot i.  F_OFD_* need l_pid = 0. */
static int shim_claim_lockop(int fd, uint64_t claim_off, uint32_t i, int cmd, short type,
			     short *found)
{
	struct flock fl;

	memset(&fl, 0, sizeof(fl));
	fl.l_type = type;
	fl.l_whence = SEEK_SET;
	fl.l_start = shim_claim_lock_off(claim_off, i);
	fl.l_len = 1;
	if (fcntl(fd, cmd, &fl) < 0)
		return -errno;
	if (found)
		*found = fl.l_type;
	return 0;
}

/* The last reservation a slot announced is behind the consumer's head:
 * consumed, skipped, or never granted. */
static bool shim_claim_resolved(const struct shim_claim *c, uint32_t head)
{
	uint32_t pos = (uint32_t)atomic_load_explicit(&c->tail, memory_order_relaxed);
	uint32_t n = (uint32_t)atomic_load_explicit(&c->counts, memory_order_relaxed);

	return (int32_t)(head - (pos + n)) >= 0;
}

int shim_claim_register(struct shim_peer_priv *pp, int fd)
{
	struct shim_rcv_ctl *ctl = pp->pub.ctl;
	struct shim_claim *tab = shim_claim_table(ctl, pp->claim_off);
	uint32_t head = atomic_load_explicit(&ctl->hdr_head, memory_order_acquire);

	for (uint32_t i = 0; i < pp->claim_cnt; i++) {
		struct shim_claim *c = &tab[i];
		uint32_t st = atomic_load_explicit(&c->state, memory_order_acquire);
		int ret;

		/* A held slot whose lock we can take has a dead holder; its
		 * record is needed until the consumer is past its last
		 * reservation, which may be the hole being recovered. */
		if ((st & SHIM_CLAIM_HELD) && !shim_claim_resolved(c, head))
			continue;
		ret = shim_claim_lockop(fd, pp->claim_off, i, F_OFD_SETLK, F_WRLCK, NULL);
		if (ret == -EAGAIN || ret == -EACCES)
			continue; /* a live sender holds it */
		if (ret)
			return ret;
		/* With the lock ours, only a racing taker of the same dead
		 * slot can change state, and it needs the lock too. */
		if (!atomic_compare_exchange_strong_explicit(&c->state, &st,
							     ((st & ~SHIM_CLAIM_HELD) + 2u) |
								     SHIM_CLAIM_HELD,
							     memory_order_acq_rel,
							     memory_order_relaxed)) {
			shim_claim_lockop(fd, pp->claim_off, i, F_OFD_SETLK, F_UNLCK, NULL);
			continue;
		}
		/* an empty intent at the current tail: covers nothing, and is
		 * resolved as soon as the consumer gets there */
		atomic_store_explicit(&c->counts, 0, memory_order_relaxed);
		atomic_store_explicit(&c->rgn_busy, 0, memory_order_relaxed);
		atomic_store_explicit(&c->tail, atomic_load_explicit(&ctl->tail, memory_order_relaxed),
				      memory_order_relaxed);
		pp->claim_idx = (int)i;
		pp->seg_fd = fd;
		pp->pub.claim = c;
		return 0;
	}
	return -EUSERS;
}

void shim_claim_unregister(struct shim_peer_priv *pp)
{
	struct shim_claim *c = pp->pub.claim;

	if (c) {
		uint32_t st = atomic_load_explicit(&c->state, memory_order_relaxed);

		/* every reservation of ours is published: free the slot, then
		 * drop its lock with the descriptor */
		if (st & SHIM_CLAIM_HELD)
			atomic_store_explicit(&c->state, (st & ~SHIM_CLAIM_HELD) + 2u,
					      memory_order_release);
		pp->pub.claim = NULL;
	}
	if (pp->seg_fd >= 0)
		close(pp->seg_fd);
	pp->seg_fd = -1;
	pp->claim_idx = -1;
}

/* ---------------------------------------------------------------------
 * Consumer side.
 */
bool shim_claim_alive(const struct shim_ctx *ctx, uint32_t i)
{
	short type = F_WRLCK;

	if (ctx->seg_fd < 0 || i >= ctx->claim_cnt)
		return false;
	/* cannot tell: alive, which errs on the side of waiting */
	return shim_claim_lockop(ctx->seg_fd, ctx->claim_off, i, F_OFD_GETLK, F_WRLCK, &type) ||
	       type != F_UNLCK;
}

struct shim_claim *shim_claim_slots(const struct shim_ctx *ctx)
{
	return shim_claim_table(ctx->map, ctx->claim_off);
}

/* Where the reservation announced by (tail, counts) ends: the ctl->tail
 * value its compare-and-swap wrote. */
static uint64_t shim_claim_end(const struct shim_rx *rx, uint64_t tail, uint64_t counts)
{
	uint32_t ht = (uint32_t)tail, et = (uint32_t)(tail >> 32);
	uint32_t n = (uint32_t)counts, nblk = (uint32_t)(counts >> 32);
	uint32_t egr_blocks = rx->egr_mask + 1;
	uint32_t start = et;

	if (nblk && (start & rx->egr_mask) + nblk > egr_blocks)
		start = (start + egr_blocks) & ~rx->egr_mask;
	return ((uint64_t)(nblk ? start + nblk : et) << 32) | (uint32_t)(ht + n);
}

/* Publish entries head .. end of the dead reservation as ERR_DEAD; the
 * last one carries every eager block the reservation took that the
 * consumer has not released yet. */
static int shim_claim_hole_fill(struct shim_rx *rx, uint64_t tail, uint64_t counts)
{
	uint64_t endv = shim_claim_end(rx, tail, counts);
	uint32_t end = (uint32_t)endv;
	uint32_t blocks = 0;
	int filled = 0;

	if (counts >> 32) {
		blocks = (uint32_t)(endv >> 32) - rx->egr_head;
		if (blocks > rx->egr_mask + 1)
			return 0; /* inconsistent with what we consumed: leave it */
	}
	for (uint32_t p = rx->head; p != end; p++) {
		struct shim_rhq_entry *e = &rx->hdrq[p & rx->hdrq_mask];
		uint32_t rhf = SHIM_RHF_ERR_DEAD;

		memset(&e->hdr, 0, sizeof(e->hdr));
		if (p + 1 == end && blocks) {
			rhf |= SHIM_RHF_EGR | (rx->egr_head & rx->egr_mask);
			e->hdr.paylen = blocks * SHIM_BLOCK;
		}
		e->rhf = rhf;
		atomic_store_explicit(&e->seq, p + 1, memory_order_release);
		filled++;
	}
	atomic_fetch_add_explicit(&rx->ctl->holes_skipped, (uint64_t)filled, memory_order_relaxed);
	return filled;
}

/* Look at the claims covering the head.  Any live one: wait.  Dead ones
 * only: fill the hole from the one that was granted (when two dead
 * claims disagree, the one whose end is the current tail, else wait).
 *
 * The table is where this process put it (ctx->claim_off, claim_cnt),
 * not where the control block says: a process of our uid can rewrite
 * that.  The senders' locks are tested through the descriptor that holds
 * our own liveness lock: it is the very file they locked, whereas the
 * name may by now be unlinked or name another segment.  Our lock (byte 0)
 * never covers a slot's byte, so it cannot hide a sender's. */
static int shim_claim_hole_resolve(struct shim_ctx *ctx, uint64_t now_tail)
{
	struct shim_rx *rx = &ctx->rx;
	struct shim_claim *tab = shim_claim_table(ctx->map, ctx->claim_off);
	uint64_t cand_tail = 0, cand_counts = 0;
	uint32_t head = rx->head;
	int ncand = 0, nend = 0, fd = ctx->seg_fd;
	bool differ = false;

	if (fd < 0)
		return 0;
	for (uint32_t i = 0; i < ctx->claim_cnt; i++) {
		struct shim_claim *c = &tab[i];
		uint32_t st = atomic_load_explicit(&c->state, memory_order_acquire);
		uint64_t t, n;
		short type = F_WRLCK;

		if (!(st & SHIM_CLAIM_HELD))
			continue;
		t = atomic_load_explicit(&c->tail, memory_order_relaxed);
		n = atomic_load_explicit(&c->counts, memory_order_relaxed);
		if ((uint32_t)(head - (uint32_t)t) >= (uint32_t)n)
			continue; /* does not cover the head */
		if ((uint32_t)n > ctx->hdrq_cnt || (uint32_t)(n >> 32) > ctx->egr_blocks)
			continue; /* not an intent any sender could have had */
		if (shim_claim_lockop(fd, ctx->claim_off, i, F_OFD_GETLK, F_WRLCK, &type) ||
		    type != F_UNLCK) {
			ctx->hole.waits++; /* alive (or cannot tell): its publish will come */
			return 0;
		}
		if (ncand && (t != cand_tail || n != cand_counts))
			differ = true;
		if (shim_claim_end(rx, t, n) == now_tail)
			nend++;
		if (!ncand || shim_claim_end(rx, t, n) == now_tail) {
			cand_tail = t;
			cand_counts = n;
		}
		ncand++;
	}
	if (!ncand) {
		ctx->hole.unowned++;
		return 0;
	}
	if (differ && (nend != 1 || shim_claim_end(rx, cand_tail, cand_counts) != now_tail))
		return 0;
	return shim_claim_hole_fill(rx, cand_tail, cand_counts);
}

int shim_claim_rx_recover(struct shim_ctx *ctx)
{
	struct shim_rhq_entry *e;
	struct shim_hole *h;
	struct shim_rx *rx;
	uint64_t tail, now;
	int n;

	if (!ctx)
		return -EINVAL;
	rx = &ctx->rx;
	h = &ctx->hole;
	e = &rx->hdrq[rx->head & rx->hdrq_mask];
	if (atomic_load_explicit(&e->seq, memory_order_acquire) == rx->head + 1) {
		h->armed = false; /* a packet is waiting: not a hole */
		return 0;
	}
	now = shim_now_ns();
	/* an empty poll: peers copy one-sided data themselves only while
	 * the owner does not poll (opx_rma.c) */
	shim_ctx_note_polled(ctx, now);
	if (!h->armed || h->pos != rx->head) {
		h->armed = true;
		h->pos = rx->head;
		h->next_ns = now + SHIM_HOLE_GRACE_NS;
		return 0;
	}
	if (now < h->next_ns)
		return 0;
	h->next_ns = now + SHIM_HOLE_RECHECK_NS;
	/* Only now the tail: its line belongs to the senders, and reading it
	 * on every idle look took it away from them (each send then paid a
	 * cache miss: 8-byte opx_msgrate 6.9 M/s against 8.3 M/s).  acquire:
	 * pairs with the claimant's release CAS, so its intent is visible
	 * below if this tail is past the head. */
	tail = atomic_load_explicit(&rx->ctl->tail, memory_order_acquire);
	if ((uint32_t)tail == rx->head)
		return 0; /* empty: stay armed, look again later */
	n = shim_claim_hole_resolve(ctx, tail);
	if (n)
		h->armed = false;
	return n;
}
