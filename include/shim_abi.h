/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_abi.h - the software SuperNIC as seen by the provider.
 *
 * This header is the only way prov/ talks to driver-shim/.  It is written
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
 * past a grace period (shim_rx_recover(), slow path), the consumer looks
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
#define SHIM_ABI_MINOR 0 /* readers accept any minor of their major */
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
	uint32_t psn;     /* packet sequence number (reliability, udp wire) */
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
	uint32_t rsvd1;

	/* producers: any sender, compare-and-swap only */
	alignas(64) _Atomic uint64_t tail; /* hi32 eager tail, lo32 hdr tail */

	/* consumer: the owner only, release stores */
	alignas(64) _Atomic uint32_t hdr_head;
	_Atomic uint32_t egr_head;

	/* owner, written only when it goes to sleep or wakes */
	alignas(64) _Atomic uint32_t sleeping;

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
	uint8_t pad[40];
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
	uint16_t unit;
	uint32_t nonce;    /* receive context nonce */
	uint32_t uid;      /* owner uid (shm segment name) */
	uint32_t pid;      /* owner pid (diagnostics, CMA) */
};
static_assert(sizeof(struct shim_addr) == 32, "shim_addr is 32 bytes");

/* ---------------------------------------------------------------------
 * Device model.
 */
struct shim_unit_info {
	uint16_t unit;
	uint16_t lid;
	uint32_t mtu;
	int numa_node;
	uint16_t port;     /* always 1 */
	uint16_t state;    /* 1 = active */
};

#define SHIM_WIRE_AUTO 0 /* shm to this host's peers, udp to the others */
#define SHIM_WIRE_SHM 1  /* no udp wire at all */
#define SHIM_WIRE_UDP 2  /* udp to every peer, this host's too (tests) */

/* Fault injection on the udp wire, rates in parts per million of the
 * datagrams sent; the same seed gives the same decisions. */
struct shim_fault {
	uint32_t drop;
	uint32_t dup;
	uint32_t reorder; /* held back and sent after the next datagram */
	uint32_t corrupt; /* one byte flipped after the CRC was computed */
	uint64_t seed;
};

struct shim_dev_params {
	int num_units;      /* software units to model (default 1) */
	int force_unit;     /* -1: choose by NUMA locality */
	uint32_t mtu;       /* payload bytes per packet */
	uint32_t hdrq_cnt;  /* header queue entries, power of two */
	uint32_t egr_bytes; /* eager ring bytes, power of two */
	uint16_t jkey;      /* job key */
	uint8_t jkey_src;   /* opaque to the shim: where jkey came from */
	/* Optional: receives one line per event a user should hear about
	 * (squatted names, unsafe directories).  The shim has no logger. */
	void (*warn)(const char *msg);
	/* The udp wire (shim_udp.c). */
	int wire;             /* SHIM_WIRE_AUTO, _SHM (no udp socket) or _UDP (every peer) */
	char iface[32];       /* interface to bind ("" = first up, not loopback) */
	struct shim_fault fault; /* injected on transmit, udp only */
};

struct shim_dev;  /* opaque: process-wide device handle */
struct shim_ctx;  /* opaque except for the fast-path view below */

/* Fast-path view of the owner's receive context (first member of the
 * opaque struct shim_ctx, so the provider can inline the poll). */
struct shim_rx {
	struct shim_rcv_ctl *ctl;
	struct shim_rhq_entry *hdrq;
	uint8_t *egr;
	uint32_t hdrq_mask;
	uint32_t egr_mask;     /* in blocks */
	uint32_t head;         /* next header position to consume */
	uint32_t egr_head;     /* absolute eager position released so far */
	uint32_t head_pub;     /* head as last published in ctl (credits) */
	uint16_t jkey;
	uint16_t lid;
	uint16_t ctx;
	uint16_t unit;
	uint32_t mtu;
	uint32_t last_nblk;    /* eager blocks of the packet consumed last */
};

/* A sender's mapping of a peer's receive context (a PIO send target). */
struct shim_peer {
	struct shim_rcv_ctl *ctl;
	struct shim_rhq_entry *hdrq;
	uint8_t *egr;
	uint32_t hdrq_mask;
	uint32_t egr_mask;
	uint32_t hdrq_cnt;
	uint32_t egr_blocks;
	uint32_t hdr_credit_head; /* cached ctl->hdr_head */
	uint32_t egr_credit_head; /* cached ctl->egr_head */
	uint32_t mtu;
	uint16_t jkey;
	uint16_t lid;
	uint16_t ctx;
	uint16_t rsvd;
	struct shim_addr addr;
	size_t map_len;
	_Atomic int refcnt;       /* shim_peer_get() / shim_peer_close() */
	struct shim_claim *claim; /* our slot in the peer's claim table */
	/* udp wire only (wire == SHIM_WIRE_UDP): the ring above is a private
	 * send buffer whose positions are the packet sequence numbers; it
	 * is also the replay memory (credits return on acknowledgement). */
	int wire;
	uint32_t udp_ack;   /* stamped on every datagram to it: the reliability
			       module's cumulative ack of what it sent us */
	uint32_t udp_ack_sent; /* the udp_ack last stamped on a datagram */
	uint32_t udp_epoch; /* changes when the remote restarted (flow reset) */
	void *rel;          /* the provider's reliability state for the flow */
};

/* Result of a PIO reservation: npkts consecutive header entries starting
 * at hdr_pos and egr_len bytes of contiguous eager space at egr. */
struct shim_pio_resv {
	uint32_t hdr_pos;
	uint32_t npkts;
	uint32_t egr_idx;  /* index in blocks of the first eager block */
	uint32_t egr_end;  /* absolute eager position after it */
	uint8_t *egr;      /* NULL when no eager space was asked for */
};

/* Device: open once per process (reference counted), close at the end. */
int shim_dev_open(const struct shim_dev_params *params, struct shim_dev **devp);
void shim_dev_close(struct shim_dev *dev);
int shim_dev_num_units(const struct shim_dev *dev);
int shim_dev_unit_info(const struct shim_dev *dev, int unit, struct shim_unit_info *info);
int shim_dev_select_unit(const struct shim_dev *dev); /* NUMA choice or forced */
uint64_t shim_dev_host_id(const struct shim_dev *dev);

/* Contexts: assign a receive context on a unit and fill the hfi1 ABI
 * structures the way the hfi1 driver's HFI1_IOCTL_CTXT_INFO and
 * HFI1_IOCTL_USER_INFO would. */
int shim_ctx_open(struct shim_dev *dev, int unit, struct shim_ctx **ctxp,
		  struct hfi1_ctxt_info *cinfo, struct hfi1_base_info *binfo);
void shim_ctx_close(struct shim_ctx *ctx);
struct shim_rx *shim_ctx_rx(struct shim_ctx *ctx);
void shim_ctx_addr(const struct shim_ctx *ctx, struct shim_addr *addr);
/* Sleeping: arm returns -EAGAIN if a packet is already waiting, else 0;
 * the wait fd becomes readable when a sender publishes to a sleeping
 * context.  Disarm drains the fd. */
int shim_ctx_wait_fd(const struct shim_ctx *ctx);
int shim_ctx_sleep_arm(struct shim_ctx *ctx);
void shim_ctx_sleep_disarm(struct shim_ctx *ctx);

/* Peers: map a remote receive context for sending. -ENOENT when there is
 * no such context, -ESTALE when its nonce differs (reused context),
 * -EPROTO on ABI mismatch, -EHOSTUNREACH for another host (no udp wire
 * yet), -EACCES when the segment is not ours (owner, mode, symlink) or
 * its job key differs from the device's. */
int shim_peer_open(struct shim_dev *dev, const struct shim_addr *addr, struct shim_peer **peerp);
/* The same, a peer on the udp wire going through via's socket (its flows,
 * its acknowledgements); via NULL: the first context that has a socket. */
int shim_peer_open_via(struct shim_dev *dev, struct shim_ctx *via, const struct shim_addr *addr,
		       struct shim_peer **peerp);
/* The job key (and its opaque source byte) of the context addr names,
 * read after the same owner and mode checks as shim_peer_open(): for the
 * warning that names both keys when shim_peer_open() said -EACCES. */
int shim_peer_jkey(struct shim_dev *dev, const struct shim_addr *addr, uint16_t *jkey,
		   uint8_t *src);
void shim_peer_close(struct shim_peer *peer);
/* Owner still running: a lock test on the segment (one syscall, no pid),
 * cheap enough for every few ms of idle progress, never per packet. */
bool shim_peer_alive(const struct shim_peer *peer);
/* Another reference to an open peer (several AV entries, in-flight
 * rendezvous): every get is matched by one shim_peer_close(). */
struct shim_peer *shim_peer_get(struct shim_peer *peer);
/* The process to use for Cross Memory Attach with the peer's owner: the
 * pid recorded and verified (pid plus start time) when the peer was
 * mapped, checked again now.  -ESRCH when it is gone or was never
 * verifiable (another pid namespace), and always for a peer on the udp
 * wire (another host's pid, or one nothing verified).  Call it before
 * and after a copy: a different answer after means the copy may have
 * touched a stranger.
 * "Now" is at most a millisecond old (see SHIM_PEER_ALIVE_NS): within that
 * the pid cannot have been handed to another process. */
int shim_peer_cma_pid(const struct shim_peer *peer, pid_t *pid);
/* The same pid as recorded at open, without asking the kernel again (no
 * syscall): -ESRCH when the owner was never verifiable.  For a read, a
 * liveness check after the copy alone proves the pid named the verified
 * process throughout (a process that is alive afterwards was alive
 * during it, and a live process's pid is not reused). */
int shim_peer_cma_pid_recorded(const struct shim_peer *peer, pid_t *pid);
void shim_peer_wake(struct shim_peer *peer);        /* slow path of publish */

/* Receive-side recovery, slow path (call when polling finds nothing):
 * if the head has been a hole for longer than a grace period and only
 * dead senders' claims cover it, fill the dead reservation with
 * SHIM_RHF_ERR_DEAD entries.  Returns the number of entries filled (the
 * caller polls again), 0 when there is nothing to do yet. */
int shim_rx_recover(struct shim_ctx *ctx);
/* Service registry (shim_svc.c): the endpoint that serves a port (host
 * order) for this uid on this host, so fi_getinfo(node, service) names
 * an endpoint the way IP does.  claim: 0, -EADDRINUSE while a live
 * endpoint holds the port (a dead holder's entry is taken over).
 * release: only while the entry still names addr.  lookup: 0 with the
 * holder's address, -ENOENT when no live endpoint serves the port. */
int shim_svc_claim(struct shim_dev *dev, uint16_t port, const struct shim_addr *addr);
void shim_svc_release(struct shim_dev *dev, uint16_t port, const struct shim_addr *addr);
int shim_svc_lookup(struct shim_dev *dev, uint16_t port, struct shim_addr *addr);
/* The address of the receive context (lid, ctx) of this uid on this host
 * (from the context's own control block: the shim's record, not a
 * packet's word): 0, or -ENOENT when there is none.  ipv4/udp_port stay
 * 0: they are the owner's choice and not recorded there. */
int shim_addr_lookup(struct shim_dev *dev, uint16_t lid, uint16_t ctx, struct shim_addr *addr);
/* This host's IPv4 address (network order): the first interface that is
 * up and not loopback, else 127.0.0.1; and whether ipv4 is one of ours
 * (any loopback address is). */
uint32_t shim_host_ipv4(void);
bool shim_host_has_ipv4(uint32_t ipv4);

/* ---------------------------------------------------------------------
 * The udp wire (shim_udp.c): one UDP socket per receive context, the same
 * packet format as the shm wire behind a datagram header.  It is not
 * reliable: it loses, duplicates and reorders, and validates what it
 * receives (length, magic, CRC32C, job key, destination) before the
 * provider's reliability module (prov/opx_rel.c) sees it.
 *
 * Datagram: struct shim_udp_hdr, then for DATA the 56-byte packet header
 * and paylen payload bytes when SHIM_RHF_EGR (inline payload rides in the
 * packet header).  A udp peer's packet sequence numbers are the positions
 * of its send ring relative to the flow's start (psn 0 = first packet).
 */
#define SHIM_UDP_MAGIC 0x5558504fu /* "OPXU" */
#define SHIM_UDP_VERSION 3u
#define SHIM_UDP_DATA 1u
#define SHIM_UDP_ACK 2u  /* ack only */
#define SHIM_UDP_NACK 3u /* psn: the first packet missing */
/* ACK rhf: the acking side holds packets of ours that arrived and that it
 * has not taken in yet (its owner does not poll, or its ring is full).
 * The peer is alive and busy, not lost: the ack standing still is flow
 * control, as with a shm peer whose ring is full. */
#define SHIM_UDP_ACK_HELD 1u

struct shim_udp_hdr {
	uint32_t magic;
	uint8_t version;
	uint8_t type;
	uint16_t jkey;
	uint32_t psn;       /* DATA: sequence number; NACK: first missing */
	uint32_t ack;       /* every type: the reverse flow's psns below it arrived */
	uint32_t src_nonce; /* sender's receive context (restart detection) */
	uint32_t dst_nonce; /* receiver's; 0 before the first exchange */
	uint32_t rhf;       /* DATA: SHIM_RHF_EGR and SHIM_RHF_TID only; NACK: more
			     * missing; ACK: SHIM_UDP_ACK_HELD */
	uint32_t crc;       /* with this field 0: shim_crc32c of the two headers
			     * (this one, and the packet header of DATA),
			     * continued by shim_crc32c_wide over the payload */
	uint64_t src_host;  /* sender's host id, lid, ctx, unit: its address */
	uint16_t src_lid;
	uint16_t src_ctx;
	uint16_t src_unit;
	uint16_t src_mtu;   /* payload bytes / SHIM_BLOCK the sender can receive
			     * in one datagram (its path MTU): a link sends at
			     * most min(ours, theirs), SHIM_UDP_SAFE_MTU until it
			     * heard the peer */
};
static_assert(sizeof(struct shim_udp_hdr) == 48, "udp header layout");

/* Payload bytes per udp packet for an interface MTU. */
#define SHIM_UDP_OVERHEAD (28u + sizeof(struct shim_udp_hdr) + sizeof(struct shim_pkt_hdr))
/* Payload bytes a 1500-byte path carries: what a link sends before it
 * knows how large a datagram the peer can take (hosts may differ). */
#define SHIM_UDP_SAFE_MTU ((1500u - (uint32_t)SHIM_UDP_OVERHEAD) & ~(SHIM_BLOCK - 1u))

/* A received, validated datagram.  pay points into the shim's receive
 * buffers and is valid until the next shim_udp_recv() on the context. */
struct shim_udp_pkt {
	struct shim_udp_hdr uh;
	struct shim_rhq_entry e; /* DATA: rhf and packet header (copies) */
	const uint8_t *pay;      /* DATA with SHIM_RHF_EGR: paylen bytes */
	struct shim_peer *peer;  /* the flow it belongs to (created on first contact) */
	uint64_t rx_ns;          /* CLOCK_MONOTONIC when its batch was received */
};

/* Receive-side statistics of a context's udp wire. */
struct shim_udp_stats {
	uint64_t rx_datagrams;
	uint64_t tx_datagrams;
	uint64_t drop_len;      /* truncated, too short, length mismatch */
	uint64_t drop_magic;    /* not ours, other version, unknown type */
	uint64_t drop_crc;      /* corrupted */
	uint64_t drop_jkey;     /* another job */
	uint64_t drop_dest;     /* for an earlier context at this port, a stale sender */
	uint64_t drop_nomem;    /* no flow could be created */
	uint64_t fault_drop, fault_dup, fault_reorder, fault_corrupt;
	uint64_t tx_errors;     /* sendmsg failures other than a full buffer */
};

/* Bind the context's socket: ipv4 (network order; 0 = the interface the
 * device chose) and port (network order; 0 = any).  -EADDRINUSE, -errno.
 * A context without a bound socket has no udp wire (wire shm). */
int shim_udp_open(struct shim_ctx *ctx, uint32_t ipv4, uint16_t port);
bool shim_udp_on(const struct shim_ctx *ctx);
/* Up to max validated datagrams; 0 when none is waiting. */
int shim_udp_recv(struct shim_ctx *ctx, struct shim_udp_pkt *pkts, int max);
/* Whether the last shim_udp_recv left the socket empty (it read fewer
 * than it could take, or found nothing): everything that came before it
 * has been read. */
bool shim_udp_rx_empty(const struct shim_ctx *ctx);
/* Put an in-order DATA packet into the context's own receive ring (a TID
 * payload is placed at its offset first): 0, -EAGAIN (ring full: keep
 * it), -EINVAL (bad placement: drop it). */
int shim_udp_deliver(struct shim_ctx *ctx, const struct shim_udp_pkt *pkt);
/* n consecutive packets of one message in one reservation, so packets of
 * other flows cannot come between them (multi-packet eager): 0, -EAGAIN,
 * -EINVAL (not eager data).  *pkts[i] in psn order. */
int shim_udp_deliver_n(struct shim_ctx *ctx, const struct shim_udp_pkt *const *pkts, uint32_t n);
/* An ACK or NACK to the peer (its udp_ack stamped).  A NACK names the
 * first missing psn and in mask bit i whether psn + 1 + i is missing too;
 * an ACK's mask is its flags (SHIM_UDP_ACK_HELD).  Either travels in the
 * rhf field. */
int shim_udp_send_ctl(struct shim_peer *peer, uint8_t type, uint32_t psn, uint32_t mask);
/* Send the staged packet psn again: 0, -ENOENT when it is not staged. */
int shim_udp_resend(struct shim_peer *peer, uint32_t psn);
/* Everything below ack arrived: free it from the send ring (credits). */
void shim_udp_release(struct shim_peer *peer, uint32_t ack);
/* Send-ring state: psns below *acked are freed, below *sent transmitted. */
void shim_udp_tx_state(const struct shim_peer *peer, uint32_t *acked, uint32_t *sent);
/* CLOCK_MONOTONIC ns of the last datagram from the peer (its flow's
 * creation before any), and how many went to it (wrapping; a caller
 * that notes when the count moved knows how long the flow was silent on
 * our side without a clock read on every send). */
void shim_udp_times(const struct shim_peer *peer, uint64_t *rx_ns, uint32_t *tx_count);
/* now - then, 0 when then is later: a stamp taken after the caller read
 * its clock (or by another thread) must not wrap an unsigned age. */
static inline uint64_t shim_udp_since(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}
/* A counter bumped on a hot path instead of a clock read there: a
 * periodic reader notes when it last saw it move (*seen, *moved_ns), and
 * shim_udp_since(now, *moved_ns) is how long it stood still, to a tick. */
static inline void shim_udp_note_moved(uint64_t count, uint64_t *seen, uint64_t *moved_ns,
				       uint64_t now)
{
	if (count != *seen) {
		*seen = count;
		*moved_ns = now;
	}
}
/* Keepalive period: a flow silent this long on our side gets an ack
 * (the default; shim_udp_watch shortens it, so that a peer that declares
 * silence of its timeout death hears a few in that time). */
#define SHIM_UDP_KEEPALIVE_NS 1000000000ull
/* The owner (the provider) progresses the context from now on: start the
 * watchdog now, not with the first flow, so that a process that computes
 * before it ever polls still answers a first contact (HELD acks), and
 * send keepalives every keepalive_ns (0: the default). */
void shim_udp_watch(struct shim_ctx *ctx, uint64_t keepalive_ns);
/* The peer stopped answering: shim_peer_alive() says false from now on
 * and nothing more is transmitted to it. */
void shim_udp_fail(struct shim_peer *peer);
/* The address the peer told us in its datagrams (lid 0 until it spoke). */
int shim_udp_peer_addr(const struct shim_peer *peer, struct shim_addr *addr);
/* Iterate the context's udp flows (NULL starts; NULL at the end). */
struct shim_peer *shim_udp_next(struct shim_ctx *ctx, struct shim_peer *prev);
/* Send what fault injection held back. */
void shim_udp_flush(struct shim_ctx *ctx);
void shim_udp_stats(const struct shim_ctx *ctx, struct shim_udp_stats *st);

/* Error mapping from the shim's -errno to strings for logs. */
const char *shim_strerror(int err);

/* CRC32C (shim_crc.c): the udp wire's datagram CRC and the provider's
 * packet checksum.  shim_crc32c chains (crc of a buffer = crc over its
 * pieces in order); shim_crc32c_wide is the faster three-lane variant for
 * long buffers (a different value, the same on every machine). */
void shim_crc_init(void);
uint32_t shim_crc32c(uint32_t crc, const void *buf, size_t len);
uint32_t shim_crc32c_wide(uint32_t crc, const void *buf, size_t len);
bool shim_crc_force_sw(bool sw); /* tests: the table on any CPU; returns the old setting */

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
	uint32_t b = r->egr_end + SHIM_PIO_AHEAD;

	if ((uint32_t)(h - p->hdr_credit_head) < p->hdrq_cnt)
		shim_prefetchw(&p->hdrq[h & p->hdrq_mask]);
	if (r->egr && (uint32_t)(b - p->egr_credit_head) < p->egr_blocks)
		shim_prefetchw(p->egr + (size_t)(b & p->egr_mask) * SHIM_BLOCK);
}

/* For a sender that alternates sends and receives (a ping-pong, a
 * request and its reply): take ownership now of the eager blocks its
 * next send of the same size will write, SHIM_PIO_OWN_MAX at most, while
 * it waits for the answer.  Without it every line of that send's copy is
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
	if (nblk > SHIM_PIO_OWN_MAX)
		nblk = SHIM_PIO_OWN_MAX;
	for (uint32_t k = 0; k < nblk; k++) {
		uint32_t b = r->egr_end + k;

		if ((uint32_t)(b - p->egr_credit_head) >= p->egr_blocks)
			break;
		shim_prefetchw(p->egr + (size_t)(b & p->egr_mask) * SHIM_BLOCK);
	}
}

/* Publish entry i: rhf describes where its payload is; release order makes
 * the header and payload visible before the generation word. */
static inline void shim_pio_publish(struct shim_peer *p, const struct shim_pio_resv *r, uint32_t i,
				    uint32_t rhf)
{
	struct shim_rhq_entry *e = shim_pio_entry(p, r, i);

	e->rhf = rhf;
	atomic_store_explicit(&e->seq, r->hdr_pos + i + 1, memory_order_release);
	/* Relaxed check of the sleep flag: a wake-up missed in the race
	 * window costs the sleeper one bounded poll interval, never a hang. */
	if (atomic_load_explicit(&p->ctl->sleeping, memory_order_relaxed))
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
	shim_prefetch(rx->egr + (size_t)(rx->egr_head & rx->egr_mask) * SHIM_BLOCK);
	if (rx->last_nblk == 2)
		shim_prefetch(rx->egr + (size_t)((rx->egr_head + 1) & rx->egr_mask) * SHIM_BLOCK);
}

/* While draining small packets: fetch the header entry SHIM_RX_AHEAD
 * behind the head, so that its miss (a line the sender wrote from another
 * core) overlaps the work on the packets before it instead of following
 * it; once this drain has taken SHIM_RX_DEEP packets in a row the sender
 * is well ahead, and one more entry is fetched.  Measured (opx_msgrate
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
	shim_prefetch(&rx->hdrq[(rx->head + SHIM_RX_AHEAD) & rx->hdrq_mask]);
	if (taken >= SHIM_RX_DEEP)
		shim_prefetch(&rx->hdrq[(rx->head + SHIM_RX_AHEAD + 1) & rx->hdrq_mask]);
	if (taken >= 2 * SHIM_RX_DEEP) { /* fills 4 and 5 once, then 5 is the new one */
		shim_prefetch(&rx->hdrq[(rx->head + SHIM_RX_AHEAD + 2) & rx->hdrq_mask]);
		shim_prefetch(&rx->hdrq[(rx->head + SHIM_RX_AHEAD + 3) & rx->hdrq_mask]);
	}
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

#endif /* SHIM_ABI_H */
