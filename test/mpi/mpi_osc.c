/*
 * mpi_osc: MPI one-sided communication, every result verified.
 *
 * Each rank exposes a window of WIN_INTS ints (plus a counter).  With
 * fence epochs every rank puts a pattern into its right neighbour and
 * gets one from its left neighbour (small and large transfers);
 * MPI_Accumulate(MPI_SUM) from every rank into rank 0; then under
 * lock/unlock every rank does fetch-and-op increments and compare-and-swap
 * increments on rank 0's counters, whose final values must be exact.
 * Run it with osc rdma over btl ofi to put opx's RMA and atomics under
 * MPI (see run_mpi_tests.sh).
 */
#include "mpi_common.h"

#define WIN_INTS (1 << 18) /* 1 MiB of ints: large puts go through many chunks */
#define NINC 200
#define NCAS 50

int main(int argc, char **argv)
{
	int *base, *buf;
	long *ctr;
	MPI_Win win, cwin;

	test_init(&argc, &argv, "mpi_osc");
	int right = (test_rank + 1) % test_size, left = (test_rank + test_size - 1) % test_size;

	TEST_MPI(MPI_Win_allocate(WIN_INTS * sizeof(int), sizeof(int), MPI_INFO_NULL,
				  MPI_COMM_WORLD, &base, &win));
	TEST_MPI(MPI_Win_allocate(2 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD,
				  &ctr, &cwin));
	buf = malloc(WIN_INTS * sizeof(int));
	if (!buf)
		TEST_FAIL("malloc");

	/* put: sizes from one int to the whole window */
	for (int n = 1; n <= WIN_INTS; n *= 8) {
		for (int i = 0; i < WIN_INTS; i++)
			base[i] = -1;
		for (int i = 0; i < n; i++)
			buf[i] = test_rank * 1000003 + n + i;
		TEST_MPI(MPI_Win_fence(0, win));
		TEST_MPI(MPI_Put(buf, n, MPI_INT, right, 0, n, MPI_INT, win));
		TEST_MPI(MPI_Win_fence(0, win));
		for (int i = 0; i < n; i++)
			if (base[i] != left * 1000003 + n + i)
				TEST_FAIL("put of %d ints: base[%d] = %d", n, i, base[i]);
		if (n < WIN_INTS && base[n] != -1)
			TEST_FAIL("put of %d ints wrote past its end", n);
		/* get it back from the left neighbour's window: what we put */
		memset(buf, 0, (size_t)n * sizeof(int));
		TEST_MPI(MPI_Win_fence(0, win));
		TEST_MPI(MPI_Get(buf, n, MPI_INT, right, 0, n, MPI_INT, win));
		TEST_MPI(MPI_Win_fence(0, win));
		for (int i = 0; i < n; i++)
			if (buf[i] != test_rank * 1000003 + n + i)
				TEST_FAIL("get of %d ints: buf[%d] = %d", n, i, buf[i]);
	}

	/* accumulate into rank 0 from everyone */
	for (int i = 0; i < 64; i++)
		base[i] = 0;
	for (int i = 0; i < 64; i++)
		buf[i] = (test_rank + 1) * (i + 1);
	TEST_MPI(MPI_Win_fence(0, win));
	TEST_MPI(MPI_Accumulate(buf, 64, MPI_INT, 0, 0, 64, MPI_INT, MPI_SUM, win));
	TEST_MPI(MPI_Win_fence(0, win));
	if (test_rank == 0) {
		int sum = test_size * (test_size + 1) / 2;
		for (int i = 0; i < 64; i++)
			if (base[i] != sum * (i + 1))
				TEST_FAIL("accumulate: base[%d] = %d, want %d", i, base[i],
					  sum * (i + 1));
	}

	/* fetch-and-op and compare-and-swap under lock/unlock */
	ctr[0] = ctr[1] = 0;
	TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
	for (int i = 0; i < NINC; i++) {
		long one = 1, old;
		TEST_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, cwin));
		TEST_MPI(MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, 0, MPI_SUM, cwin));
		TEST_MPI(MPI_Win_unlock(0, cwin));
		if (old < 0 || old >= (long)test_size * NINC)
			TEST_FAIL("fetch_and_op fetched %ld", old);
	}
	long cur = 0;
	/* OPX_OSC_NO_CAS=1 skips MPI_Compare_and_swap (see run_mpi_tests.sh) */
	int ncas = getenv("OPX_OSC_NO_CAS") ? 0 : NCAS;
	for (int i = 0, tries = 0; i < ncas; tries++) {
		long next = cur + 1, res;
		if (tries > 1000000)
			TEST_FAIL("compare_and_swap never succeeds");
		TEST_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, cwin));
		TEST_MPI(MPI_Compare_and_swap(&next, &cur, &res, MPI_LONG, 0, 1, cwin));
		TEST_MPI(MPI_Win_unlock(0, cwin));
		if (res == cur) {
			i++;
			cur = next;
		} else {
			cur = res;
		}
	}
	TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (test_rank == 0) {
		TEST_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, cwin));
		long a = ctr[0], b = ctr[1];
		TEST_MPI(MPI_Win_unlock(0, cwin));
		if (a != (long)test_size * NINC || b != (long)test_size * ncas)
			TEST_FAIL("counters %ld and %ld, want %ld and %ld", a, b,
				  (long)test_size * NINC, (long)test_size * ncas);
	}
	TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
	free(buf);
	TEST_MPI(MPI_Win_free(&cwin));
	TEST_MPI(MPI_Win_free(&win));
	test_finish();
	return 0;
}
