/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * memcpy_bw.c - single-core memcpy bandwidth, the ceiling for any
 * transport that moves a message with one copy (as opx's CMA rendezvous
 * and shm's CMA path do).  Printed next to the large-message benchmark so
 * its figures can be read as "fraction of one memcpy".
 *
 *   memcpy_bw [-t SECS] [-r N] [-B BYTES] [SIZE...]
 *
 * For each size (default 16 KiB, 64 KiB, 256 KiB, 1 MiB, 4 MiB, 16 MiB)
 * it prints one line:
 *
 *   memcpy size=1048576 MBps=23456.7 MBps_rot=12345.6
 *
 * MBps copies one source buffer to one destination buffer over and over,
 * so both stay in cache when they fit (what a ping-pong sees).  MBps_rot
 * rotates through distinct buffer pairs covering -B bytes (default 64 MiB,
 * the same cap opx_bw uses for its window of buffers), which is what a
 * streaming window sees.  Buffers are touched before timing; each figure is
 * the best of N trials of at least SECS each, because interference on a
 * shared machine only ever makes a trial slower.  MB = 1e6 bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"

#define MC_MAX_SIZE (1UL << 30)
#define MC_ROT_BYTES (64UL << 20)

/*
 * Called through a volatile pointer so the compiler can neither inline a
 * fixed-size copy nor drop copies whose destination is never read.
 */
typedef void *(*mc_copy_fn)(void *, const void *, size_t);
static mc_copy_fn volatile mc_copy = memcpy;

/*
 * Best MB/s over `trials` trials, each copying `size` bytes from src[i] to
 * dst[i] for i cycling over `pairs` pairs until at least `secs` passed.
 * The repetition count is fixed after the first trial so the clock is read
 * only at its ends for all later ones.
 */
static double mc_measure(uint8_t *src, uint8_t *dst, size_t size, size_t stride, size_t pairs,
			 double secs, unsigned int trials)
{
	double best = 0.0;
	uint64_t reps = 0, r;
	unsigned int t;

	for (t = 0; t < trials; t++) {
		double t0 = bench_now(), dt;
		size_t i = 0;

		if (!reps) {
			/* Calibrating trial: grow until it lasts long enough. */
			uint64_t batch = 1;

			do {
				for (r = 0; r < batch; r++) {
					mc_copy(dst + i * stride, src + i * stride, size);
					if (++i == pairs)
						i = 0;
				}
				reps += batch;
				batch *= 2;
				dt = bench_now() - t0;
			} while (dt < secs);
		} else {
			for (r = 0; r < reps; r++) {
				mc_copy(dst + i * stride, src + i * stride, size);
				if (++i == pairs)
					i = 0;
			}
			dt = bench_now() - t0;
		}
		if (dt > 0 && (double)reps * (double)size / dt / 1e6 > best)
			best = (double)reps * (double)size / dt / 1e6;
	}
	return best;
}

static void mc_usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [options] [SIZE...]\n"
		"  -t SECS   shortest trial (default 0.02)\n"
		"  -r N      trials per figure, best reported (default 5)\n"
		"  -B BYTES  bytes covered by the rotating buffers (default 64 MiB)\n",
		argv0);
}

int main(int argc, char **argv)
{
	static const size_t defaults[] = { 16384, 65536, 262144, 1048576, 4194304, 16777216 };
	double secs = 0.02;
	unsigned int trials = 5;
	size_t rot_bytes = MC_ROT_BYTES, nsizes, k;
	size_t *sizes;
	char *end;
	int c;

	bench_init("memcpy_bw");
	while ((c = getopt(argc, argv, "t:r:B:h")) != -1) {
		switch (c) {
		case 't':
			secs = strtod(optarg, &end);
			if (*end || !(secs > 0 && secs <= 10))
				bench_fail("bad trial time '%s' (0..10 s)", optarg);
			break;
		case 'r': trials = (unsigned int)bench_parse_ul(optarg, "trials", 1, 1000); break;
		case 'B': rot_bytes = bench_parse_ul(optarg, "rotation bytes", 1, MC_MAX_SIZE); break;
		default: mc_usage(argv[0]); return c == 'h' ? 0 : 1;
		}
	}

	nsizes = optind < argc ? (size_t)(argc - optind) : sizeof(defaults) / sizeof(defaults[0]);
	sizes = calloc(nsizes, sizeof(*sizes));
	if (!sizes)
		bench_fail("out of memory");
	for (k = 0; k < nsizes; k++)
		sizes[k] = optind < argc ? bench_parse_ul(argv[optind + (int)k], "size", 1, MC_MAX_SIZE)
					 : defaults[k];

	for (k = 0; k < nsizes; k++) {
		size_t size = sizes[k], stride = (size + 4095) & ~(size_t)4095;
		size_t pairs = rot_bytes / size ? rot_bytes / size : 1;
		size_t len = stride * pairs;
		uint8_t *src = aligned_alloc(4096, len), *dst = aligned_alloc(4096, len);
		double hot, rot;

		if (!src || !dst)
			bench_fail("cannot allocate 2 x %zu bytes", len);
		/* Fault every page in before the clock starts. */
		memset(src, 0xa5, len);
		memset(dst, 0x5a, len);
		hot = mc_measure(src, dst, size, stride, 1, secs, trials);
		rot = mc_measure(src, dst, size, stride, pairs, secs, trials);
		printf("memcpy size=%zu MBps=%.1f MBps_rot=%.1f\n", size, hot, rot);
		fflush(stdout);
		free(src);
		free(dst);
	}
	free(sizes);
	return 0;
}
