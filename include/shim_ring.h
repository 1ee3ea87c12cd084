/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_ring.h - the software SuperNIC's data path, part of the shim ABI
 * (same version as shim_abi.h): the inline PIO send and receive ring
 * operations on the layout that shim_abi.h describes.
 */
#ifndef SHIM_RING_H
#define SHIM_RING_H

#include "shim_dev.h"

/* ---------------------------------------------------------------------
 * PIO fast path, inline.  Lock needed: none across processes; within one
 * process a shim_peer is used under the caller's endpoint/domain lock
 * (its cached credit heads are not atomic).
 */
static inline uint32_t shim_egr_blocks_for(uint32_t bytes)
{
	/* 64-bit sum: a hostile paylen near 2^32 must not wrap to 0 blocks */
	return (uint32_t)(((uint64_t)bytes + SHIM_BLOCK - 1) / SHIM_BLOCK);
}

/* Prefetch a line for writing (x86: PREFETCHW, a no-op where absent). */
static inline void shim_prefetchw(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
	__builtin_prefetch(p, 1, 3);
#endif
}

/* Prefetch a line for reading.  Not __builtin_prefetch: GCC 12 -O2 left
 * no PREFETCHT0 of the helpers below that used it (its ipa-modref pass
 * found them free of side effects and the calls were dropped; with
 * -fno-ipa-modref they stay), so shim_rx_prefetch_next never ran. */
static inline void shim_prefetch(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)p));
#else
	__builtin_prefetch(p, 0, 3);
#endif
}

#define SHIM_CREDIT_BATCH 16u /* see shim_rx_consume */

#define SHIM_PIO_AHEAD 2u /* see shim_pio_prefetch_next */

/* Reserve npkts header entries and egr_bytes of contiguous eager space.
 * Returns 0 or -EAGAIN when credits are short (the caller progresses and
 * retries).  The caller then fills each entry with shim_pio_write_hdr()
 * and publishes each with shim_pio_publish(). */
static inline int shim_pio_reserve(struct shim_peer *p, uint32_t npkts, uint32_t egr_bytes,
				   struct shim_pio_resv *r)
{
	uint32_t nblk = shim_egr_blocks_for(egr_bytes);
	uint64_t old = atomic_load_explicit(&p->ctl->tail, memory_order_relaxed);
	bool refreshed = false;

	if (npkts > p->hdrq_cnt || nblk > p->egr_blocks)
		return -EMSGSIZE;
	for (;;) {
		uint32_t ht = (uint32_t)old;
		uint32_t et = (uint32_t)(old >> 32);
		uint32_t start = et;

		if (nblk && (start & p->egr_mask) + nblk > p->egr_blocks)
			start = (start + p->egr_blocks) & ~p->egr_mask; /* skip to lap start */
		if ((uint32_t)(ht + npkts - p->hdr_credit_head) > p->hdrq_cnt ||
		    (uint32_t)(start + nblk - p->egr_credit_head) > p->egr_blocks) {
			if (refreshed) {
				atomic_fetch_add_explicit(&p->ctl->tx_nocredit, 1, memory_order_relaxed);
				return -EAGAIN;
			}
			/* credit return: acquire pairs with the consumer's release */
			p->hdr_credit_head = atomic_load_explicit(&p->ctl->hdr_head, memory_order_acquire);
			p->egr_credit_head = atomic_load_explicit(&p->ctl->egr_head, memory_order_acquire);
			refreshed = true;
			continue;
		}
		uint64_t nv = ((uint64_t)(nblk ? start + nblk : et) << 32) | (uint32_t)(ht + npkts);
		/* intent first, published by the CAS's release (see the top) */
		atomic_store_explicit(&p->claim->tail, old, memory_order_relaxed);
		atomic_store_explicit(&p->claim->counts, ((uint64_t)nblk << 32) | npkts,
				      memory_order_relaxed);
		if (atomic_compare_exchange_weak_explicit(&p->ctl->tail, &old, nv, memory_order_acq_rel,
							  memory_order_relaxed)) {
			r->hdr_pos = ht;
			r->egr_end = start + nblk;
			r->npkts = npkts;
			r->egr_idx = start & p->egr_mask;
			r->egr = nblk ? p->egr + (size_t)r->egr_idx * SHIM_BLOCK : NULL;
			return 0;
		}
	}
}

/* Entry i (0-based) of a reservation. */
static inline struct shim_rhq_entry *shim_pio_entry(const struct shim_peer *p,
						    const struct shim_pio_resv *r, uint32_t i)
{
	return &p->hdrq[(r->hdr_pos + i) & p->hdrq_mask];
}

/* Take ownership of up to n eager blocks from block number b on, as far
 * as they are within our credits (the consumer is done with them). */
static inline void shim_pio_own_blocks(const struct shim_peer *p, uint32_t b, uint32_t n)
{
	for (; n && (uint32_t)(b - p->egr_credit_head) < p->egr_blocks; b++, n--)
		shim_prefetchw(p->egr + (size_t)(b & p->egr_mask) * SHIM_BLOCK);
}

/* After a reservation's last publish, for a sender that is streaming to
 * p: take ownership of the lines a later send will write, SHIM_PIO_AHEAD
 * packets (and eager blocks) on, where the consumer is done with them.
 * Their fetch from the consumer's cache then overlaps whatever the sender
 * does next instead of stalling a later send's stores and, behind them,
 * its locked compare-exchange.  Measured (opx_msgrate, MPI osu_bw-like,
 * 8 B, two cores that do not share a cache): 2 ahead doubles a stream's
 * rate; 8 ahead gains nothing (the consumer's own prefetching reaches the
 * line first); and a ping-pong gets slower, so a sender that alternates
 * sends and receives should not call this. */
static inline void shim_pio_prefetch_next(const struct shim_peer *p, const struct shim_pio_resv *r)
{
	uint32_t h = r->hdr_pos + r->npkts + SHIM_PIO_AHEAD;

	if ((uint32_t)(h - p->hdr_credit_head) < p->hdrq_cnt)
		shim_prefetchw(&p->hdrq[h & p->hdrq_mask]);
	if (r->egr)
		shim_pio_own_blocks(p, r->egr_end + SHIM_PIO_AHEAD, 1);
}

/* For a sender that alternates sends and receives (a ping-pong, a
 * request and its reply): take ownership now of the eager blocks its
 * next send of the same size will write, SHIM_PIO_OWN_MAX at most, while
 * it waits for the answer (the blocks right after this reservation,
 * where the next one starts unless it wraps).  Without it every line of that send's copy is
 * a read-for-ownership from the consumer's cache, one after the other;
 * the consumer is done with them (they are within our credits), and a
 * copy into owned lines runs at cache speed.  Measured (MPI ping-pong,
 * np 2): 2 KiB 0.75 -> 0.64 us, 4 KiB 1.00 -> 0.78, 8191 B 1.56 -> 1.29.
 * Not for one or two blocks: there the consumer, polling for the next
 * packet, has prefetched those lines itself (shim_rx_prefetch_next). */
#define SHIM_PIO_OWN_MAX 128u
static inline void shim_pio_own_next(const struct shim_peer *p, const struct shim_pio_resv *r,
				     uint32_t nblk)
{
	shim_pio_own_blocks(p, r->egr_end, nblk < SHIM_PIO_OWN_MAX ? nblk : SHIM_PIO_OWN_MAX);
}

/* Publish entry i: rhf describes where its payload is; release order makes
 * the header and payload visible before the generation word.  Returns
 * whether the consumer sleeps and must be woken (a relaxed check of its
 * sleep flag: a wake-up missed in the race window costs the sleeper one
 * bounded poll interval, never a hang). */
static inline bool shim_pio_publish_entry(struct shim_peer *p, const struct shim_pio_resv *r,
					  uint32_t i, uint32_t rhf)
{
	struct shim_rhq_entry *e = shim_pio_entry(p, r, i);

	e->rhf = rhf;
	atomic_store_explicit(&e->seq, r->hdr_pos + i + 1, memory_order_release);
	return atomic_load_explicit(&p->ctl->sleeping, memory_order_relaxed) != 0;
}

/* Publish entry i and wake the consumer if it sleeps (the provider's
 * send path; the udp wire, delivering into its own context, publishes
 * with shim_pio_publish_entry and wakes through the shm wire itself). */
static inline void shim_pio_publish(struct shim_peer *p, const struct shim_pio_resv *r, uint32_t i,
				    uint32_t rhf)
{
	if (shim_pio_publish_entry(p, r, i, rhf))
		shim_peer_wake(p);
}

/* RHF for a packet whose payload starts eager_off bytes into the
 * reservation's eager space. */
static inline uint32_t shim_rhf_egr(const struct shim_peer *p, const struct shim_pio_resv *r,
				    uint32_t eager_off)
{
	return SHIM_RHF_EGR | ((r->egr_idx + eager_off / SHIM_BLOCK) & p->egr_mask);
}

/* ---------------------------------------------------------------------
 * Receive fast path, inline.  Lock needed: the owner's endpoint lock.
 */

/* Next valid entry or NULL.  The payload of an eager packet is at
 * shim_rx_payload(). */
static inline struct shim_rhq_entry *shim_rx_peek(struct shim_rx *rx)
{
	struct shim_rhq_entry *e = &rx->hdrq[rx->head & rx->hdrq_mask];

	if (atomic_load_explicit(&e->seq, memory_order_acquire) != rx->head + 1)
		return NULL;
	return e;
}

/* Payload pointer of an entry, or NULL if its eager index/length fall
 * outside the eager ring (the caller drops and counts the packet). */
static inline const uint8_t *shim_rx_payload(const struct shim_rx *rx,
					     const struct shim_rhq_entry *e)
{
	if (!(e->rhf & SHIM_RHF_EGR))
		return e->hdr.paylen <= SHIM_INLINE_MAX ? e->hdr.p.inl : NULL;
	uint32_t idx = SHIM_RHF_EGRIDX(e->rhf);
	if (idx > rx->egr_mask || idx + shim_egr_blocks_for(e->hdr.paylen) > rx->egr_mask + 1)
		return NULL;
	return rx->egr + (size_t)idx * SHIM_BLOCK;
}

/* Start fetching eager block idx (any number: it wraps). */
static inline void shim_rx_prefetch_block(const struct shim_rx *rx, uint32_t idx)
{
	shim_prefetch(rx->egr + (size_t)(idx & rx->egr_mask) * SHIM_BLOCK);
}

/* For a consumer that has just read entry e (its private copy): start the
 * miss on its payload's first line, also written by the sender, now
 * rather than behind the validation and matching that come before the
 * copy (MPI exchange 64 B, np 2: 0.55-0.57 -> 0.52 us).  A hostile index
 * only prefetches a line of our own ring; shim_rx_payload checks it. */
static inline void shim_rx_prefetch_payload(const struct shim_rx *rx,
					    const struct shim_rhq_entry *e)
{
	if (e->rhf & SHIM_RHF_EGR)
		shim_rx_prefetch_block(rx, SHIM_RHF_EGRIDX(e->rhf));
}

/* For a consumer that found its queue empty: prefetch the eager blocks
 * where the next payload lands (the ring is consumed in order), so that
 * polling the next header entry fetches them together with it instead of
 * after it.  As many blocks as the packet consumed last had, when it had
 * one or two: what comes next is usually as small.  A bigger payload is
 * still being written while the consumer polls, and taking its first
 * lines from the sender slows it down (MPI ping-pong 1 KiB: 0.52 -> 0.60
 * us with two blocks always; 64 B: 0.30 -> 0.25 us).  Not only after a
 * send of our own: a neighbour exchange receives two messages in a row
 * (exchange 8-128 B 5-7 % faster), and a 64-byte stream is not slowed. */
static inline void shim_rx_prefetch_next(const struct shim_rx *rx)
{
	if (rx->last_nblk - 1u >= 2u) /* none, or more than two */
		return;
	shim_rx_prefetch_block(rx, rx->egr_head);
	if (rx->last_nblk == 2)
		shim_rx_prefetch_block(rx, rx->egr_head + 1);
}

/* While draining small packets: fetch the header entry SHIM_RX_AHEAD
 * behind the head, so that its miss (a line the sender wrote from another
 * core) overlaps the work on the packets before it instead of following
 * it; once this drain has taken SHIM_RX_DEEP packets in a row the sender
 * is well ahead, and the entries up to one further are fetched, from
 * 2 * SHIM_RX_DEEP up to three further (re-fetching a line already on its
 * way costs next to nothing).  Measured (opx_msgrate
 * and MPI osu_bw-like, 8-64 B, 2 cores): 2 ahead raises both by 9-19 %;
 * 3 ahead from the first packet raises the MPI stream more but costs
 * opx_msgrate 15-17 %, whose faster sender is then still writing the
 * line the consumer takes; 3 ahead from the 8th adds 6-17 % at 8 B.
 * From the 16th packet of a drain the queue is a backlog (both sides of
 * a bidirectional stream drain what arrived during their own sends):
 * 5 ahead there adds 3-6 % to MPI bw and bibw at 1-16 B (7 ahead adds
 * nothing more); 64 B - 1 KiB and opx_msgrate are unchanged. */
#define SHIM_RX_AHEAD 2u
#define SHIM_RX_DEEP 8
static inline void shim_rx_prefetch_ahead(const struct shim_rx *rx, int taken)
{
	uint32_t last = SHIM_RX_AHEAD + (taken >= 2 * SHIM_RX_DEEP ? 3u : taken >= SHIM_RX_DEEP ? 1u : 0u);

	for (uint32_t k = SHIM_RX_AHEAD; k <= last; k++)
		shim_prefetch(&rx->hdrq[(rx->head + k) & rx->hdrq_mask]);
}

/* Give the released credits back to the senders: one store pair for a
 * batch, so a consumer draining a full queue does not pull the consumer
 * line out of a credit-starved sender's cache once per packet. */
static inline void shim_rx_credit_flush(struct shim_rx *rx)
{
	if (rx->head == rx->head_pub)
		return;
	atomic_store_explicit(&rx->ctl->egr_head, rx->egr_head, memory_order_release);
	atomic_store_explicit(&rx->ctl->hdr_head, rx->head, memory_order_release);
	rx->head_pub = rx->head;
}

/* Consume the entry at the head (and its eager blocks).  Its credits
 * are published every SHIM_CREDIT_BATCH entries and by
 * shim_rx_credit_flush, which a consumer using this must call whenever it
 * stops draining (so credits never wait on a consumer that went idle). */
static inline void shim_rx_consume(struct shim_rx *rx, const struct shim_rhq_entry *e)
{
	rx->last_nblk = 0;
	if (e->rhf & SHIM_RHF_EGR) {
		uint32_t idx = SHIM_RHF_EGRIDX(e->rhf);
		uint32_t start = rx->egr_head;

		if (idx != (start & rx->egr_mask)) /* producer skipped to lap start */
			start = (start + rx->egr_mask + 1) & ~rx->egr_mask;
		uint32_t nblk = shim_egr_blocks_for(e->hdr.paylen);

		/* clamp: a corrupt length must not run the head past a lap */
		if (nblk > rx->egr_mask + 1)
			nblk = rx->egr_mask + 1;
		rx->egr_head = start + nblk;
		rx->last_nblk = nblk;
	}
	rx->head++;
	if (rx->head - rx->head_pub >= SHIM_CREDIT_BATCH)
		shim_rx_credit_flush(rx);
}

/* Consume the entry at the head and return its credits at once. */
static inline void shim_rx_release(struct shim_rx *rx, const struct shim_rhq_entry *e)
{
	shim_rx_consume(rx, e);
	shim_rx_credit_flush(rx);
}

#endif /* SHIM_RING_H */
