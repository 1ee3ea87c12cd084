/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_dma.h - the software SuperNIC's large-message engines, part of the
 * shim ABI (same version as shim_abi.h): expected receive (TID) and the
 * SDMA engine.
 */
#ifndef SHIM_DMA_H
#define SHIM_DMA_H

#include "shim_dev.h"

/* ---------------------------------------------------------------------
 * Expected receive (TID).  A receive context registers buffer ranges and
 * hands their handles to senders; a packet with SHIM_RHF_TID names a
 * handle and an offset and its payload is placed there, not handed to
 * the provider through the eager ring.
 *
 * Handles: bits 0..15 the table index, bits 16..31 a generation that
 * changes whenever the slot is reused, so a stale handle never matches.
 * Registrations are cached by (address, length): registering a range
 * that is cached costs no system call and returns the same handle with
 * its reference count raised.  Unreferenced entries are evicted least
 * recently used first when the table is full.  The software NIC places
 * by virtual address in the owner's process, so a cached entry whose
 * memory the application freed and reallocated is still correct for the
 * memory now at that address (a hardware NIC would need pinning and
 * memory-release hooks here); shim_tid_invalidate() drops entries for a
 * range the application is about to release anyway.
 */
#define SHIM_TID_MAX 1024u
#define SHIM_TID_NONE 0xffffffffu
#define SHIM_TID_IDX(h) ((h)&0xffffu)
#define SHIM_TID_GEN(h) ((h) >> 16)

struct shim_tid_stats {
	uint64_t hits;
	uint64_t misses;
	uint64_t evictions;
	uint64_t invalidations;
	uint32_t cached;  /* entries in the table */
	uint32_t in_use;  /* entries with references */
};

/* Lock needed: the owner's endpoint lock (the table is per context). */
int shim_tid_register(struct shim_ctx *ctx, void *buf, size_t len, uint32_t *handle);
int shim_tid_release(struct shim_ctx *ctx, uint32_t handle);          /* drop a reference */
/* Only packets from the sender (lid, ctx) are placed into the
 * registration from now on (the rendezvous peer the CTS went to): a
 * packet of another sender naming the handle is dropped (-EINVAL).  An
 * unbound registration takes any sender's. */
#define SHIM_TID_FROM_ANY 0xffffu
int shim_tid_bind(struct shim_ctx *ctx, uint32_t handle, uint16_t lid, uint16_t sctx);
int shim_tid_invalidate(struct shim_ctx *ctx, const void *buf, size_t len);
void shim_tid_stats(const struct shim_ctx *ctx, struct shim_tid_stats *st);
/* Place the payload of a SHIM_RHF_TID entry: 0, or -EINVAL (unknown or
 * stale handle, range outside the registration: the caller drops it). */
int shim_tid_place(struct shim_ctx *ctx, const struct shim_rhq_entry *e);

/* ---------------------------------------------------------------------
 * SDMA engine (sender side, one per endpoint).  A request is a header
 * template plus an iovec; the engine cuts it into packets of at most the
 * peer's MTU and pushes them into the peer's receive context as credits
 * allow (each packet: the template with paylen, p.tid.handle = tid and
 * p.tid.offset = tid_off + offset filled in, published with SHIM_RHF_TID |
 * SHIM_RHF_EGR).  Requests sit in a bounded descriptor ring; a full ring
 * gives -EAGAIN.  Completion (all packets published, or an error) is
 * reported through a completion ring read with shim_sdma_reap().
 *
 * Descriptor states (numbered; transitions documented in shim_sdma.c):
 *   S0 FREE -> S1 QUEUED (submit) -> S2 RUNNING (engine picks it up) <->
 *   S3 WAIT_CREDIT (peer queue full / credits back) -> S4 DONE (last
 *   packet published) or S5 ERROR (peer gone) -> completion -> S0 FREE
 * The engine owns no thread: shim_sdma_progress() runs it.
 */
#define SHIM_SDMA_IOV_MAX 8u
#define SHIM_SDMA_RING_DEFAULT 256u

struct shim_sdma; /* opaque */

struct shim_sdma_req {
	struct shim_pkt_hdr tmpl;  /* copied into every packet */
	struct iovec iov[SHIM_SDMA_IOV_MAX];
	uint32_t iovcnt;
	uint32_t tid;              /* destination TID handle at the peer */
	uint64_t tid_off;          /* offset in the TID of the request's first byte */
	uint64_t len;              /* sum of iov lengths */
	uint64_t cookie;           /* returned by shim_sdma_reap() */
};

int shim_sdma_open(struct shim_ctx *ctx, uint32_t ring_size, struct shim_sdma **engp);
void shim_sdma_close(struct shim_sdma *eng);
/* The request is copied; the iov buffers must stay valid and unchanged
 * until reaped (to a udp peer, packets are sent from them until the peer
 * acknowledged them: zero copy, shim_sdma.c).  The peer must stay open
 * until the request is reaped. */
int shim_sdma_submit(struct shim_sdma *eng, struct shim_peer *peer,
		     const struct shim_sdma_req *req);
/* Push what credits allow; returns packets published (>= 0). */
int shim_sdma_progress(struct shim_sdma *eng);
/* 1 with *cookie and *status (0 or -errno) when a request finished, else 0. */
int shim_sdma_reap(struct shim_sdma *eng, uint64_t *cookie, int *status);
uint32_t shim_sdma_busy(const struct shim_sdma *eng); /* requests not yet reaped */

#endif /* SHIM_DMA_H */
