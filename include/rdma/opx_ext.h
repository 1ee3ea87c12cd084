/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_ext.h - the opx provider's extension for tools: live telemetry of
 * an endpoint through fi_open_ops(3).
 *
 *   struct opx_stats_ops *ops;
 *   struct opx_stats st = { .size = sizeof(st) };
 *
 *   if (fi_open_ops(&ep->fid, OPX_STATS_OPS_NAME, 0, (void **)&ops, NULL) == 0 &&
 *       ops->read(&ep->fid, &st) == 0)
 *           printf("%llu eager sends\n", (unsigned long long)st.tx[OPX_PROTO_EAGER].msgs);
 *
 * The counters are plain per-endpoint counters updated on the data path
 * under the endpoint's own serialisation (no atomics): read() takes the
 * domain lock for FI_THREAD_SAFE domains and otherwise expects to be
 * called from the thread that drives the endpoint.
 *
 * Compatibility: both structures start with their size.  A caller sets
 * stats.size to the size it was compiled with; the provider fills at most
 * that many bytes and never shrinks existing fields, so new fields only
 * ever appear at the end.
 */
#ifndef RDMA_OPX_EXT_H
#define RDMA_OPX_EXT_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>

#define OPX_STATS_OPS_NAME "opx_stats"
#define OPX_STATS_VERSION 1

/* How a message travelled (see fi_opx(7), PROTOCOLS). */
enum opx_proto {
	OPX_PROTO_INJECT,     /* payload inline in the 64-byte header entry */
	OPX_PROTO_EAGER,      /* one eager packet */
	OPX_PROTO_MP_EAGER,   /* several eager packets */
	OPX_PROTO_RNDV_PULL,  /* rendezvous, receiver's single CMA copy */
	OPX_PROTO_RNDV_SPLIT, /* rendezvous, CMA copy split between both sides */
	OPX_PROTO_RNDV_PUSH,  /* rendezvous, SDMA pushes placed by TID */
	OPX_PROTO_MAX
};

/*
 * Message-size histogram: bucket 0 counts 0-byte messages, bucket b > 0
 * counts sizes in [2^(b-1), 2^b - 1]; the last bucket takes everything
 * from 2^(OPX_STATS_BUCKETS-2) up.
 */
#define OPX_STATS_BUCKETS 42

/* Drop counters by reason; ops->drop_name() names each slot in use. */
#define OPX_STATS_DROP_SLOTS 16

struct opx_stats_proto {
	uint64_t msgs;
	uint64_t bytes;
};

struct opx_stats {
	size_t size;                 /* in: sizeof(struct opx_stats) of the caller */
	uint32_t version;            /* out: OPX_STATS_VERSION */
	uint32_t rsvd;
	struct opx_stats_proto tx[OPX_PROTO_MAX]; /* messages sent, by protocol */
	struct opx_stats_proto rx[OPX_PROTO_MAX]; /* messages received, by protocol */
	uint64_t tx_hist[OPX_STATS_BUCKETS];      /* sends by size */
	uint64_t rx_hist[OPX_STATS_BUCKETS];      /* receives by size */
	uint64_t ux_msgs;            /* messages that arrived before their receive */
	uint64_t ux_bytes_peak;      /* most unexpected payload buffered at once */
	uint64_t posted_peak;        /* deepest posted-receive queue */
	uint64_t ux_peak;            /* deepest unexpected-message queue */
	uint64_t tx_eagain;          /* sends refused with -FI_EAGAIN (no credits) */
	uint64_t drops[OPX_STATS_DROP_SLOTS]; /* packets dropped, by reason */
	/* reliability (udp wire); zero on the shm wire */
	uint64_t retransmits;
	uint64_t duplicates;
	uint64_t nacks;
	uint64_t peer_timeouts;
};

struct opx_stats_ops {
	size_t size; /* sizeof(struct opx_stats_ops) */
	/* Fill *stats (up to stats->size bytes) with the endpoint's counters. */
	int (*read)(struct fid *ep, struct opx_stats *stats);
	/* Zero the endpoint's counters. */
	int (*reset)(struct fid *ep);
	/* Name of drop reason i, or NULL past the last one. */
	const char *(*drop_name)(unsigned int i);
};

/* Bucket of a message size in the histograms above. */
static inline unsigned int opx_stats_bucket(uint64_t len)
{
	unsigned int b = len ? 64u - (unsigned int)__builtin_clzll(len) : 0u;

	return b < OPX_STATS_BUCKETS ? b : OPX_STATS_BUCKETS - 1;
}

#endif /* RDMA_OPX_EXT_H */
