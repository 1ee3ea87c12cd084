/*
 * mpi_osc: MPI one-sided communication, every result verified.
 *
 * Each rank exposes a window of WIN_INTS ints (plus a counter).  With
 * fence epochs every rank puts a pattern into its right neighbour and
 * gets one from its left neighbour (small and large transfers);
 * MPI_Accumulate(MPI_SUM) from every rank into rank 0; then under
 * lock/unlock every rank does fetch-and-op increments and compare-and-swap
 * increments on rank 0's counters, whose final values must be exact.
 * Last a dynamic window (MPI_Win_create_dynamic, memory attached
 * collectively, info coll_attach=true, which lets MPICH use the
 * provider's RMA on it): puts to the right neighbour, accumulates, and
 * fetch-and-op and compare-and-swap on rank 0 at absolute addresses
 * (left out where the MPI library itself deadlocks: dynamic_deadlocks).
 * Run it with osc rdma over btl ofi to put opx's RMA and atomics under
 * MPI (see run_mpi_tests.sh).
 */
#include "mpi_common.h"

#define WIN_INTS (1 << 18) /* 1 MiB of ints: large puts go through many chunks */
#define NINC 200
#define NCAS 50

#define DYN_LONGS 4096

/* Whether this MPI deadlocks on a dynamic window: Open MPI 4.0 - 4.1.4's
 * osc rdma, looking up a target on another node, takes the exclusive
 * lock on the target's region list and then spins for a shared lock on
 * the same lock (fetch-and-add +1 and -1 forever: the hang seen across
 * namespace hosts, whatever the provider).  Targets on this node are
 * looked up in shared memory, without that lock, so one host is fine. */
static int dynamic_deadlocks(void)
{
	char v[MPI_MAX_LIBRARY_VERSION_STRING];
	int len, local, major, minor, release;
	const char *p;
	MPI_Comm node;

	TEST_MPI(MPI_Get_library_version(v, &len));
	p = strstr(v, "Open MPI v");
	if (!p || sscanf(p, "Open MPI v%d.%d.%d", &major, &minor, &release) != 3)
		return 0;
	if (major != 4 || (minor == 1 && release >= 5) || minor > 1)
		return 0;
	TEST_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
				     &node));
	TEST_MPI(MPI_Comm_size(node, &local));
	TEST_MPI(MPI_Comm_free(&node));
	return local < test_size;
}

/* A dynamic window: every rank attaches DYN_LONGS longs and tells the
 * others their address; puts into the right neighbour, an accumulate
 * from everyone into rank 0, fetch-and-op and compare-and-swap
 * increments of rank 0's counters (the last two elements), all checked
 * (ncas: 0 skips compare-and-swap, see main). */
static void dynamic_window(int right, int left, int ncas)
{
	MPI_Info info;
	MPI_Win win;
	MPI_Aint *addr = malloc((size_t)test_size * sizeof(*addr)), mine;
	long *mem = malloc(DYN_LONGS * sizeof(long)), *src = malloc(DYN_LONGS * sizeof(long));
	const int last = DYN_LONGS - 1;

	if (!addr || !mem || !src)
		TEST_FAIL("malloc");
	for (int i = 0; i < DYN_LONGS; i++)
		mem[i] = -1;
	TEST_MPI(MPI_Info_create(&info));
	TEST_MPI(MPI_Info_set(info, "coll_attach", "true"));
	TEST_MPI(MPI_Win_create_dynamic(info, MPI_COMM_WORLD, &win));
	TEST_MPI(MPI_Info_free(&info));
	TEST_MPI(MPI_Win_attach(win, mem, DYN_LONGS * sizeof(long)));
	TEST_MPI(MPI_Get_address(mem, &mine));
	TEST_MPI(MPI_Allgather(&mine, 1, MPI_AINT, addr, 1, MPI_AINT, MPI_COMM_WORLD));

	/* puts of 1 .. DYN_LONGS - 1 longs into the right neighbour */
	TEST_MPI(MPI_Win_lock_all(0, win));
	for (int n = 1; n < DYN_LONGS; n *= 4) {
		for (int i = 0; i < n; i++)
			src[i] = (long)test_rank * 100003 + n + i;
		TEST_MPI(MPI_Put(src, n, MPI_LONG, right, addr[right], n, MPI_LONG, win));
		TEST_MPI(MPI_Win_flush(right, win));
		TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
		for (int i = 0; i < n; i++)
			if (mem[i] != (long)left * 100003 + n + i)
				TEST_FAIL("dynamic put of %d longs: mem[%d] = %ld", n, i, mem[i]);
		TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
	}
	for (int i = 0; i < DYN_LONGS; i++)
		mem[i] = 0;
	TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
	/* accumulate of 64 longs, then counter increments, into rank 0 */
	for (int i = 0; i < 64; i++)
		src[i] = (long)(test_rank + 1) * (i + 1);
	TEST_MPI(MPI_Accumulate(src, 64, MPI_LONG, 0, addr[0], 64, MPI_LONG, MPI_SUM, win));
	for (int i = 0; i < NINC; i++) {
		long one = 1, old;

		TEST_MPI(MPI_Fetch_and_op(&one, &old, MPI_LONG, 0,
					  addr[0] + (MPI_Aint)(last * sizeof(long)), MPI_SUM, win));
		TEST_MPI(MPI_Win_flush(0, win));
		if (old < 0 || old >= (long)test_size * NINC)
			TEST_FAIL("dynamic fetch_and_op fetched %ld", old);
	}
	long cur = 0;
	for (int i = 0, tries = 0; i < ncas; tries++) {
		long next = cur + 1, res;

		if (tries > 1000000)
			TEST_FAIL("dynamic compare_and_swap never succeeds");
		TEST_MPI(MPI_Compare_and_swap(&next, &cur, &res, MPI_LONG, 0,
					      addr[0] + (MPI_Aint)((last - 1) * sizeof(long)), win));
		TEST_MPI(MPI_Win_flush(0, win));
		if (res == cur) {
			i++;
			cur = next;
		} else {
			cur = res;
		}
	}
	TEST_MPI(MPI_Win_unlock_all(win));
	TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (test_rank == 0) {
		long sum = (long)test_size * (test_size + 1) / 2;

		for (int i = 0; i < 64; i++)
			if (mem[i] != sum * (i + 1))
				TEST_FAIL("dynamic accumulate: mem[%d] = %ld, want %ld", i, mem[i],
					  sum * (i + 1));
		if (mem[last] != (long)test_size * NINC || mem[last - 1] != (long)test_size * ncas)
			TEST_FAIL("dynamic counters %ld and %ld, want %ld and %ld", mem[last],
				  mem[last - 1], (long)test_size * NINC, (long)test_size * ncas);
	}
	TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
	TEST_MPI(MPI_Win_detach(win, mem));
	TEST_MPI(MPI_Win_free(&win));
	free(src);
	free(mem);
	free(addr);
}

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
	if (!dynamic_deadlocks())
		dynamic_window(right, left, ncas);
	else if (test_rank == 0)
		printf("# mpi_osc: dynamic window skipped: Open MPI before 4.1.5 deadlocks in "
		       "osc rdma's find_dynamic_region for a target on another node "
		       "(open-mpi/ompi#10328, fixed by #10518)\n");
	free(buf);
	TEST_MPI(MPI_Win_free(&cwin));
	TEST_MPI(MPI_Win_free(&win));
	test_finish();
	return 0;
}
