/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_param.h - defaults and bounds of the FI_OPX_* parameters, shared by
 * their definitions (opx_init_params_define in prov/opx_init.c, whose help
 * texts print them) and their reading (prov/opx_param.c, which falls back
 * to them and checks against them).  Private to those two files.
 */
#ifndef OPX_PARAM_H
#define OPX_PARAM_H

#include "opx.h"

/* Defaults, named so the help text and the fallback cannot disagree. */
#define OPX_DEF_UNITS 1
#define OPX_DEF_UNIT (-1)
#define OPX_DEF_MTU ((size_t)SHIM_MTU_DEFAULT)
#define OPX_DEF_HDRQ_ENTRIES ((size_t)SHIM_HDRQ_CNT_DEFAULT)
#define OPX_DEF_EAGER_BYTES ((size_t)SHIM_EGR_BYTES_DEFAULT)
#define OPX_DEF_INJECT_SIZE ((size_t)8192)
#define OPX_DEF_EAGER_MAX ((size_t)8192)
/* Across hosts a rendezvous pays a round trip (RTS, then CTS) of about
 * 7 us before any data moves, where the shm wire's costs 0.3; eager
 * costs copies (send ring, reorder stash, receive ring, receive buffer)
 * that the push of a rendezvous saves.  Between two namespace hosts (MTU
 * 9000, opx_bw -m lat, best of 4-8 runs on a loaded 2-core machine):
 * 16 KiB 20-22 us eager against 33-45 rendezvous, 32 KiB 40 against
 * 45-51, from 40 KiB eager slower.  A lost last datagram of an eager
 * message waits for the retransmission timeout (1 ms at least), which
 * hurt eager more than rendezvous when the machine was overloaded.
 * Bounded like EAGER_MAX by the receive rings. */
#define OPX_DEF_UDP_EAGER_MAX ((size_t)32 << 10)
#define OPX_UDP_EAGER_CAP ((size_t)255 << 10)
/* Rendezvous pulls with Cross Memory Attach, which has no size limit of
 * its own; 1 TiB keeps lengths well inside every 64-bit computation. */
#define OPX_DEF_MAX_MSG_SIZE ((size_t)1 << 40)
#define OPX_DEF_RNDV_SPLIT ((size_t)32 << 10)
#define OPX_DEF_RMA_CMA ((size_t)16 << 10)
/* From these sizes the initiator copies by itself (see README) */
#define OPX_DEF_RMA_DIRECT_WRITE ((size_t)16 << 10)
#define OPX_DEF_RMA_DIRECT_READ ((size_t)16 << 10)
#define OPX_DEF_RMA_DIRECT_IDLE_MS 1
#define OPX_DEF_UX_MAX_BYTES ((size_t)64 << 20)
#define OPX_DEF_JKEY (-1)
#define OPX_DEF_SPIN_COUNT 1000
/* More ranks than CPUs (2 cores, mpi_collbench of bench-mpi.sh, us per
 * operation, split copy off in all but the first column):
 *                              defaults   spin 300   spin 100   spin 50
 *   np 8 allreduce 64 KiB      855-876    518-658               320-418
 *   np 4 allreduce 64 KiB      149-200    105-109    92-99      95-116
 *   np 4 bcast 8 B (stream)    0.41-0.46  0.56-0.58  0.80-0.85  1.0-1.2
 * Yielding sooner helps whoever waits for a descheduled peer and costs
 * pipelined small messages; 200 sits in between.  Without the split
 * copy, np 8 neighbour exchange of 64 KiB: 137 against 240 us. */
#define OPX_OVERSUB_SPIN_COUNT 200
#define OPX_DEF_SLEEP_MS 10
#define OPX_DEF_PEER_TIMEOUT 10

/* Bounds: the shim's ring indexes are 32-bit and its hdrq/eager sizes
 * must be powers of two; anything outside would be refused later by
 * shim_dev_open with a far less helpful message. */
#define OPX_MIN_MTU ((size_t)256)
#define OPX_MIN_HDRQ ((size_t)64)
#define OPX_MAX_HDRQ ((size_t)1 << 16) /* shim_dev_open refuses more */
#define OPX_MAX_EAGER_BYTES ((size_t)1 << 30)
#define OPX_MAX_SLEEP_MS 10000
#define OPX_MAX_SPIN_COUNT (1 << 30)

/* Read every parameter into opx_env, once, after opx_init_params_define
 * (opx_param.c; called by the first fi_prov_ini). */
void opx_param_load(void);

#endif /* OPX_PARAM_H */
