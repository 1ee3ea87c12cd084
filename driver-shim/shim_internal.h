/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_internal.h - private definitions shared by the files of
 * driver-shim/.  The provider never includes this header; it sees the
 * device only through include/shim_abi.h and the shim_*.h beside it.
 * Unit tests may include it to inspect counters.  The SDMA engine's state
 * machine is in shim_sdma.h, the trust checks in shim_trust.h.
 */
#ifndef SHIM_INTERNAL_H
#define SHIM_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "shim_ring.h"
#include "shim_udp_wire.h"
#include "shim_dma.h"

/* The control block is padded to a page so the header queue starts page
 * aligned (hugepage-friendly, and keeps the producer CAS line away from
 * the first entries). */
#define SHIM_CTL_PAD 4096u

/* A segment whose control block is not (yet) valid is only considered
 * abandoned after this long: its creator may still be initialising it. */
#define SHIM_STALE_AGE_S 5

/* How often one context number is reclaimed and retried before moving
 * on; bounds the loop if some other process keeps recreating the name. */
#define SHIM_RECLAIM_TRIES 4

#define SHIM_NAME_MAX 64

/* Where shm_open() names live (glibc), read by the sweep of abandoned
 * segments at every context open (shim_ctx.c), which reads at most this
 * many entries: a directory other software fills must not make every
 * open slow. */
#define SHIM_SHM_DIR "/dev/shm"
#define SHIM_SWEEP_SCAN_MAX 65536u

/* Process-wide device handle.  Read-only after shim_dev_open() except for
 * refcnt (under the global device mutex) and the statistics. */
struct shim_dev {
	int refcnt;
	int num_units;
	struct shim_dev_params params; /* defaults resolved */
	struct shim_unit_info units[SHIM_MAX_UNITS];
	uint64_t host_id;
	bool numa_ok;
	int wake_fd; /* unbound datagram socket used to wake sleeping peers */
	_Atomic uint64_t stale_reclaimed; /* abandoned segments unlinked */
	/* Where the next context-number search starts, per unit: random at
	 * open, then just past the last number taken, so n opens probe O(n)
	 * names in all instead of O(n^2). */
	_Atomic uint32_t ctx_next[SHIM_MAX_UNITS];
	_Atomic uint64_t names_squatted; /* names skipped: owned by another uid */
	/* This process's open contexts, one bit per number: the sweep skips
	 * them rather than judge them live with four syscalls each. */
	_Atomic uint64_t ctx_mine[SHIM_MAX_UNITS][SHIM_MAX_CTXTS / 64];
	/* The udp wire: peers on other hosts are opened on the socket of the
	 * first context that bound one (shim_udp.c); under the provider's
	 * domain lock like every peer. */
	struct shim_ctx *udp_home;
};

/* The consumer's head standing still: since when (shim_claim.c).  Only
 * once it has not moved for SHIM_HOLE_GRACE_NS does the consumer read the
 * producers' tail (a line every send writes) and, if the head is a hole,
 * ask the claim table; then again every SHIM_HOLE_RECHECK_NS. */
#define SHIM_HOLE_GRACE_NS 20000000ull   /* 20 ms */
#define SHIM_HOLE_RECHECK_NS 10000000ull /* 10 ms */
struct shim_hole {
	bool armed;
	uint32_t pos;       /* the head position that stood still */
	uint64_t next_ns;   /* CLOCK_MONOTONIC time of the next look */
	uint64_t waits;     /* looks that found a live claimant (statistics) */
	uint64_t unowned;   /* looks that found no claim at all (statistics) */
};

/* Receive context.  struct shim_rx MUST stay first: shim_ctx_rx() and
 * the provider's inline poll rely on the two addresses being equal. */
struct shim_ctx {
	struct shim_rx rx;
	struct shim_dev *dev;
	void *map;
	size_t map_len;
	int sock_fd; /* bound to the wake-up path (shim_dev_name_wake) */
	int seg_fd;  /* holds the OFD lock that says "owner alive" */
	pid_t owner; /* creating process: only it retires the context */
	bool sock_bound;
	uint32_t nonce;
	uint32_t hdrq_cnt;
	uint32_t egr_blocks;
	/* Where the claim table is, as this process laid it out.  The copy in
	 * the control block is for peers only: any process of our uid can
	 * rewrite it, so the owner never reads it back (map_len is the
	 * segment size the same way). */
	uint64_t claim_off;
	uint32_t claim_cnt;
	/* The region table (shim_rgn.c), laid out and written by us only:
	 * the keys and seqs of its entries are kept here too. */
	uint64_t rgn_off;
	uint32_t rgn_cnt;
	uint64_t rgn_key[SHIM_RGN_SLOTS];
	uint32_t rgn_seq[SHIM_RGN_SLOTS];
	uint32_t polled_ms; /* the last ctl->polled_ms we stored */
	char name[SHIM_NAME_MAX]; /* shm segment name */
	struct shim_tid_table *tid; /* expected receive registrations (shim_tid.c) */
	struct shim_hole hole;      /* dead-sender recovery (shim_claim.c) */
	struct shim_udp *udp;       /* the udp wire, NULL when none (shim_udp.c) */
	uint8_t udp_eager_kib;      /* shim_udp_advertise: src_eager of our datagrams */
	int wait_fd;                /* epoll of sock_fd and (while a sleep is armed) the
				     * udp socket; -1: sock_fd */
};

/* CLOCK_MONOTONIC in ns (vDSO: no syscall). */
static inline uint64_t shim_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Owner: "I am polling" (ctl->polled_ms, read by shim_rgn_owner_polling):
 * a store only when the millisecond changed.  shim_claim_rx_recover calls it
 * with the clock it reads on an empty poll anyway. */
static inline void shim_ctx_note_polled(struct shim_ctx *ctx, uint64_t now_ns)
{
	uint32_t ms = (uint32_t)(now_ns / 1000000ull);

	if (ms != ctx->polled_ms) {
		ctx->polled_ms = ms;
		atomic_store_explicit(&ctx->rx.ctl->polled_ms, ms, memory_order_relaxed);
	}
}

/* The shm part of a context's address (shim_ctx_addr adds the udp wire's
 * ipv4 and port): what the context's own udp wire needs to open it. */
static inline void shim_ctx_addr_shm(const struct shim_ctx *ctx, struct shim_addr *addr)
{
	memset(addr, 0, sizeof(*addr));
	addr->host_id = ctx->dev->host_id;
	addr->lid = ctx->rx.lid;
	addr->ctx = ctx->rx.ctx;
	addr->unit = ctx->rx.unit;
	addr->nonce = ctx->nonce;
	addr->uid = (uint32_t)geteuid();
	addr->pid = (uint32_t)getpid();
}

/* The udp wire of a context, and a udp peer (shim_udp.c). */
struct shim_udp;
struct shim_udp_link;
struct shim_peer_priv;
void shim_udp_close(struct shim_ctx *ctx);
/* A sleep is armed / over: the socket is in the context's epoll set only
 * meanwhile (a socket in an epoll set costs every datagram to it and every
 * send from it a wake-up callback under a lock, ~0.2 us each here). */
int shim_udp_wait_arm(struct shim_ctx *ctx);
void shim_udp_wait_disarm(struct shim_ctx *ctx);
int shim_udp_peer_open(struct shim_dev *dev, struct shim_ctx *home, const struct shim_addr *addr,
		       struct shim_peer **peerp);
void shim_udp_peer_put(struct shim_peer_priv *pp);
bool shim_udp_peer_alive(const struct shim_peer_priv *pp);
void shim_udp_kick(struct shim_peer_priv *pp); /* publish hook: transmit */
/* Between these, publishes to a udp peer only accumulate; unhold sends
 * them in batches (the SDMA engine wraps each run in them). */
void shim_udp_hold(struct shim_peer_priv *pp);
void shim_udp_unhold(struct shim_peer_priv *pp);
/* Zero copy (the SDMA engine, shim_udp_tx.c): the packet reserved at send
 * ring position pos of a udp peer takes its payload from pay, memory the
 * caller keeps unchanged until shim_udp_released says the peer has it,
 * instead of from the ring; false (not a udp peer, no memory): copy it
 * into the ring as usual.  Between reserve and publish. */
bool shim_udp_ext_set(struct shim_peer *peer, uint32_t pos, const void *pay);
/* Whether the peer has every packet before send ring position end that
 * was published in link epoch epoch (the peer's udp_epoch then): 1 it
 * acknowledged them, 0 not yet, -EPIPE it never will (the link died, the
 * peer restarted or the context closed), and they are never sent again. */
int shim_udp_released(const struct shim_peer *peer, uint32_t end, uint32_t epoch);
void shim_udp_addr_fill(const struct shim_ctx *ctx, struct shim_addr *addr);
/* Stop every watchdog thread of this process (shim_udp_wd.c; the
 * library's destructor: an application may exit, and libfabric dlclose
 * us, with contexts still open); the contexts themselves are left alone. */
void shim_udp_unload(void);
/* A peer on this host's shm wire, whatever the wire setting (shim_shm.c);
 * the udp wire opens its own context this way to deliver into it, and
 * drops that reference with shim_shm_peer_free. */
int shim_shm_peer_open(struct shim_dev *dev, const struct shim_addr *addr,
		       struct shim_peer **peerp);
void shim_shm_peer_free(struct shim_peer *peer);
void shim_shm_peer_wake(struct shim_peer *peer); /* its owner sleeps: wake it */

/* Expected receive table of a context, private to the owning process
 * (shim_tid.c).  Created and destroyed with the context; destroy is safe
 * on a context whose table was never created. */
struct shim_tid_table;
int shim_tid_table_create(struct shim_ctx *ctx);
void shim_tid_table_destroy(struct shim_ctx *ctx);
/* The udp wire places a TID payload straight from its datagram, after the
 * datagram's MAC and sender were checked, when the handle is live in
 * this generation, the range inside the registration and the sender
 * (slid, sctx) the one it was bound to; the SHIM_RHF_PLACED entry that
 * follows claims the bytes (shim_tid_place). */
int shim_tid_place_wire(struct shim_ctx *ctx, uint32_t handle, uint64_t off, const void *src,
			uint32_t len, uint16_t slid, uint16_t sctx);

/* A peer as allocated by shim_peer_open(): the public view first, so the
 * pointer handed to the provider can be converted back. */
struct shim_peer_priv {
	struct shim_peer pub;
	struct shim_dev *dev;
	struct sockaddr_un wake_addr;
	socklen_t wake_len;
	/* The peer's segment, kept open: the owner's liveness lock is tested
	 * through it (shim_trust_seg_lock_probe) and it holds the OFD lock of our
	 * claim slot (shim_claim.c); the two locks cover different bytes. */
	int seg_fd;
	bool owner_lock;      /* the context's owner holds SHIM_CTL_F_OWNER_LOCK */
	int claim_idx;        /* our slot in the peer's claim table */
	uint64_t claim_off;   /* the claim table, from the snapshot checked at open */
	uint32_t claim_cnt;
	uint64_t rgn_off;     /* the region table, likewise (rgn_cnt 0: none) */
	uint32_t rgn_cnt;
	pid_t owner_pid;      /* the owner as verified at open (CMA) ... */
	uint64_t owner_start; /* ... with its start time; pid 0: not verified */
	int owner_pidfd;      /* a pidfd of that very process, -1 where unavailable */
	_Atomic uint64_t owner_seen_ns; /* CLOCK_MONOTONIC of the last check that found it */
	struct shim_udp_link *link;     /* udp peers: the flow (shim_udp.c) */
	const struct shim_wire_ops *wire; /* set when the peer is opened */
};

/* A wire's side of a peer, chosen when the peer is opened (shim_peer.c
 * calls these; the wires never call back up into it).  put: the last
 * reference is gone; alive: false once the peer's context is known gone
 * (never blocks); wake: the peer has something new - the shm wire wakes
 * a sleeping owner, the udp wire transmits what was published. */
struct shim_wire_ops {
	const char *name;
	void (*put)(struct shim_peer_priv *pp);
	bool (*alive)(const struct shim_peer_priv *pp);
	void (*wake)(struct shim_peer_priv *pp);
};
extern const struct shim_wire_ops shim_shm_wire; /* shim_shm.c */
extern const struct shim_wire_ops shim_udp_wire; /* shim_udp.c */

/* Fault a shared mapping's pages in, writable, before the first packet
 * needs them (shim_dev.c): a process with many peers otherwise takes a
 * page fault for each page of each ring on its first lap.  Best effort
 * (kernels before 5.14 lack MADV_POPULATE_WRITE); at most the first
 * SHIM_PREFAULT_MAX bytes. */
#define SHIM_PREFAULT_MAX ((size_t)16 << 20) /* bytes faulted in per mapping */
void shim_dev_prefault(void *addr, size_t len);

/* Claim slots (shim_claim.c): register in the mapped peer's claim table
 * at pp->claim_off, pp->claim_cnt (fd: the segment, kept open to hold the
 * slot's lock), and leave it. */
int shim_claim_register(struct shim_peer_priv *pp, int fd);
void shim_claim_unregister(struct shim_peer_priv *pp);
/* The owner's view of its own claim table: the slots, and whether slot i
 * is held by a live sender (true when it cannot tell). */
struct shim_claim *shim_claim_slots(const struct shim_ctx *ctx);
bool shim_claim_alive(const struct shim_ctx *ctx, uint32_t i);
/* Byte of the segment whose OFD write lock marks slot i of a claim table
 * at claim_off as held.  claim_off is always a private, checked copy. */
static inline off_t shim_claim_lock_off(uint64_t claim_off, uint32_t i)
{
	return (off_t)(claim_off + (uint64_t)i * sizeof(struct shim_claim));
}

/* ---------------------------------------------------------------------
 * Reading a control block some other process maps too.  Any process of
 * our uid can write it at any time, so a field read twice may differ
 * between the check and the use, and offset + length may wrap.  Readers
 * copy it once (shim_ctl_snapshot), check the copy with shim_range_ok and
 * use only the copy; owners use the geometry they keep in private memory.
 */

/* [off, off + len) lies inside [0, size), computed so nothing wraps. */
static inline bool shim_range_ok(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* Copy the part of ctl its owner writes before ready (the first cache
 * line) into *snap, once, and return ready.  ready is loaded first with
 * acquire, so when it is set the copy holds what the owner published.
 * The signal fence keeps the compiler from reading a field from the
 * shared block again later in place of the copy. */
static inline uint32_t shim_ctl_snapshot(struct shim_rcv_ctl *snap,
					 const struct shim_rcv_ctl *ctl)
{
	uint32_t ready = atomic_load_explicit(&ctl->ready, memory_order_acquire);

	memset(snap, 0, sizeof(*snap));
	memcpy(snap, ctl, offsetof(struct shim_rcv_ctl, tail));
	atomic_signal_fence(memory_order_seq_cst);
	return ready;
}

/* Names shared by the context owner and its peers (shim_dev.c). */
int shim_dev_name_segment(char *buf, size_t len, uint32_t uid, unsigned int unit, unsigned int ctx);
void shim_dev_name_wake_dir(char *buf, size_t len, uint32_t uid);
void shim_dev_name_wake(struct sockaddr_un *sun, socklen_t *len, uint32_t uid, unsigned int unit,
			unsigned int ctx, uint32_t nonce);

/* Process identity (shim_dev.c).  shim_dev_proc_starttime() returns 0 and the
 * start time (field 22 of /proc/<pid>/stat; pid 0 = self) or -errno. */
int shim_dev_proc_starttime(pid_t pid, uint64_t *start);
/* True only when the owner is certainly gone: no such pid, or the pid was
 * reused by a process that started at another time.  A pid that exists
 * but whose /proc entry cannot be read counts as alive. */
bool shim_dev_proc_gone(pid_t pid, uint64_t start);

#endif /* SHIM_INTERNAL_H */
