/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_tel.h - an endpoint's telemetry, struct opx_ep.tel: the counters of
 * <rdma/opx_ext.h> and the drop accounting (opx_stats.c, opx_drop.c;
 * counted on the data path through opx_stats.h and opx_ux.h).  No
 * dependency on struct opx_ep, so that opx_ep.h can embed it.
 */
#ifndef OPX_TEL_H
#define OPX_TEL_H

#include <stddef.h>
#include <stdint.h>

#include "rdma/opx_ext.h"

/* Why a received packet was dropped.  Every drop is counted per endpoint
 * (opx_drop_count) and the first of each reason is logged at warn level;
 * none of this is compiled out. */
enum opx_drop_reason {
	OPX_DROP_RHF_ERR,   /* error bits set in the RHF */
	OPX_DROP_OPCODE,    /* opcode unknown */
	OPX_DROP_JKEY,      /* job key differs from ours */
	OPX_DROP_DEST,      /* addressed to another LID/context */
	OPX_DROP_FLAGS,     /* unknown provider flags */
	OPX_DROP_PAYLEN,    /* payload length above the MTU */
	OPX_DROP_PAYLOAD,   /* payload outside the eager ring, or inline too long */
	OPX_DROP_CSUM,      /* checksum missing or wrong */
	OPX_DROP_MP_LEN,    /* multi-packet first: inconsistent lengths */
	OPX_DROP_MP_BOUND,  /* multi-packet first: larger than we accept eagerly */
	OPX_DROP_MP_SEQ,    /* multi-packet continuation out of sequence */
	OPX_DROP_RTS,       /* malformed rendezvous request */
	OPX_DROP_PROTO,     /* rendezvous, one-sided or reliability packet refused
			     * (opx_drop_proto) */
	OPX_DROP_MAX
};

/* Telemetry of an endpoint (opx_stats.c, opx_drop.c): plain adds, no atomics. */
struct opx_ep_telemetry {
	struct opx_stats stats;
	size_t ux_cnt;                /* unexpected messages queued now */
	uint64_t app_progress;        /* progress calls not from the progress thread */
	uint64_t yields;              /* of them, empty ones that gave the CPU away */
	uint64_t rx_dropped;
	uint64_t drops[OPX_DROP_MAX]; /* by enum opx_drop_reason */
	uint32_t drops_logged;        /* bit per reason: first drop logged */
};

#endif /* OPX_TEL_H */
