/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_complete.h - the data path's completions (opx_complete.c).
 */
#ifndef OPX_COMPLETE_H
#define OPX_COMPLETE_H

#include "opx_ep.h"

/* opx_complete.c: the data path's completions (CQ entries, counters,
 * error entries), the only writer into the CQs and counters. */
void opx_complete_tx(struct opx_ep *ep, void *context, uint64_t flags, size_t len, int err);
/* The FI_MULTI_RECV entry that releases a used-up multi-receive buffer. */
void opx_complete_multi_release(struct opx_ep *ep, struct opx_rx_req *req);
/* Completion of a message delivered into req at off (cap bytes fit). */
void opx_complete_rx(struct opx_ep *ep, struct opx_rx_req *req, size_t off, size_t cap,
		     size_t msg_len, uint64_t tag, uint64_t data, uint8_t pflags, fi_addr_t src,
		     int err);

#endif /* OPX_COMPLETE_H */
