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
 * CRC32C uses the SSE4.2 crc32 instruction when the CPU has it (8 bytes
 * per instruction, payloads of 512 bytes and more in three interleaved
 * lanes) and a table otherwise; the choice is made once, at provider
 * initialisation.  Cost, measured with opx_msgrate at 8 KiB on a loaded
 * 2-core machine: see the README (Parameters).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "opx_ep.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#define OPX_CRC32C_POLY 0x82f63b78u /* reflected Castagnoli polynomial */

static uint32_t opx_crc_table[256];
static bool opx_crc_hw;

static uint32_t opx_crc32c_sw(uint32_t crc, const uint8_t *p, size_t len)
{
	while (len--)
		crc = opx_crc_table[(crc ^ *p++) & 0xffu] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t opx_crc32c_hw(uint32_t crc, const uint8_t *p,
								 size_t len)
{
	uint64_t c = crc;

	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, sizeof(v));
		c = _mm_crc32_u64(c, v);
		p += 8;
		len -= 8;
	}
	crc = (uint32_t)c;
	while (len--)
		crc = _mm_crc32_u8(crc, *p++);
	return crc;
}
#endif

void opx_csum_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ OPX_CRC32C_POLY : c >> 1;
		opx_crc_table[i] = c;
	}
#if defined(__x86_64__)
	__builtin_cpu_init();
	opx_crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

uint32_t opx_crc32c(uint32_t crc, const void *buf, size_t len)
{
	crc = ~crc;
#if defined(__x86_64__)
	if (opx_crc_hw)
		return ~opx_crc32c_hw(crc, buf, len);
#endif
	return ~opx_crc32c_sw(crc, buf, len);
}

/* The payload in three interleaved lanes once it is long enough: one
 * crc32 chain is latency bound (3 cycles per 8 bytes), three independent
 * ones run at the instruction's throughput.  The lanes' CRCs are then
 * folded into the running CRC.  Not the CRC32C of the whole payload, but
 * every byte is covered by a CRC32C and the result is the same on every
 * machine (the table fallback computes the same lanes). */
#define OPX_CSUM_LANE_MIN 512u

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static void opx_crc3_hw(const uint8_t *p, size_t lane,
							 uint32_t c[3])
{
	uint64_t a = ~0u, b = ~0u, d = ~0u;

	for (size_t off = 0; off < lane; off += 8) {
		uint64_t x, y, z;

		memcpy(&x, p + off, 8);
		memcpy(&y, p + lane + off, 8);
		memcpy(&z, p + 2 * lane + off, 8);
		a = _mm_crc32_u64(a, x);
		b = _mm_crc32_u64(b, y);
		d = _mm_crc32_u64(d, z);
	}
	c[0] = ~(uint32_t)a;
	c[1] = ~(uint32_t)b;
	c[2] = ~(uint32_t)d;
}
#endif

static uint32_t opx_csum_payload(uint32_t crc, const uint8_t *p, size_t len)
{
	size_t lane = (len / 3) & ~(size_t)7;
	uint32_t c[3];

	if (len < OPX_CSUM_LANE_MIN)
		return opx_crc32c(crc, p, len);
#if defined(__x86_64__)
	if (opx_crc_hw) {
		opx_crc3_hw(p, lane, c);
	} else
#endif
	{
		for (int i = 0; i < 3; i++)
			c[i] = opx_crc32c(0, p + (size_t)i * lane, lane);
	}
	crc = opx_crc32c(crc, c, sizeof(c));
	return opx_crc32c(crc, p + 3 * lane, len - 3 * lane);
}

uint32_t opx_pkt_csum(const struct shim_pkt_hdr *h, const uint8_t *pay)
{
	struct shim_pkt_hdr c = *h;
	uint32_t crc;

	c.psn = 0;
	crc = opx_crc32c(0, &c, sizeof(c));
	if (pay)
		crc = opx_csum_payload(crc, pay, c.paylen);
	return crc;
}

/* For tests: the table path, whatever the CPU has (returns the old
 * setting). */
bool opx_csum_force_sw(bool sw)
{
	bool was = !opx_crc_hw;

#if defined(__x86_64__)
	if (sw)
		opx_crc_hw = false;
	else
		opx_crc_hw = __builtin_cpu_supports("sse4.2");
#else
	(void)sw;
#endif
	return was;
}
