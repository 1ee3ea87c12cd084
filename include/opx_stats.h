/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_stats.h - telemetry: the data path's counting helpers (inline
 * here, into struct opx_stats of <rdma/opx_ext.h>), the stats ops
 * (fi_open_ops) and the report at endpoint close, defined in
 * opx_stats.c.
 */
#ifndef OPX_STATS_H
#define OPX_STATS_H

#include "opx_ep.h"

/* opx_stats.c: telemetry.  Counting helpers for the data path (lock held). */
static inline void opx_stats_msg(struct opx_stats_proto *by_proto, uint64_t *hist,
				 enum opx_proto proto, uint64_t len)
{
	by_proto[proto].msgs++;
	by_proto[proto].bytes += len;
	hist[opx_stats_bucket(len)]++;
}
#define opx_stats_tx(ep, proto, len) \
	opx_stats_msg((ep)->tel.stats.tx, (ep)->tel.stats.tx_hist, proto, len)
#define opx_stats_rx(ep, proto, len) \
	opx_stats_msg((ep)->tel.stats.rx, (ep)->tel.stats.rx_hist, proto, len)
/* How a rendezvous of len bytes moves, as both sides plan it: across
 * hosts (udp) there is no CMA, the sender pushes. */
static inline enum opx_proto opx_stats_rndv_proto(uint64_t len, bool udp)
{
	if (!opx_env.rndv_cma || udp)
		return OPX_PROTO_RNDV_PUSH;
	return opx_env.rndv_split && len >= opx_env.rndv_split ? OPX_PROTO_RNDV_SPLIT
							       : OPX_PROTO_RNDV_PULL;
}
int opx_stats_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
		       void *context);
void opx_stats_ep_close(struct opx_ep *ep);

#endif /* OPX_STATS_H */
