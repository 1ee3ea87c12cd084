/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_csum.h - the optional packet checksum (opx_csum.c, FI_OPX_CHECKSUM):
 * sealed by the sender (opx_msg.c), checked on receipt (opx_rx.c).
 */
#ifndef OPX_CSUM_H
#define OPX_CSUM_H

#include <stdint.h>

#include "shim_abi.h"

/* opx_csum.c: CRC32C of a packet (header with psn zeroed, then the eager
 * payload when pay is not NULL), what OPX_PF_CSUM packets carry in psn. */
uint32_t opx_csum_pkt(const struct shim_pkt_hdr *h, const uint8_t *pay);

#endif /* OPX_CSUM_H */
