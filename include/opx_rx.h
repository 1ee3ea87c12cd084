/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_rx.h - receive dispatch and validation (opx_rx.c): the drain of
 * the receive queue, the handler table and what the endpoint advertises.
 */
#ifndef OPX_RX_H
#define OPX_RX_H

#include "opx_ep.h"

/* opx_rx.c: receive dispatch and validation */
int opx_rx_drain(struct opx_ep *ep, int budget);
/* A validated packet's handler: e is the endpoint's private copy of its
 * queue entry, pay its payload (NULL for TID data the shim placed). */
typedef int (*opx_rx_op)(struct opx_ep *ep, const struct shim_rhq_entry *e, const uint8_t *pay);
/* The receive dispatch, one handler per opcode (opx_rx.c). */
extern const opx_rx_op opx_rx_ops[OPX_OP_MAX];
/* At endpoint open: what we accept eagerly, published in our context's
 * control block for senders (shim_rcv_ctl.rx_eager_max, rx_flags). */
void opx_rx_advertise(struct opx_ep *ep);

#endif /* OPX_RX_H */
