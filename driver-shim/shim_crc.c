/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * shim_crc.c - CRC32C (Castagnoli), the one implementation in the tree:
 * the udp wire's datagram CRC and the provider's optional shm packet
 * checksum (prov/opx_csum.c) both use it.
 *
 * The SSE4.2 crc32 instruction does 8 bytes per instruction when the CPU
 * has it, a table does a byte at a time otherwise; the choice is made
 * once (shim_crc_init, also run by the first call).  One crc32 chain is
 * latency bound (3 cycles per 8 bytes), so shim_crc32c_wide cuts a long
 * buffer into three lanes whose chains run side by side and folds their
 * CRCs in: not the CRC32C of the buffer, but every byte is covered and
 * the result is the same on every machine (the table computes the same
 * lanes).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "shim_dev.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#define SHIM_CRC32C_POLY 0x82f63b78u /* reflected Castagnoli polynomial */
#define SHIM_CRC_LANE_MIN 512u       /* shorter buffers: one chain */

static uint32_t shim_crc_table[256];
static bool shim_crc_hw;
static bool shim_crc_ready;
static pthread_once_t shim_crc_once = PTHREAD_ONCE_INIT;

static void shim_crc_setup(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ SHIM_CRC32C_POLY : c >> 1;
		shim_crc_table[i] = c;
	}
#if defined(__x86_64__)
	__builtin_cpu_init();
	shim_crc_hw = __builtin_cpu_supports("sse4.2");
#endif
	__atomic_store_n(&shim_crc_ready, true, __ATOMIC_RELEASE);
}

void shim_crc_init(void)
{
	pthread_once(&shim_crc_once, shim_crc_setup);
}

static inline void shim_crc_check(void)
{
	if (!__atomic_load_n(&shim_crc_ready, __ATOMIC_ACQUIRE))
		shim_crc_init();
}

/* Raw chains: crc in and out without the final inversions. */
static uint32_t shim_crc_sw(uint32_t crc, const uint8_t *p, size_t len)
{
	while (len--)
		crc = shim_crc_table[(crc ^ *p++) & 0xffu] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t shim_crc_sse(uint32_t crc, const uint8_t *p,
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

__attribute__((target("sse4.2"))) static void shim_crc3_sse(const uint8_t *p, size_t lane,
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

uint32_t shim_crc32c(uint32_t crc, const void *buf, size_t len)
{
	shim_crc_check();
	crc = ~crc;
#if defined(__x86_64__)
	if (shim_crc_hw)
		return ~shim_crc_sse(crc, buf, len);
#endif
	return ~shim_crc_sw(crc, buf, len);
}

uint32_t shim_crc32c_wide(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	size_t lane = (len / 3) & ~(size_t)7;
	uint32_t c[3];

	if (len < SHIM_CRC_LANE_MIN)
		return shim_crc32c(crc, p, len);
	shim_crc_check();
#if defined(__x86_64__)
	if (shim_crc_hw) {
		shim_crc3_sse(p, lane, c);
	} else
#endif
	{
		for (int i = 0; i < 3; i++)
			c[i] = shim_crc32c(0, p + (size_t)i * lane, lane);
	}
	crc = shim_crc32c(crc, c, sizeof(c));
	return shim_crc32c(crc, p + 3 * lane, len - 3 * lane);
}

bool shim_crc_force_sw(bool sw)
{
	bool was;

	shim_crc_check();
	was = !shim_crc_hw;
#if defined(__x86_64__)
	shim_crc_hw = !sw && __builtin_cpu_supports("sse4.2");
#else
	(void)sw;
#endif
	return was;
}
