/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rma.h - one-sided communication: memory-region keys (opx_mr.c), RMA
 * (opx_rma.c: the engine's initiator side; opx_rma_target.c: its target
 * side; opx_rma_api.c: the fi_ops_rma calls) and atomics (opx_atomic.c:
 * the kernels, validity; opx_atomic_api.c: the fi_ops_atomic calls).
 *
 * Wire protocol, the same on both wires.  Every one-sided operation is split
 * into chunks of at most one MTU (on the udp wire: the path's datagram
 * payload, 8 KiB on jumbo frames, 1344 B on a 1500-byte path; the
 * reliability module keeps them exactly-once and in order, opx_rel.c);
 * each chunk is one request packet that the
 * target's progress executes in arrival order and answers with exactly one
 * response packet.  The initiator completes the operation when every
 * chunk has been answered, so a completion always means the data was
 * placed (FI_DELIVERY_COMPLETE, which implies FI_TRANSMIT_COMPLETE and
 * FI_INJECT_COMPLETE).
 *
 *   request (OPX_OP_RMA_WRITE / RMA_READ / ATOMIC)
 *     tag       remote address (virtual, or offset into the region)
 *     data      remote CQ data (writedata, last chunk, OPX_PF_CQDATA);
 *               the first of several chunks: the operation's whole length
 *               (atomics: operand bytes), checked there before any lands
 *     rma.key   MR key (hdr.p as union opx_proto_pw, opx_proto.h)
 *     rma.op    cookie (bits 0..31), chunk index (32..62), last chunk (63)
 *     msgid     RMA_READ: bytes wanted; ATOMIC: op | dt << 8 | kind << 16;
 *               RMA_WRITE last chunk: total length (low 32 bits, for the
 *               target's CQ entry)
 *     payload   write data, or atomic operands (then compare values);
 *               an atomic's chunks hold whole elements, its compare values
 *               and fetched values in the same chunk as its operands, so
 *               a chunk is at most half an MTU of compare operands
 *   response (OPX_OP_RMA_RESP)
 *     tag       the request's rma.op (cookie and chunk)
 *     data      status: 0 or a positive FI_E* code
 *     payload   read data or fetched values (inline up to 16 bytes)
 *
 *
 * Large reads and writes (from FI_OPX_RMA_CMA bytes) are one request with
 * OPX_PF_CMA set and a struct opx_rma_cma_req as payload: the initiator's
 * buffer.  The target checks key, range and access for the whole length;
 * then the data moves with one Cross Memory Attach copy, always written
 * by process_vm_writev into the other process (on this kernel writing
 * into another process runs at about twice the speed of reading from it:
 * 15 against 8 GB/s at 16 MiB), and always with the process the shim
 * verified for that peer, never a pid from a packet:
 *
 *   read:   the target writes the region into the initiator's buffer and
 *           answers with one response;
 *   write:  the target answers OPX_PF_GRANT with the region's pieces
 *           (struct opx_rma_grant); the initiator writes its buffer into
 *           them, completes, and tells the target with an RMA_WRITE
 *           OPX_PF_CMA | OPX_PF_GRANT "written" packet (tag: remote
 *           address, rma.key: key, msgid: length, low 32 bits), from
 *           which the target raises its remote CQ data and counters.
 *           Once CMA has worked with an address, CMA writes to it are
 *           pipelined: their requests go out back to back and each is
 *           written when its grant comes (grants come in request order);
 *           any other operation waits until none is unanswered and every
 *           "written" packet is out, so nothing overtakes them.  A write
 *           to an address not known to work holds everything behind it.
 *           If one pipelined write falls back to chunks (a refusal), the
 *           ones behind it follow it, in order, whatever their answer.
 *
 * CMA needs a process the shim verified behind the peer: never one on the
 * udp wire (another host's pid, or under FI_OPX_WIRE=udp one nothing
 * verified), nor one in another pid namespace.  The initiator does not
 * try it with such a peer.  A target that may not use CMA
 * (FI_OPX_RNDV_CMA=0 there), or has no verified process for the
 * initiator, answers with
 * OPX_PF_CMA set and changes nothing, and an initiator whose CMA write is
 * refused by the kernel gives up the grant: either way the operation is
 * sent again in chunks and the address is remembered as one not to try
 * again.  Until a CMA operation to an address has worked once, later
 * operations of the endpoint wait for its answer, so a fallback never
 * reorders them.
 *
 * Direct path (no packet at all): on the shm wire, a read or write from
 * FI_OPX_RMA_DIRECT_READ/_WRITE bytes (any size while the target does not
 * poll: FI_OPX_RMA_DIRECT_IDLE_MS) to a region the target published in
 * its receive context's region table (opx_mr.c publishes, shim_rgn.c has
 * the table and its protocol) is copied by the initiator with one CMA
 * call and completed at once; only while nothing else one-sided of the
 * endpoint is outstanding, never with remote CQ data.  Anything it cannot
 * do goes the ways above.
 *
 * The target checks key, range and access before touching memory; a bad
 * request gets a non-zero status and changes nothing.  Because every
 * packet of one initiator goes through one ordered header queue (on the
 * udp wire: one flow, delivered in order) and the
 * target executes them one at a time, atomics of concurrent initiators on
 * one target are serialised by that target, and RMA operations between
 * two endpoints are executed in the order they were posted.
 */
#ifndef OPX_RMA_H
#define OPX_RMA_H

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include "opx.h"
#include "opx_proto.h"

#define OPX_MR_ACCESS                                                                              \
	(FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)

/* ---------------------------------------------------------------------
 * Memory-region keys (opx_mr.c): struct opx_mr_table in opx.h, a chained
 * hash table per domain grown at one entry per bucket, so the target's
 * lookup is O(1).  All under the domain lock.
 */
/* Resolve a remote access at the target: key, then [addr, addr+len)
 * inside the region, then access rights (need: FI_REMOTE_READ and/or
 * FI_REMOTE_WRITE).  On success *out holds the local pieces (*outcnt of
 * them, at most OPX_IOV_LIMIT) and *mrp (if not NULL) the region.
 * Returns 0, -FI_EACCES (no such key, missing permission) or -FI_EINVAL
 * (outside the region).  Lock held. */
int opx_mr_resolve_locked(struct opx_domain *d, uint64_t key, uint64_t addr, size_t len,
			  uint64_t need, struct iovec *out, size_t *outcnt, struct opx_mr **mrp);
/* Whether remote addresses are virtual addresses (FI_MR_VIRT_ADDR or
 * FI_MR_BASIC), else 0-based offsets into the region. */
bool opx_mr_virt_addr(const struct opx_domain *d);
/* The endpoint's region table (opx_mr.c): filled with the domain's
 * regions when it is enabled (if it takes one-sided operations without
 * events), emptied at close.  Domain lock held. */
struct opx_ep;
void opx_mr_ep_enable_locked(struct opx_ep *ep);
void opx_mr_ep_close_locked(struct opx_ep *ep);

/* ---------------------------------------------------------------------
 * Atomic kernels (opx_atomic.c).
 */
enum opx_atomic_kind {
	OPX_AK_WRITE = 0, /* fi_atomic */
	OPX_AK_FETCH,     /* fi_fetch_atomic */
	OPX_AK_COMPARE,   /* fi_compare_atomic */
};

/* Size of one element of dt, 0 if dt is not an atomic datatype. */
size_t opx_atomic_dt_size(enum fi_datatype dt);
/* Whether op on dt is supported for that kind of call. */
bool opx_atomic_valid(enum opx_atomic_kind kind, enum fi_op op, enum fi_datatype dt);
/* Most elements one request carries (fi_query_atomic's count). */
size_t opx_atomic_max_count(enum opx_atomic_kind kind, enum fi_datatype dt);
/* Apply op to cnt elements of dst with operands src (and cmp for compare
 * ops); the old values go to res when it is not NULL.  Buffers need no
 * particular alignment.  Returns 0 or -FI_EOPNOTSUPP. */
int opx_atomic_apply(enum fi_op op, enum fi_datatype dt, void *dst, const void *src,
		     const void *cmp, void *res, size_t cnt);
int opx_atomic_query(struct fid_domain *domain, enum fi_datatype dt, enum fi_op op,
		     struct fi_atomic_attr *attr, uint64_t flags);

/* ---------------------------------------------------------------------
 * RMA engine (opx_rma.c: initiator, opx_rma_target.c: target), shared
 * by RMA and atomics.  All with the domain lock held.
 */
struct opx_ep;
struct shim_pkt_hdr;

enum opx_rma_type {
	OPX_RT_WRITE = 0,
	OPX_RT_READ,
	OPX_RT_ATOMIC,
};

/* What one RMA or atomic call asks for. */
struct opx_rma_args {
	enum opx_rma_type type;
	const struct iovec *iov; /* write source, read destination, atomic operands */
	size_t cnt;
	const struct iovec *cmp; /* compare values (OPX_AK_COMPARE) */
	size_t cmp_cnt;
	const struct iovec *res; /* fetched values (OPX_AK_FETCH/COMPARE) */
	size_t res_cnt;
	fi_addr_t dest;
	uint64_t addr;
	uint64_t key;
	uint64_t data;
	void *context;
	uint64_t flags;  /* op flags: FI_INJECT, FI_COMPLETION, FI_REMOTE_CQ_DATA, FI_FENCE */
	enum opx_atomic_kind kind;
	enum fi_op op;
	enum fi_datatype dt;
};

ssize_t opx_rma_post(struct opx_ep *ep, const struct opx_rma_args *a);
ssize_t opx_rma_post_locked(struct opx_ep *ep, const struct opx_rma_args *a);
/* A reply (OPX_OP_RMA_RESP) to one of our operations (opx_rx_ops[]). */
int opx_rma_rx_reply(struct opx_ep *ep, const struct shim_rhq_entry *e, const uint8_t *pay);
void opx_rma_progress(struct opx_ep *ep);
/* One-sided operations posted here and not completed yet (their replies
 * arrive through the receive ring). */
bool opx_rma_outstanding(const struct opx_ep *ep);
void opx_rma_fini(struct opx_ep *ep);

/* The engine's state, one per endpoint (ep->rma, either side), used by
 * both its files. */
#define OPX_RMA_OPS 1024u   /* descriptors per endpoint, power of two */
#define OPX_RMA_IDX_BITS 10
#define OPX_RMA_WINDOW 64u  /* unanswered chunks per endpoint */
#define OPX_RMA_WRITTEN 128u /* "written" packets waiting for credits, power of two */

static_assert((1u << OPX_RMA_IDX_BITS) == OPX_RMA_OPS, "cookie index bits");

struct opx_rma_op {
	struct opx_list link; /* st->queue while chunks are left to send */
	void *context;
	uint64_t flags;
	uint64_t cflags;      /* completion flags */
	struct shim_peer *peer;
	fi_addr_t dest;
	uint64_t addr;
	uint64_t key;
	uint64_t data;
	size_t len;           /* bytes (atomics: operand bytes) */
	size_t chunk;
	uint32_t nchunks;
	uint32_t sent;
	uint32_t acked;
	int err;
	uint32_t gen;
	bool busy;
	bool cma;             /* one request, copied by the target with CMA */
	bool piped;           /* a CMA write requested without holding the rest */
	uint8_t type;
	uint8_t kind;
	uint8_t op;
	uint8_t dt;
	size_t cnt, cmp_cnt, res_cnt;
	struct iovec iov[OPX_IOV_LIMIT];
	struct iovec cmp[OPX_IOV_LIMIT];
	struct iovec res[OPX_IOV_LIMIT];
	uint8_t *inj;         /* FI_INJECT: the source, copied (opx_rma_post_locked) */
	struct opx_rma_op *next_free;
};

/* A reply that found no credits. */
struct opx_rma_reply {
	struct opx_list link;
	struct shim_peer *peer;
	uint64_t tag;
	uint64_t status;
	uint8_t pflags;
	uint32_t len;
	uint8_t data[];
};

struct opx_rma_refusal {
	uint32_t from;       /* slid << 16 | sctx */
	uint32_t cookie;     /* the operation */
	int err;             /* positive FI_E* */
};

struct opx_rma_state {
	struct opx_rma_op ops[OPX_RMA_OPS];
	struct opx_rma_op *free;
	size_t busy_ops;     /* posted, not completed */
	uint32_t inflight;   /* chunks sent, not answered */
	struct opx_list queue;
	struct opx_list replies;
	/* A CMA operation the rest waits for: a probe (the first to an
	 * address), or a write to an address whose CMA has not worked yet or
	 * after a pipeline fell back to chunks. */
	struct opx_rma_op *cma_hold;
	/* CMA writes to an address where CMA worked are pipelined: their
	 * requests go out back to back, each grant is written as it comes
	 * (grants come in request order), and anything else waits until none
	 * is unanswered and every "written" packet is out. */
	uint32_t grants_due;  /* pipelined writes not answered yet */
	/* set while one of them went back to chunks and more are due (so do
	 * the rest): the last of them put back in the queue */
	struct opx_rma_op *requeued;
	struct opx_rma_written { /* "written" packets that found no credits, in order */
		struct shim_peer *peer;
		uint64_t addr, key, data, cookie;
		uint32_t len;
		uint8_t pflags;
	} written[OPX_RMA_WRITTEN];
	uint32_t wr_head, wr_tail;
	uint8_t *scratch;    /* atomic results, one MTU */
	/* as a target: multi-chunk operations refused whole, by sender */
	struct opx_rma_refusal *refused;
	uint32_t nrefused, cap_refused;
	bool refuse_all;     /* out of memory for that: refuse every later chunk */
};

/* Between the engine's two files: opx_rma.c calls these of
 * opx_rma_target.c, which calls nothing of opx_rma.c. */
/* ep->rma, allocated on first use by either side; NULL when out of memory. */
struct opx_rma_state *opx_rma_target_state(struct opx_ep *ep);
/* Whether CMA may be used with peer: the shim verified its process. */
bool opx_rma_target_cma_peer(const struct shim_peer *peer);
/* Execute one request packet (write, read, atomic, CMA) and answer it. */
int opx_rma_target_rx_request(struct opx_ep *ep, const struct shim_rhq_entry *e,
			      const uint8_t *pay);
/* Send the replies that found no credits, in order, while credits last. */
void opx_rma_target_flush_replies(struct opx_ep *ep, struct opx_rma_state *st);

extern struct fi_ops_rma opx_ops_rma;
extern struct fi_ops_atomic opx_ops_atomic;

#endif /* OPX_RMA_H */
