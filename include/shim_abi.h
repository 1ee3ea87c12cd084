/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_abi.h - the software SuperNIC as seen by the provider: the shared-
 * memory layout of a receive context and the packet format.
 *
 * This header and the five beside it are the only way prov/ talks to
 * driver-shim/: shim_dev.h (units, contexts, peers; the shim's services),
 * shim_rgn.h (the region table at the end of a context's segment),
 * shim_ring.h (the inline PIO send and receive operations), shim_dma.h
 * (expected receive and SDMA) and shim_udp_wire.h (the udp wire between
 * hosts), all under the one version below.  They are written
 * as a device ABI: every structure that lives in shared memory or goes on
 * a wire has a fixed layout pinned with static_assert, and the layout
 * carries a version.
 *
 * Versioning rules:
 *  - SHIM_ABI_MAJOR changes when a shared-memory or wire layout changes
 *    incompatibly; a context whose major differs is refused (-EPROTO).
 *  - SHIM_ABI_MINOR changes when fields are added in reserved space;
 *    readers accept any minor.
 *
 * Receive context (one per endpoint, in a shared-memory segment owned by
 * the receiving process, mode 0600, created with O_EXCL):
 *
 *   +----------------------+  offset 0
 *   | struct shim_rcv_ctl  |  identity, producer line, consumer line
 *   +----------------------+  hdrq_off
 *   | header queue         |  hdrq_cnt x 64-byte struct shim_rhq_entry
 *   +----------------------+  egr_off
 *   | eager ring           |  egr_blocks x 64-byte blocks
 *   +----------------------+  claim_off
 *   | claim table          |  claim_cnt x 64-byte struct shim_claim
 *   +----------------------+  rgn_off (minor 2; rgn_cnt 0: none)
 *   | region table         |  rgn_cnt x 64-byte struct shim_rgn (shim_rgn.h)
 *   +----------------------+  seg_size
 *
 * Senders (any number, any process of the same user on the host) reserve a
 * range of header entries and a contiguous range of eager blocks with one
 * compare-and-swap on ctl->tail (header tail in the low 32 bits, eager
 * tail in the high 32 bits), so the eager ring is consumed in exactly the
 * order the header queue is.  A reservation is a PIO credit grant: free
 * credits are what the consumer has released (ctl->hdr_head,
 * ctl->egr_head), so credits return as the receiver consumes (in batches
 * of SHIM_CREDIT_BATCH entries, and whenever it stops draining).
 *
 * Each header entry carries a generation word (seq).  A producer writes
 * the entry and its payload, then stores seq = position + 1 with release
 * order; the consumer polls the seq of the entry at its head with acquire
 * order and never reads the tail.
 *
 * A producer that dies between its reservation and its publish leaves a
 * hole at the consumer's head that nobody will ever fill.  So every
 * sender first registers a claim slot in the receiver's claim table (end
 * of the segment) and holds an open-file-description lock on one byte
 * of the segment for that slot: the kernel drops the lock when the
 * sender dies, whatever its pid namespace.  Before each compare-and-swap
 * the sender writes its intent (the tail it read, its entry and block
 * counts) into its own slot; the CAS has release order, so a consumer
 * that reads a tail beyond the hole with acquire order also reads the
 * intent of whoever claimed the hole.  When the head stays unpublished
 * past a grace period (shim_claim_rx_recover(), slow path), the consumer looks
 * for the claims that cover the head: if one belongs to a live sender it
 * keeps waiting; if only dead ones do, it publishes the rest of the dead
 * reservation itself as SHIM_RHF_ERR_DEAD entries, the last one carrying
 * the reservation's eager blocks, so the credits return through the
 * ordinary release path.  Per-sender (SPSC) rings would avoid the CAS but
 * make the consumer poll every sender and multiply the ring memory by
 * the number of senders.  Measured in one thread (reserve, publish and
 * consume one header-only packet, 5 M times): 6.8 ns with the CAS
 * before the claim table, 7.4 ns with it, 2.1 ns with a plain tail
 * store; so the CAS is worth about 5 ns of a message, the intent 0.6 ns.
 */
#ifndef SHIM_ABI_H
#define SHIM_ABI_H

#include <assert.h>
#include <errno.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <rdma/hfi/hfi1_ioctl.h>
#include <rdma/hfi/hfi1_user.h>

#define SHIM_ABI_MAJOR 2 /* 2: claim table (dead-sender recovery) */
#define SHIM_ABI_MINOR 2 /* readers accept any minor of their major;
			  * 1: shim_addr.sep (was the high byte of unit, 0);
			  * 2: region table (rgn_off, rgn_cnt; was rsvd1, 0) and
			  *    shim_claim.rgn_busy (was pad);
			  * 3: ctl->polled_ms (was padding) */
#define SHIM_ABI_VERSION ((SHIM_ABI_MAJOR << 16) | SHIM_ABI_MINOR)

#define SHIM_CTL_MAGIC 0x3130534d4858504fULL /* "OPXHMS01" */

#define SHIM_BLOCK 64u              /* PIO block / eager block size */
#define SHIM_INLINE_MAX 16u         /* payload bytes carried in the header */
#define SHIM_MTU_DEFAULT 8192u      /* payload bytes per packet */
#define SHIM_MTU_MAX 65536u
/* Default ring sizes, from measurement: the eager ring is walked by two
 * cores, so its footprint decides whether payload lines are still in
 * cache when they are reused.  256 KiB gave 0.44 us one-way at 256 B
 * against 1.19 us with 4 MiB, with no loss of 8 KiB streaming bandwidth;
 * the header queue size made no measurable difference. */
#define SHIM_HDRQ_CNT_DEFAULT 1024u /* entries, power of two */
#define SHIM_EGR_BYTES_DEFAULT (256u << 10)
#define SHIM_MAX_UNITS 8u
/* Receive contexts per unit: 256 ranks of one job on a 2-socket node
 * must fit with room to spare; names are probed from a per-process
 * cursor, so opening is O(1) expected, not a scan from 0. */
#define SHIM_MAX_CTXTS 1024u
#define SHIM_CLAIM_SLOTS 1024u      /* senders per receive context */

/* ---------------------------------------------------------------------
 * Packet header: 56 bytes written by the sender.  The shim reads only
 * jkey, dlid/dctx and paylen; everything else belongs to the provider,
 * which validates it before use.
 */
struct shim_pkt_hdr {
	uint8_t opcode;   /* provider opcode */
	uint8_t flags;    /* provider flags */
	uint16_t jkey;    /* job key: must equal the receiver's */
	uint16_t slid;    /* source LID */
	uint16_t sctx;    /* source receive context */
	uint16_t dlid;    /* destination LID */
	uint16_t dctx;    /* destination receive context */
	uint32_t paylen;  /* payload bytes in this packet (inline or eager) */
	uint32_t psn;     /* eager packets: CRC32C of header and payload with OPX_PF_CSUM
			     (opx_csum.c), else 0; the udp wire's sequence number is
			     shim_udp_hdr.psn, not this */
	uint32_t msgid;   /* sender's message id (multi-packet, rendezvous) */
	uint64_t tag;     /* tag */
	uint64_t data;    /* remote CQ data */
	union {           /* protocol words (the provider's: opx_proto.h), or inline payload */
		uint8_t inl[SHIM_INLINE_MAX];
		struct {  /* SHIM_RHF_TID packets: where the payload goes */
			uint32_t handle; /* TID registration of the receiving context */
			uint32_t rsvd;
			uint64_t offset; /* byte offset in that registration */
		} tid;
		uint64_t u64[2];
		uint32_t u32[4];
	} p;
};
static_assert(sizeof(struct shim_pkt_hdr) == 56, "shim_pkt_hdr is 56 bytes");

/*
 * RHF: receive header flags, filled by the producer side of the shim.
 *   bits  0..23 eager index (in 64-byte blocks) when SHIM_RHF_EGR is set
 *   bits 24..29 error bits (SHIM_RHF_ERR_*)
 *   bit  30     expected-receive packet: hdr.p.tid.handle is a TID
 *               registration of the receiving context and hdr.p.tid.offset
 *               the byte offset in it where the payload belongs
 *   bit  31     payload is in the eager ring (else inline or none)
 */
#define SHIM_RHF_EGRIDX_SHIFT 0
#define SHIM_RHF_EGRIDX_MASK 0x00ffffffu
#define SHIM_RHF_ERR_SHIFT 24
#define SHIM_RHF_ERR_MASK 0x3fu
#define SHIM_RHF_ERR_LEN (1u << 24)   /* length inconsistent with header */
#define SHIM_RHF_ERR_CRC (1u << 25)   /* wire checksum failed */
#define SHIM_RHF_ERR_DEAD (1u << 26)  /* hole of a dead sender, filled by the
					 consumer: no header; when SHIM_RHF_EGR is
					 set, paylen covers the dead eager blocks */
#define SHIM_RHF_TID (1u << 30)       /* expected receive: place at a TID offset */
#define SHIM_RHF_PLACED (1u << 23)    /* with SHIM_RHF_TID, without SHIM_RHF_EGR: the
					 udp wire placed paylen bytes already */
#define SHIM_RHF_EGR (1u << 31)

#define SHIM_RHF_EGRIDX(rhf) (((rhf) >> SHIM_RHF_EGRIDX_SHIFT) & SHIM_RHF_EGRIDX_MASK)

struct shim_rhq_entry {
	_Atomic uint32_t seq; /* generation: position + 1 when valid */
	uint32_t rhf;
	struct shim_pkt_hdr hdr;
};
static_assert(sizeof(struct shim_rhq_entry) == 64, "rhq entry is one cache line");

/* ---------------------------------------------------------------------
 * Receive context control block, at offset 0 of the segment.  Grouped by
 * who writes it; each group on its own cache line.
 */
struct shim_rcv_ctl {
	/* read-only after ctl->ready is set (written by the owner at create) */
	uint64_t magic;
	uint32_t abi_version;
	uint32_t hdrq_cnt;    /* power of two */
	uint32_t egr_blocks;  /* power of two */
	uint32_t mtu;
	uint32_t owner_pid;
	uint32_t nonce;       /* random; addresses carry it to detect reuse */
	uint64_t owner_start; /* owner's start time (clock ticks since boot) */
	uint64_t hdrq_off;
	uint64_t egr_off;
	uint64_t seg_size;
	uint16_t jkey;
	uint16_t lid;
	uint16_t ctx;
	uint16_t unit;
	_Atomic uint32_t ready;
	uint16_t flags;       /* SHIM_CTL_F_* */
	uint8_t jkey_src;     /* where jkey came from (set by the provider, diagnostics) */
	uint8_t rsvd0;
	/* Receiver's limits, written by the owning provider before it gives
	 * its address out (0: not advertised; senders then use their own):
	 * the largest message it accepts as (multi-packet) eager, and
	 * SHIM_RXF_* wishes.  Senders read them; the receiver still checks. */
	uint32_t rx_eager_max;
	uint32_t rx_flags;
	uint64_t claim_off;   /* claim table: claim_cnt x struct shim_claim */
	uint32_t claim_cnt;
	uint32_t rgn_cnt;     /* region table: rgn_cnt x struct shim_rgn (0: none) */
	uint64_t rgn_off;

	/* producers: any sender, compare-and-swap only */
	alignas(64) _Atomic uint64_t tail; /* hi32 eager tail, lo32 hdr tail */

	/* consumer: the owner only, release stores */
	alignas(64) _Atomic uint32_t hdr_head;
	_Atomic uint32_t egr_head;

	/* owner, written only when it goes to sleep or wakes */
	alignas(64) _Atomic uint32_t sleeping;
	/* owner, now and then while it polls (every 64 empty polls, at most
	 * once a millisecond): CLOCK_MONOTONIC in ms, modulo 2^32.  Peers
	 * read whether the owner is polling at all (shim_rgn.c). */
	_Atomic uint32_t polled_ms;

	/* statistics, owner only */
	alignas(64) _Atomic uint64_t rx_pkts;
	_Atomic uint64_t rx_dropped;  /* failed validation */
	_Atomic uint64_t tx_nocredit; /* reservations refused (producers) */
	_Atomic uint64_t holes_skipped; /* entries of dead senders skipped (owner) */
};
static_assert(offsetof(struct shim_rcv_ctl, tail) == 128, "ctl layout");
static_assert(sizeof(struct shim_rcv_ctl) == 384, "ctl layout");

/* shim_rcv_ctl.rx_flags */
#define SHIM_RXF_CSUM (1u << 0) /* receiver wants payload checksums */

/* ctl->flags.  OWNER_LOCK: the owner holds an OFD write lock on byte 0 of
 * the segment for as long as it lives; the kernel drops it when the owner
 * dies, so "can the lock be taken" is the liveness test, valid across PID
 * namespaces.  Only byte 0: the claim slots' locks (struct shim_claim)
 * are other bytes of the same segment, held by the senders. */
#define SHIM_CTL_F_OWNER_LOCK 0x1u

/* One sender's claim slot, one cache line, written by that sender only
 * (state also by a sender taking over a dead holder's slot).  The
 * holder keeps an OFD write lock on byte claim_off + slot * 64 of the
 * segment for as long as it is registered. */
struct shim_claim {
	_Atomic uint32_t state;    /* bit 0: held; bits 1..31: generation */
	uint32_t rsvd;
	_Atomic uint64_t tail;     /* the ctl->tail value the reservation started from */
	_Atomic uint64_t counts;   /* lo32 header entries, hi32 eager blocks */
	/* The region this sender is copying into or out of right now
	 * (struct shim_rgn, shim_rgn.h): (slot + 1) << 32 | the region's seq, 0 when
	 * none.  Written by the sender only. */
	_Atomic uint64_t rgn_busy;
	uint8_t pad[32];
};
static_assert(sizeof(struct shim_claim) == 64, "claim slot is one cache line");

/* ---------------------------------------------------------------------
 * Endpoint address: what fi_getname returns.  It already carries what the
 * udp wire needs so address vectors stay compatible across hosts.
 */
struct shim_addr {
	uint64_t host_id;  /* host identity: boot id and network namespace */
	uint32_t ipv4;     /* network byte order; 0 when no udp wire */
	uint16_t udp_port; /* network byte order */
	uint16_t lid;
	uint16_t ctx;
	uint8_t unit;
	/* A scalable endpoint (prov/opx_sep.c), 0 for any other:
	 * (contexts - 1) << 4 | (receive contexts - 1).  Its contexts are
	 * consecutive from this one (ctx, udp_port and nonce + i): receive
	 * context i at i, its transmit contexts after all of those. */
	uint8_t sep;
	uint32_t nonce;    /* receive context nonce */
	uint32_t uid;      /* owner uid (shm segment name) */
	uint32_t pid;      /* owner pid (diagnostics, CMA) */
};
static_assert(sizeof(struct shim_addr) == 32, "shim_addr is 32 bytes");

#endif /* SHIM_ABI_H */
