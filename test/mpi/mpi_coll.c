/*
 * mpi_coll: collectives over the provider, each result checked against a
 * value every rank can compute locally.  With pml cm the collectives are
 * built from the MTL's tagged point-to-point, so this exercises the
 * provider with Open MPI's real traffic patterns (recursive doubling,
 * pipelined broadcast, pairwise exchange).
 */
#include "mpi_common.h"

#include <time.h>

static const int coll_counts[] = { 1, 2, 7, 64, 1000, 4097, 16384, 100000 };
#define COLL_NCOUNTS ((int)(sizeof(coll_counts) / sizeof(coll_counts[0])))

static int coll_ival(int rank, int i)
{
	return rank * 1000 + (i % 977) - 300;
}

/* Halves are exact in binary floating point, so the sum is exact. */
static double coll_dval(int rank, int i)
{
	return (double)rank * 0.5 + (double)(i % 1001) * 0.25;
}

static void coll_allreduce(void)
{
	int maxc = coll_counts[COLL_NCOUNTS - 1];
	int *is = test_malloc(sizeof(int) * (size_t)maxc);
	int *ir = test_malloc(sizeof(int) * (size_t)maxc);
	double *ds = test_malloc(sizeof(double) * (size_t)maxc);
	double *dr = test_malloc(sizeof(double) * (size_t)maxc);
	int n = test_size;

	for (int c = 0; c < COLL_NCOUNTS; c++) {
		int cnt = coll_counts[c];

		for (int i = 0; i < cnt; i++) {
			is[i] = coll_ival(test_rank, i);
			ds[i] = coll_dval(test_rank, i);
		}
		TEST_MPI(MPI_Allreduce(is, ir, cnt, MPI_INT, MPI_SUM,
				       MPI_COMM_WORLD));
		for (int i = 0; i < cnt; i++) {
			int want = 1000 * n * (n - 1) / 2 +
				   n * ((i % 977) - 300);
			if (ir[i] != want)
				TEST_FAIL("Allreduce int SUM count %d [%d] = "
					  "%d, want %d", cnt, i, ir[i], want);
		}
		TEST_MPI(MPI_Allreduce(is, ir, cnt, MPI_INT, MPI_MAX,
				       MPI_COMM_WORLD));
		for (int i = 0; i < cnt; i++)
			if (ir[i] != coll_ival(n - 1, i))
				TEST_FAIL("Allreduce int MAX count %d [%d] = "
					  "%d, want %d", cnt, i, ir[i],
					  coll_ival(n - 1, i));
		TEST_MPI(MPI_Allreduce(ds, dr, cnt, MPI_DOUBLE, MPI_SUM,
				       MPI_COMM_WORLD));
		for (int i = 0; i < cnt; i++) {
			double want = 0.5 * (double)(n * (n - 1) / 2) +
				      (double)n * (double)(i % 1001) * 0.25;
			if (dr[i] != want)
				TEST_FAIL("Allreduce double SUM count %d [%d] "
					  "= %g, want %g", cnt, i, dr[i], want);
		}
		TEST_MPI(MPI_Allreduce(ds, dr, cnt, MPI_DOUBLE, MPI_MAX,
				       MPI_COMM_WORLD));
		for (int i = 0; i < cnt; i++)
			if (dr[i] != coll_dval(n - 1, i))
				TEST_FAIL("Allreduce double MAX count %d [%d] "
					  "= %g, want %g", cnt, i, dr[i],
					  coll_dval(n - 1, i));
	}
	free(is);
	free(ir);
	free(ds);
	free(dr);
}

/* Element k of the block that rank src sends to rank dst. */
static int coll_a2a_val(int src, int dst, int k)
{
	return src * 1000003 + dst * 10007 + k;
}

static void coll_alltoall(void)
{
	static const int cnts[] = { 1, 3, 100, 1025, 5000, 20000 };

	for (size_t c = 0; c < sizeof(cnts) / sizeof(cnts[0]); c++) {
		int cnt = cnts[c];
		size_t tot = (size_t)cnt * (size_t)test_size;
		int *sb = test_malloc(tot * sizeof(int));
		int *rb = test_malloc(tot * sizeof(int));

		for (int d = 0; d < test_size; d++)
			for (int k = 0; k < cnt; k++)
				sb[(size_t)d * (size_t)cnt + (size_t)k] =
					coll_a2a_val(test_rank, d, k);
		memset(rb, 0xff, tot * sizeof(int));
		TEST_MPI(MPI_Alltoall(sb, cnt, MPI_INT, rb, cnt, MPI_INT,
				      MPI_COMM_WORLD));
		for (int s = 0; s < test_size; s++)
			for (int k = 0; k < cnt; k++) {
				int got = rb[(size_t)s * (size_t)cnt +
					     (size_t)k];
				int want = coll_a2a_val(s, test_rank, k);
				if (got != want)
					TEST_FAIL("Alltoall count %d from %d "
						  "[%d] = %d, want %d", cnt, s,
						  k, got, want);
			}
		free(sb);
		free(rb);
	}
}

static void coll_bcast(void)
{
	static const size_t lens[] = { 1, 15, 100, 4096, 8193, 65537, 300000,
				       1 << 20 };
	char *buf = test_malloc(1 << 20);

	for (int root = 0; root < test_size; root++)
		for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			size_t len = lens[l];

			if (test_rank == root)
				test_fill(buf, len, root, (int)l, 77);
			else
				memset(buf, 0, len);
			TEST_MPI(MPI_Bcast(buf, (int)len, MPI_BYTE, root,
					   MPI_COMM_WORLD));
			TEST_CHECK_BUF(buf, len, root, (int)l, 77, "Bcast");
		}
	free(buf);
}

/* Large Bcast and Allreduce (up to 16 MiB): with pml cm these become
 * rendezvous-sized point-to-point messages that Open MPI pipelines or
 * splits into segments, many in flight at once. */
static void coll_large(void)
{
	static const size_t blens[] = { (4u << 20) + 1, 16u << 20 };
	static const int icounts[] = { (1 << 20) + 1, 4 << 20 };
	size_t maxb = 16u << 20;
	char *buf = test_malloc(maxb);
	int *is = test_malloc(maxb);
	int *ir = test_malloc(maxb);
	int n = test_size;

	for (size_t l = 0; l < sizeof(blens) / sizeof(blens[0]); l++) {
		/* first and last root: different tree shapes */
		int roots[2] = { 0, test_size - 1 };
		for (int r = 0; r < 2; r++) {
			size_t len = blens[l];
			int root = roots[r];

			if (test_rank == root)
				test_fill(buf, len, root, (int)l, 91);
			else
				memset(buf, 0, len);
			TEST_MPI(MPI_Bcast(buf, (int)len, MPI_BYTE, root,
					   MPI_COMM_WORLD));
			TEST_CHECK_BUF(buf, len, root, (int)l, 91,
				       "large Bcast");
		}
	}
	for (size_t c = 0; c < sizeof(icounts) / sizeof(icounts[0]); c++) {
		int cnt = icounts[c];

		for (int i = 0; i < cnt; i++)
			is[i] = coll_ival(test_rank, i);
		memset(ir, 0, (size_t)cnt * sizeof(int));
		TEST_MPI(MPI_Allreduce(is, ir, cnt, MPI_INT, MPI_SUM,
				       MPI_COMM_WORLD));
		for (int i = 0; i < cnt; i++) {
			int want = 1000 * n * (n - 1) / 2 +
				   n * ((i % 977) - 300);
			if (ir[i] != want)
				TEST_FAIL("large Allreduce int SUM count %d "
					  "[%d] = %d, want %d", cnt, i, ir[i],
					  want);
		}
	}
	free(buf);
	free(is);
	free(ir);
}

/* Seconds on a clock every process of this machine shares. */
static double coll_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whether every rank runs on this machine (network namespaces standing
 * in for hosts included): then they share CLOCK_MONOTONIC. */
static int coll_one_machine(void)
{
	char id[40] = "", *all = test_malloc(sizeof(id) * (size_t)test_size);
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	int same = 1;

	if (f) {
		if (!fgets(id, sizeof(id), f))
			id[0] = 0;
		fclose(f);
	}
	TEST_MPI(MPI_Allgather(id, sizeof(id), MPI_CHAR, all, sizeof(id), MPI_CHAR,
			       MPI_COMM_WORLD));
	for (int r = 0; r < test_size; r++)
		if (!id[0] || memcmp(all + (size_t)r * sizeof(id), id, sizeof(id)))
			same = 0;
	free(all);
	return same;
}

/* A barrier must not let anyone out before the last rank has entered:
 * rank 0 enters late.  On one machine each rank's exit is compared with
 * rank 0's entry on the shared clock.  Comparing how long each rank
 * waited with the delay instead is wrong when ranks outnumber cores: a
 * rank may leave the previous barrier long after rank 0 did (8 ranks on
 * 2 cores: more than 200 ms later), and then rightly waits less. */
static void coll_barrier(void)
{
	const double delay = 0.2;
	int shared_clock = coll_one_machine();

	for (int i = 0; i < 50; i++)
		TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
	for (int rep = 0; rep < 4; rep++) {
		double t0, t1, entered;

		TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
		t0 = coll_mono();
		if (test_rank == 0)
			usleep((useconds_t)(delay * 1e6));
		entered = coll_mono();
		TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
		t1 = coll_mono();
		TEST_MPI(MPI_Bcast(&entered, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
		if (shared_clock && t1 < entered)
			TEST_FAIL("Barrier released rank %d %.6f s before rank 0 "
				  "entered it", test_rank, entered - t1);
		if (!shared_clock && t1 - t0 < delay * 0.5)
			TEST_FAIL("Barrier released after %.3f s although "
				  "rank 0 entered %.3f s late", t1 - t0,
				  delay);
	}
}

int main(int argc, char **argv)
{
	test_init(&argc, &argv, "mpi_coll");
	coll_barrier();
	coll_allreduce();
	coll_alltoall();
	coll_bcast();
	coll_large();
	if (test_rank == 0)
		printf("mpi_coll: Barrier, Allreduce (int/double, sum/max), "
		       "Alltoall, Bcast (all roots), large Bcast/Allreduce "
		       "(16 MiB) ok\n");
	test_finish();
	return 0;
}
