/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_tid.c - expected receive (TID) of the software SuperNIC.
 *
 * A receive context registers buffer ranges of its own process and hands
 * the handles to senders; a packet flagged SHIM_RHF_TID names a handle and
 * a byte offset, and shim_tid_place() copies its payload there.
 *
 * The table is private to the owning process (it is never in the shared
 * segment: a sender must not be able to point it at arbitrary memory), so
 * every check against it is made with data no other process can change.
 *
 * Data structures, all fixed-size and allocated with the context so the
 * register fast path does no allocation and no system call:
 *  - ent[SHIM_TID_MAX]: the registrations.  A slot is FREE (on the free
 *    list), CACHED and referenced, or CACHED and idle (refcnt 0, on the
 *    LRU list).  A cached entry invalidated while still referenced is
 *    DROPPING: out of the lookup map, freed at its last release.
 *  - map[SHIM_TID_HASH]: open addressing with linear probing keyed by
 *    (vaddr ^ len) through a multiplicative hash; twice the table size so
 *    probes stay short.  Deletion shifts later members of the cluster back
 *    instead of leaving tombstones, so lookups never degrade over time.
 *  - the idle list is ordered by the time an entry became unreferenced:
 *    its head is the least recently used entry, the eviction victim, so
 *    both eviction and re-referencing are O(1).
 *
 * Handles are gen << 16 | index.  The generation of a slot changes every
 * time the slot's registration ends (eviction, invalidation), so a handle
 * kept by a sender after that never matches the slot's next use.  The
 * generation is 16 bits, starts at 1 and skips 0 when it wraps; index and
 * generation together can never form SHIM_TID_NONE.
 *
 * Freed application memory: the software NIC places by virtual address in
 * the owner's process, it pins nothing.  If the application frees a
 * buffer whose registration is still cached and later gets memory at the
 * same address (malloc often returns the same block), a register of the
 * same (address, length) is a cache hit and placement writes into the new
 * memory, which is exactly what the new owner of that address asked for.
 * A stale registration is only dangerous if a sender places into it after
 * the memory went back to the system, so the provider must stop using a
 * handle before it releases it (it does: handles are released at receive
 * completion), and shim_tid_invalidate() lets a memory-release hook drop
 * cached entries of a range that is going away.  A hardware NIC would have
 * to pin the pages and need such hooks for correctness, not just hygiene.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shim_internal.h"

#define SHIM_TID_HASH (2u * SHIM_TID_MAX) /* power of two */
#define SHIM_TID_HASH_BITS 11
#define SHIM_TID_NIL 0xffffu

static_assert(SHIM_TID_HASH == 1u << SHIM_TID_HASH_BITS, "hash size");
static_assert(SHIM_TID_MAX <= 0xffffu, "index must fit the low 16 bits of a handle");

enum shim_tid_ent_state {
	SHIM_TID_FREE = 0,
	SHIM_TID_CACHED,   /* in the map; idle list member iff refcnt == 0 */
	SHIM_TID_DROPPING, /* invalidated while referenced: freed at last release */
};

struct shim_tid_ent {
	uintptr_t vaddr;
	size_t len;
	uint64_t stamp;  /* last register or release: diagnostics */
	uint32_t refcnt;
	uint32_t wire_placed; /* bytes the udp wire placed, not yet claimed by an entry */
	uint16_t gen;
	uint8_t state;
	uint8_t rsvd;
	uint16_t from_lid; /* the sender it was registered for (shim_tid_bind): */
	uint16_t from_ctx; /* 0, or SHIM_TID_FROM_ANY: anyone */
	uint16_t prev;   /* idle list links; next is also the free list link */
	uint16_t next;
};

struct shim_tid_table {
	struct shim_tid_ent ent[SHIM_TID_MAX];
	uint16_t map[SHIM_TID_HASH]; /* entry index + 1; 0 = empty */
	uint16_t free_head;
	uint16_t idle_head;          /* least recently used */
	uint16_t idle_tail;          /* most recently used */
	uint32_t cached;
	uint32_t in_use;
	uint64_t clock;
	uint64_t hits;
	uint64_t misses;
	uint64_t evictions;
	uint64_t invalidations;
};

int shim_tid_table_create(struct shim_ctx *ctx)
{
	struct shim_tid_table *t;

	if (!ctx)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	/* free list in index order, so the first registrations get the
	 * lowest indices (readable dumps) */
	for (uint32_t i = 0; i < SHIM_TID_MAX; i++) {
		t->ent[i].gen = 1;
		t->ent[i].prev = SHIM_TID_NIL;
		t->ent[i].next = i + 1 < SHIM_TID_MAX ? (uint16_t)(i + 1) : SHIM_TID_NIL;
	}
	t->free_head = 0;
	t->idle_head = SHIM_TID_NIL;
	t->idle_tail = SHIM_TID_NIL;
	ctx->tid = t;
	return 0;
}

void shim_tid_table_destroy(struct shim_ctx *ctx)
{
	if (!ctx)
		return;
	free(ctx->tid);
	ctx->tid = NULL;
}

/* ---------------------------------------------------------------------
 * Lookup map
 */
static uint32_t shim_tid_hash(uintptr_t vaddr, size_t len)
{
	uint64_t k = (uint64_t)vaddr ^ ((uint64_t)len * 0x100000001b3ULL);

	/* Fibonacci hashing: the top bits of the product mix all key bits,
	 * so aligned addresses (low bits zero) still spread. */
	return (uint32_t)((k * 0x9e3779b97f4a7c15ULL) >> (64 - SHIM_TID_HASH_BITS));
}

/* Map slot holding entry (vaddr, len), or the empty slot where it would go. */
static uint32_t shim_tid_map_find(const struct shim_tid_table *t, uintptr_t vaddr, size_t len,
				  bool *found)
{
	uint32_t s = shim_tid_hash(vaddr, len);

	/* bounded: the map is never more than half full, so an empty slot
	 * is always reached */
	for (uint32_t n = 0; n < SHIM_TID_HASH; n++, s = (s + 1) & (SHIM_TID_HASH - 1)) {
		uint16_t v = t->map[s];

		if (!v)
			break;
		if (t->ent[v - 1].vaddr == vaddr && t->ent[v - 1].len == len) {
			*found = true;
			return s;
		}
	}
	*found = false;
	return s;
}

/* Remove the member at slot s; shift later members of the cluster back
 * so that every member stays reachable from its home slot. */
static void shim_tid_map_del(struct shim_tid_table *t, uint32_t s)
{
	const uint32_t mask = SHIM_TID_HASH - 1;
	uint32_t hole = s, j = s;

	for (uint32_t n = 0; n < SHIM_TID_HASH; n++) {
		j = (j + 1) & mask;
		uint16_t v = t->map[j];

		if (!v)
			break;
		uint32_t home = shim_tid_hash(t->ent[v - 1].vaddr, t->ent[v - 1].len);
		/* The member at j may move to the hole only if its home is
		 * not cyclically inside (hole, j]: otherwise moving it would
		 * put it before its home slot. */
		if (((j - home) & mask) >= ((j - hole) & mask)) {
			t->map[hole] = v;
			hole = j;
		}
	}
	t->map[hole] = 0;
}

static void shim_tid_map_del_ent(struct shim_tid_table *t, uint32_t idx)
{
	const struct shim_tid_ent *e = &t->ent[idx];
	bool found;
	uint32_t s = shim_tid_map_find(t, e->vaddr, e->len, &found);

	if (found && t->map[s] == idx + 1)
		shim_tid_map_del(t, s);
}

/* ---------------------------------------------------------------------
 * Idle (LRU) and free lists
 */
static void shim_tid_idle_push(struct shim_tid_table *t, uint32_t idx)
{
	struct shim_tid_ent *e = &t->ent[idx];

	e->next = SHIM_TID_NIL;
	e->prev = t->idle_tail;
	if (t->idle_tail != SHIM_TID_NIL)
		t->ent[t->idle_tail].next = (uint16_t)idx;
	else
		t->idle_head = (uint16_t)idx;
	t->idle_tail = (uint16_t)idx;
}

static void shim_tid_idle_unlink(struct shim_tid_table *t, uint32_t idx)
{
	struct shim_tid_ent *e = &t->ent[idx];

	if (e->prev != SHIM_TID_NIL)
		t->ent[e->prev].next = e->next;
	else
		t->idle_head = e->next;
	if (e->next != SHIM_TID_NIL)
		t->ent[e->next].prev = e->prev;
	else
		t->idle_tail = e->prev;
	e->prev = e->next = SHIM_TID_NIL;
}

/* End a registration: the slot goes back to the free list with a new
 * generation, so every handle naming the old one is stale from now on.
 * The caller has already taken it out of the map and the idle list. */
static void shim_tid_ent_free(struct shim_tid_table *t, uint32_t idx)
{
	struct shim_tid_ent *e = &t->ent[idx];

	e->state = SHIM_TID_FREE;
	e->vaddr = 0;
	e->len = 0;
	e->refcnt = 0;
	e->gen = (uint16_t)(e->gen + 1);
	if (!e->gen)
		e->gen = 1;
	e->prev = SHIM_TID_NIL;
	e->next = t->free_head;
	t->free_head = (uint16_t)idx;
	t->cached--;
}

static uint32_t shim_tid_handle(const struct shim_tid_table *t, uint32_t idx)
{
	return (uint32_t)t->ent[idx].gen << 16 | idx;
}

/* The entry a handle names if it is live and referenced, else NULL.
 * DROPPING entries still count: their memory is still the caller's until
 * the last release. */
static struct shim_tid_ent *shim_tid_lookup(struct shim_tid_table *t, uint32_t handle)
{
	uint32_t idx = SHIM_TID_IDX(handle);
	struct shim_tid_ent *e;

	if (idx >= SHIM_TID_MAX)
		return NULL;
	e = &t->ent[idx];
	if (e->state == SHIM_TID_FREE || e->gen != SHIM_TID_GEN(handle) || !e->refcnt)
		return NULL;
	return e;
}

/* Whether a packet from (slid, sctx) may be placed into e: only the
 * sender the registration was bound to, when it was bound. */
static inline bool shim_tid_from_ok(const struct shim_tid_ent *e, uint16_t slid, uint16_t sctx)
{
	if (!e->from_lid || e->from_lid == SHIM_TID_FROM_ANY)
		return true;
	return e->from_lid == slid && e->from_ctx == sctx;
}

/* ---------------------------------------------------------------------
 * API
 */
int shim_tid_register(struct shim_ctx *ctx, void *buf, size_t len, uint32_t *handle)
{
	struct shim_tid_table *t;
	struct shim_tid_ent *e;
	uintptr_t va = (uintptr_t)buf;
	uint32_t s, idx;
	bool found;

	if (!ctx || !ctx->tid || !buf || !len || !handle || len > UINTPTR_MAX - va)
		return -EINVAL;
	t = ctx->tid;
	s = shim_tid_map_find(t, va, len, &found);
	if (found) {
		idx = t->map[s] - 1u;
		e = &t->ent[idx];
		if (!e->refcnt) {
			shim_tid_idle_unlink(t, idx);
			t->in_use++;
			e->from_lid = 0; /* a new use: bound again, or by no one */
			e->from_ctx = 0;
		}
		e->refcnt++;
		e->stamp = ++t->clock;
		t->hits++;
		*handle = shim_tid_handle(t, idx);
		return 0;
	}
	t->misses++;
	if (t->free_head == SHIM_TID_NIL) {
		/* Table full: the least recently used idle entry makes room.
		 * When every entry is referenced the caller falls back to
		 * eager (a hardware NIC's TID space is just as finite). */
		idx = t->idle_head;
		if (idx == SHIM_TID_NIL)
			return -ENOSPC;
		shim_tid_idle_unlink(t, idx);
		shim_tid_map_del_ent(t, idx);
		shim_tid_ent_free(t, idx);
		t->evictions++;
		/* the deletion may have shifted the cluster: find the slot again */
		s = shim_tid_map_find(t, va, len, &found);
	}
	idx = t->free_head;
	e = &t->ent[idx];
	t->free_head = e->next;
	e->next = e->prev = SHIM_TID_NIL;
	e->vaddr = va;
	e->len = len;
	e->refcnt = 1;
	e->wire_placed = 0;
	e->from_lid = 0;
	e->from_ctx = 0;
	e->state = SHIM_TID_CACHED;
	e->stamp = ++t->clock;
	t->map[s] = (uint16_t)(idx + 1);
	t->cached++;
	t->in_use++;
	*handle = shim_tid_handle(t, idx);
	return 0;
}

int shim_tid_bind(struct shim_ctx *ctx, uint32_t handle, uint16_t lid, uint16_t sctx)
{
	struct shim_tid_ent *e;

	if (!ctx || !ctx->tid || !lid || lid == SHIM_TID_FROM_ANY)
		return -EINVAL;
	e = shim_tid_lookup(ctx->tid, handle);
	if (!e)
		return -EINVAL;
	/* The first reference binds.  A range another live receive already
	 * holds for another sender (overlapping receive buffers, which MPI
	 * forbids) takes packets from either: the registration is shared. */
	if (e->refcnt == 1 || !e->from_lid) {
		e->from_lid = lid;
		e->from_ctx = sctx;
	} else if (e->from_lid != lid || e->from_ctx != sctx) {
		e->from_lid = SHIM_TID_FROM_ANY;
	}
	return 0;
}

int shim_tid_release(struct shim_ctx *ctx, uint32_t handle)
{
	struct shim_tid_table *t;
	struct shim_tid_ent *e;
	uint32_t idx = SHIM_TID_IDX(handle);

	if (!ctx || !ctx->tid)
		return -EINVAL;
	t = ctx->tid;
	e = shim_tid_lookup(t, handle);
	if (!e)
		return -EINVAL;
	e->stamp = ++t->clock;
	if (--e->refcnt)
		return 0;
	t->in_use--;
	if (e->state == SHIM_TID_DROPPING) {
		/* invalidated while in use: it was already out of the map */
		shim_tid_ent_free(t, idx);
		t->invalidations++;
		return 0;
	}
	/* stays cached: the next register of the range is a hit */
	shim_tid_idle_push(t, idx);
	return 0;
}

int shim_tid_invalidate(struct shim_ctx *ctx, const void *buf, size_t len)
{
	uintptr_t lo = (uintptr_t)buf, hi;
	struct shim_tid_table *t;
	int dropped = 0;

	if (!ctx || !ctx->tid || !buf || !len)
		return -EINVAL;
	t = ctx->tid;
	/* a range running past the end of the address space is clamped */
	hi = len > UINTPTR_MAX - lo ? UINTPTR_MAX : lo + len;
	/* Slow path (memory release hooks): a scan of the table is fine. */
	for (uint32_t i = 0; i < SHIM_TID_MAX; i++) {
		struct shim_tid_ent *e = &t->ent[i];

		if (e->state != SHIM_TID_CACHED)
			continue;
		if (e->vaddr >= hi || e->vaddr + e->len <= lo)
			continue;
		shim_tid_map_del_ent(t, i);
		if (e->refcnt) {
			/* Someone still expects data there: keep the handle
			 * working until its last release, but a new register
			 * of the range must not hit this entry any more. */
			e->state = SHIM_TID_DROPPING;
			continue;
		}
		shim_tid_idle_unlink(t, i);
		shim_tid_ent_free(t, i);
		t->invalidations++;
		dropped++;
	}
	return dropped;
}

void shim_tid_stats(const struct shim_ctx *ctx, struct shim_tid_stats *st)
{
	const struct shim_tid_table *t;

	if (!st)
		return;
	memset(st, 0, sizeof(*st));
	if (!ctx || !ctx->tid)
		return;
	t = ctx->tid;
	st->hits = t->hits;
	st->misses = t->misses;
	st->evictions = t->evictions;
	st->invalidations = t->invalidations;
	st->cached = t->cached;
	st->in_use = t->in_use;
}

int shim_tid_place(struct shim_ctx *ctx, const struct shim_rhq_entry *e)
{
	struct shim_rhq_entry view;
	struct shim_tid_ent *te;
	const uint8_t *src;
	uint32_t rhf, paylen, handle;
	uint16_t slid, sctx;
	uint64_t off;

	if (!ctx || !ctx->tid || !e)
		return -EINVAL;
	/* The entry is in shared memory that any sender can keep writing:
	 * read every field once and decide on the copies only. */
	rhf = e->rhf;
	paylen = e->hdr.paylen;
	handle = e->hdr.p.tid.handle;
	off = e->hdr.p.tid.offset;
	slid = e->hdr.slid;
	sctx = e->hdr.sctx;
	if (!(rhf & SHIM_RHF_TID))
		return -EINVAL;
	te = shim_tid_lookup(ctx->tid, handle);
	if (!te)
		return -EINVAL;
	/* the wire checked the sender when it placed (PLACED reports) */
	if (!(rhf & SHIM_RHF_PLACED) && !shim_tid_from_ok(te, slid, sctx))
		return -EINVAL;
	/* Placed by the udp wire already: the entry only reports it, and
	 * only bytes this process's own wire placed count (a forged entry in
	 * the shared ring cannot claim bytes that never arrived). */
	if (!(rhf & SHIM_RHF_EGR) && (rhf & SHIM_RHF_PLACED)) {
		if (paylen > te->wire_placed)
			return -EINVAL;
		te->wire_placed -= paylen;
		return 0;
	}
	/* p carries the handle and offset, so there is no inline payload */
	if (!(rhf & SHIM_RHF_EGR) && paylen)
		return -EINVAL;
	if (off > te->len || paylen > te->len - off)
		return -EINVAL;
	if (!paylen)
		return 0;
	memset(&view, 0, sizeof(view));
	view.rhf = rhf;
	view.hdr.paylen = paylen;
	src = shim_rx_payload(&ctx->rx, &view);
	if (!src)
		return -EINVAL;
	memcpy((uint8_t *)te->vaddr + off, src, paylen);
	return 0;
}

int shim_tid_place_wire(struct shim_ctx *ctx, uint32_t handle, uint64_t off, const void *src,
			uint32_t len, uint16_t slid, uint16_t sctx)
{
	struct shim_tid_ent *te;

	if (!ctx || !ctx->tid)
		return -EINVAL;
	te = shim_tid_lookup(ctx->tid, handle);
	if (!te || !shim_tid_from_ok(te, slid, sctx) || off > te->len || len > te->len - off ||
	    te->wire_placed + (uint64_t)len > UINT32_MAX)
		return -EINVAL;
	memcpy((uint8_t *)te->vaddr + off, src, len);
	te->wire_placed += len;
	return 0;
}
