/*
 * mpi_flood: many outstanding large non-blocking transfers.
 *
 * Every pair of ranks exchanges DEPTH (default 64) outstanding messages of
 * SIZE (default 4 MiB) in each direction at once: each rank has
 * (size - 1) * DEPTH sends and as many receives in flight, all with one
 * tag per round, then one MPI_Waitall.  Even rounds post the receives
 * before the sends (expected rendezvous); odd rounds post the sends, pass
 * a barrier so every RTS has arrived, and only then post the receives
 * (unexpected rendezvous: the provider queues DEPTH * (size - 1) large
 * unexpected messages per rank).  With one tag per round, the k-th
 * receive from a peer must get that peer's k-th message, so the data
 * check also checks ordering across dozens of concurrent rendezvous.
 *
 * Environment (to scale down on small machines):
 *   OPX_MPI_FLOOD_DEPTH   messages in flight per pair and direction (64)
 *   OPX_MPI_FLOOD_KB      message size in KiB (4096); an odd number of
 *                         bytes is added so no size is a multiple of 8
 *   OPX_MPI_FLOOD_ROUNDS  rounds, alternating expected/unexpected (2)
 * Rank 0 also halves DEPTH while all ranks' buffers would exceed 60% of
 * MemAvailable, and prints the depth it ran with.
 */
#include "mpi_common.h"

#include <time.h>

static int fl_depth = 64;
static size_t fl_size = 4096 * 1024 + 3;
static int fl_rounds = 2;

/* One 64-bit word of message (src, dst, k, round) at word index i: one
 * multiply per 8 bytes, so checking gigabytes stays cheap on 2 cores. */
static inline uint64_t fl_word(uint64_t seed, uint64_t i)
{
	uint64_t z = seed + i * 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
	return z ^ (z >> 29);
}

static uint64_t fl_seed(int src, int dst, int k, int round)
{
	return ((uint64_t)src << 48) ^ ((uint64_t)dst << 36) ^
	       ((uint64_t)k << 16) ^ (uint64_t)round ^ 0x5bd1e995ull;
}

static void fl_fill(unsigned char *p, size_t len, uint64_t seed)
{
	size_t nw = len / 8;
	uint64_t last;

	for (size_t i = 0; i < nw; i++) {
		uint64_t w = fl_word(seed, i);
		memcpy(p + i * 8, &w, 8);
	}
	last = fl_word(seed, nw);
	memcpy(p + nw * 8, &last, len - nw * 8);
}

/* First bad offset, or (size_t)-1. */
static size_t fl_check(const unsigned char *p, size_t len, uint64_t seed)
{
	size_t nw = len / 8;
	uint64_t last;

	for (size_t i = 0; i < nw; i++) {
		uint64_t w;
		memcpy(&w, p + i * 8, 8);
		if (w != fl_word(seed, i)) {
			uint64_t want = fl_word(seed, i);
			for (size_t b = 0; b < 8; b++)
				if (p[i * 8 + b] !=
				    ((const unsigned char *)&want)[b])
					return i * 8 + b;
		}
	}
	last = fl_word(seed, nw);
	for (size_t b = 0; b < len - nw * 8; b++)
		if (p[nw * 8 + b] != ((const unsigned char *)&last)[b])
			return nw * 8 + b;
	return (size_t)-1;
}

static int fl_env(const char *name, int def)
{
	const char *v = getenv(name);
	int n = v ? atoi(v) : def;
	return n > 0 ? n : def;
}

static size_t fl_mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[128];
	size_t kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %zu kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

static void fl_config(void)
{
	int cfg[3];

	if (test_rank == 0) {
		size_t avail = fl_mem_available();
		int npeer = test_size - 1;

		fl_depth = fl_env("OPX_MPI_FLOOD_DEPTH", 64);
		fl_size = (size_t)fl_env("OPX_MPI_FLOOD_KB", 4096) * 1024 + 3;
		fl_rounds = fl_env("OPX_MPI_FLOOD_ROUNDS", 2);
		/* send + receive buffers of every rank on this host */
		while (fl_depth > 4 && avail &&
		       2.0 * (double)test_size * npeer * fl_depth *
				       (double)fl_size > 0.6 * (double)avail)
			fl_depth /= 2;
		cfg[0] = fl_depth;
		cfg[1] = (int)(fl_size / 1024);
		cfg[2] = fl_rounds;
	}
	TEST_MPI(MPI_Bcast(cfg, 3, MPI_INT, 0, MPI_COMM_WORLD));
	fl_depth = cfg[0];
	fl_size = (size_t)cfg[1] * 1024 + 3;
	fl_rounds = cfg[2];
}

static double fl_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	int npeer, nmsg;
	unsigned char **sb, **rb;
	MPI_Request *req;
	MPI_Status *st;

	test_init(&argc, &argv, "mpi_flood");
	fl_config();
	npeer = test_size - 1;
	nmsg = npeer * fl_depth;
	if (test_rank == 0)
		printf("mpi_flood: %d ranks, %d x %zu bytes in flight per pair "
		       "and direction, %d rounds (%.0f MiB of buffers per "
		       "rank)\n", test_size, fl_depth, fl_size, fl_rounds,
		       2.0 * nmsg * (double)fl_size / 1048576.0);
	sb = test_malloc(sizeof(*sb) * (size_t)(nmsg ? nmsg : 1));
	rb = test_malloc(sizeof(*rb) * (size_t)(nmsg ? nmsg : 1));
	req = test_malloc(sizeof(*req) * (size_t)(2 * nmsg + 1));
	st = test_malloc(sizeof(*st) * (size_t)(2 * nmsg + 1));
	/* Slot j = k * npeer + p: message k to/from the p-th other rank.
	 * Separate allocations so a stray write lands in a checked buffer
	 * or faults, never silently in a neighbour's guard. */
	for (int j = 0; j < nmsg; j++) {
		sb[j] = test_malloc(fl_size);
		rb[j] = test_malloc(fl_size + 1);
	}

	for (int round = 0; round < fl_rounds; round++) {
		int unexpected = round & 1;
		int tag = 50 + round;
		double t0, t1;

		for (int j = 0; j < nmsg; j++) {
			int p = j % npeer, k = j / npeer;
			int dst = (test_rank + 1 + p) % test_size;
			fl_fill(sb[j], fl_size, fl_seed(test_rank, dst, k,
							 round));
			memset(rb[j], 0xee, fl_size + 1);
		}
		TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
		t0 = fl_now();
		/* receives first in expected rounds */
		for (int pass = 0; pass < 2; pass++) {
			int do_recv = (pass == 0) != unexpected;

			for (int j = 0; j < nmsg; j++) {
				int p = j % npeer;
				int dst = (test_rank + 1 + p) % test_size;
				int src = (test_rank + test_size - 1 - p) %
					  test_size;
				if (do_recv)
					TEST_MPI(MPI_Irecv(rb[j], (int)fl_size,
						MPI_BYTE, src, tag,
						MPI_COMM_WORLD, &req[j]));
				else
					TEST_MPI(MPI_Isend(sb[j], (int)fl_size,
						MPI_BYTE, dst, tag,
						MPI_COMM_WORLD,
						&req[nmsg + j]));
			}
			/* unexpected: every rank's sends are out before any
			 * receive is posted */
			if (pass == 0 && unexpected)
				TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
		}
		/* receives are req[0..nmsg), sends req[nmsg..2 nmsg) */
		TEST_MPI(MPI_Waitall(2 * nmsg, req, st));
		t1 = fl_now();
		for (int j = 0; j < nmsg; j++) {
			int p = j % npeer, k = j / npeer;
			int src = (test_rank + test_size - 1 - p) % test_size;
			int count = -1;
			size_t bad;

			TEST_MPI(MPI_Get_count(&st[j], MPI_BYTE, &count));
			if ((size_t)count != fl_size || st[j].MPI_SOURCE != src)
				TEST_FAIL("round %d: receive %d from %d: count "
					  "%d source %d", round, k, src, count,
					  st[j].MPI_SOURCE);
			bad = fl_check(rb[j], fl_size, fl_seed(src, test_rank,
								 k, round));
			if (bad != (size_t)-1)
				TEST_FAIL("round %d (%s): message %d from rank "
					  "%d wrong at byte %zu of %zu (another "
					  "message's data: reordered?)", round,
					  unexpected ? "unexpected" : "expected",
					  k, src, bad, fl_size);
			if (rb[j][fl_size] != 0xee)
				TEST_FAIL("round %d: receive %d from %d wrote "
					  "past the end", round, k, src);
		}
		TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
		if (test_rank == 0)
			printf("mpi_flood: round %d (%s receives) %.2f s, "
			       "%.0f MiB/s received per rank\n", round,
			       unexpected ? "late" : "pre-posted", t1 - t0,
			       (double)nmsg * (double)fl_size / 1048576.0 /
				       (t1 - t0));
	}
	for (int j = 0; j < nmsg; j++) {
		free(sb[j]);
		free(rb[j]);
	}
	free(sb);
	free(rb);
	free(req);
	free(st);
	test_finish();
	return 0;
}
