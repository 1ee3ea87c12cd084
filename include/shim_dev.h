/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_dev.h - the software SuperNIC's device model, part of the shim ABI
 * (same version as shim_abi.h): units, receive contexts and the peers a
 * context sends to, with the fast-path views of both (struct shim_rx,
 * struct shim_peer) that shim_ring.h works on; and the shim's services
 * (error strings, CRC32C).
 */
#ifndef SHIM_DEV_H
#define SHIM_DEV_H

#include "shim_abi.h"
#include "shim_rgn.h"

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

/* What the udp wire's per-datagram MAC covers (struct shim_udp_hdr.auth).
 * OFF: nothing (benchmarks; anyone who can reach the socket can inject).
 * HEADER: both headers of every datagram, control datagrams whole.
 * FULL: the payload too.  Keyed by shim_dev_params.auth_key. */
#define SHIM_AUTH_OFF 0
#define SHIM_AUTH_HEADER 1
#define SHIM_AUTH_FULL 2
#define SHIM_AUTH_KEY_BYTES 32

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
	int auth;             /* SHIM_AUTH_*: the udp wire's MAC */
	uint8_t auth_key[SHIM_AUTH_KEY_BYTES]; /* the job's secret (auth != OFF) */
	uint32_t max_links;   /* udp flows per context (0: SHIM_UDP_MAX_LINKS) */
	bool udp_no_gro;      /* do not ask for UDP_GRO (one datagram per receive) */
	bool udp_no_pack;     /* every packet its own datagram (no PACK) */
	bool udp_no_crc;      /* no CRC32C of payloads (SHIM_UDP_AUTH_PCRC): the UDP
			       * checksum only; fault.corrupt forces it back on */
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
/* The same at context number want (< 0: any) with nonce (0: a random
 * one): -EBUSY when that number is taken.  A scalable endpoint opens its
 * contexts at consecutive numbers and nonces, so that a peer derives
 * every one from the first (prov/opx_sep.c). */
int shim_ctx_open_at(struct shim_dev *dev, int unit, int want, uint32_t nonce,
		     struct shim_ctx **ctxp, struct hfi1_ctxt_info *cinfo,
		     struct hfi1_base_info *binfo);
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
int shim_shm_jkey(struct shim_dev *dev, const struct shim_addr *addr, uint16_t *jkey,
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

/* One-sided copies without the owner's progress (shim_rgn.c; the table
 * and its protocol are in shim_rgn.h).  Owner: publish a region of len
 * bytes at base whose first byte peers address as raddr (access:
 * SHIM_RGN_READ and/or SHIM_RGN_WRITE): 0, -EEXIST, or -ENOSPC when its
 * key's slots are taken (peers then go through the owner).  Retract it:
 * 0 once no peer can be copying with it any more (-ETIMEDOUT after
 * 10 s of a live peer still copying), -ENOENT when not published.
 * Calls on one context are not concurrent (the provider's lock). */
int shim_rgn_publish(struct shim_ctx *ctx, uint64_t key, uint64_t raddr, const void *base,
		     uint64_t len, uint32_t access);
int shim_rgn_retract(struct shim_ctx *ctx, uint64_t key);
/* Peer: copy len bytes between the local liov and [raddr, raddr + len) of
 * the peer's region key, written into it (write) or read from it, with
 * one Cross Memory Attach call into the process the shim verified.
 * len, or: -ENOENT no such region published (or no table), -EACCES access,
 * -ERANGE outside it, -EAGAIN retracted meanwhile, -ESRCH no verified
 * process (udp wire, another pid namespace, gone), -EFAULT a short copy,
 * -EPERM and other errnos from the kernel.  On any error the caller
 * sends the operation through the owner, which gives its own verdict. */
ssize_t shim_rgn_peer_copy(struct shim_peer *peer, uint64_t key, uint64_t raddr,
			   const struct iovec *liov, size_t lcnt, size_t len, bool write);
/* Whether the owner of a shm peer polled within the last within_ms
 * milliseconds (ctl->polled_ms: shim_claim_rx_recover notes each empty
 * poll) and is not asleep in a blocking wait (true for any other peer: nothing
 * to tell). */
bool shim_rgn_owner_polling(const struct shim_peer *peer, uint32_t within_ms);
void shim_peer_wake(struct shim_peer *peer);        /* slow path of publish */

/* Receive-side recovery (shim_claim.c), slow path (call when polling
 * finds nothing): if the head has been a hole for longer than a grace
 * period and only dead senders' claims cover it, fill the dead
 * reservation with SHIM_RHF_ERR_DEAD entries.  Returns the number of
 * entries filled (the caller polls again), 0 when there is nothing to do
 * yet. */
int shim_claim_rx_recover(struct shim_ctx *ctx);
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
int shim_svc_addr_lookup(struct shim_dev *dev, uint16_t lid, uint16_t ctx, struct shim_addr *addr);
/* This host's IPv4 address (shim_dev.c; network order): the first
 * interface that is up and not loopback, else 127.0.0.1; and whether
 * ipv4 is one of ours (any loopback address is). */
uint32_t shim_dev_host_ipv4(void);
bool shim_dev_host_has_ipv4(uint32_t ipv4);

/* Error mapping from the shim's -errno to strings for logs (shim_dev.c). */
const char *shim_dev_strerror(int err);

/* CRC32C (shim_crc.c): the udp wire's datagram CRC and the provider's
 * packet checksum.  shim_crc32c chains (crc of a buffer = crc over its
 * pieces in order); shim_crc32c_wide is the faster three-lane variant for
 * long buffers (a different value, the same on every machine). */
void shim_crc_init(void);
uint32_t shim_crc32c(uint32_t crc, const void *buf, size_t len);
uint32_t shim_crc32c_wide(uint32_t crc, const void *buf, size_t len);
bool shim_crc_force_sw(bool sw); /* tests: the table on any CPU; returns the old setting */

#endif /* SHIM_DEV_H */
