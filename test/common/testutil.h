/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * testutil.h - what test programs of every kind (unit suites, integration
 * programs) share and the provider does not: the process's resident set,
 * and a byte pattern a receiver checks without having seen the sender's
 * buffer.  Header only, libc only.
 */
#ifndef OPX_TEST_TESTUTIL_H
#define OPX_TEST_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

/* The resident set of this process in KiB (/proc/self/statm), or -1. */
static inline long tu_rss_kib(void)
{
	long pages = -1, rss = -1;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Byte i of the pattern of seed: differs per seed and along the buffer
 * (a block delivered at the wrong offset or from another message shows). */
static inline uint8_t tu_byte(uint32_t seed, size_t i)
{
	uint32_t v = seed * 2654435761u + (uint32_t)i * 251u + (uint32_t)(i >> 8) * 17u;

	return (uint8_t)(v ^ (v >> 11));
}

static inline void tu_fill(uint8_t *b, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		b[i] = tu_byte(seed, i);
}

/* Index of the first byte that is not the pattern of seed, or -1. */
static inline long tu_check(const uint8_t *b, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		if (b[i] != tu_byte(seed, i))
			return (long)i;
	return -1;
}

#endif /* OPX_TEST_TESTUTIL_H */
