/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * opx_csum.c - the optional packet checksum (FI_OPX_CHECKSUM).
 *
 * The shm wire cannot lose or reorder packets, but any process of the
 * user can scribble on a receive context, and a payload changed after it
 * was published was delivered as good.  With the checksum on, a sender
 * seals each eager packet: CRC32C (Castagnoli) over the 56-byte header
 * with psn zeroed, then over the payload when it is in the eager ring,
 * stored in hdr.psn (unused on the shm wire) with OPX_PF_CSUM set.  The
 * receiver recomputes it over its private copy of the header and the
 * payload in its ring and drops the packet on a mismatch.
 *
 * This detects corruption; it is not authentication: a hostile process
 * of the same user can compute the CRC too, and can still change the
 * payload after it was verified.  The trust boundary stays the uid and
 * the job key (README, "Limitations").
 *
 * The CRC itself is the shim's (driver-shim/shim_crc.c), shared with the
 * udp wire.  Cost, measured with opx_msgrate at 8 KiB on a loaded 2-core
 * machine: see the README (Parameters).
 */
#include "opx_csum.h"
#include "opx_ep.h"

uint32_t opx_csum_pkt(const struct shim_pkt_hdr *h, const uint8_t *pay)
{
	struct shim_pkt_hdr c = *h;
	uint32_t crc;

	c.psn = 0;
	crc = shim_crc32c(0, &c, sizeof(c));
	if (pay)
		crc = shim_crc32c_wide(crc, pay, c.paylen);
	return crc;
}
