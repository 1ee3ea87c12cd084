/*
 * mpi_ring: every rank passes a message to its right neighbour, for sizes
 * 0 B .. 1 MiB (powers of two plus +-1 around the protocol thresholds a
 * provider is likely to have: 16 B inline, 4 KiB / 8 KiB packet MTU,
 * 16 KiB and 64 KiB eager/rendezvous switch points), once with blocking
 * calls and once with non-blocking ones.  The data pattern depends on the
 * sender, the iteration and the offset.
 */
#include "mpi_common.h"

#define RING_MAX (1u << 20)
#define RING_ITERS 3

static size_t ring_sizes[128];
static int ring_nsizes;

static void ring_add(size_t s)
{
	for (int i = 0; i < ring_nsizes; i++)
		if (ring_sizes[i] == s)
			return;
	ring_sizes[ring_nsizes++] = s;
}

static int ring_cmp(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return x < y ? -1 : x > y;
}

static void ring_build_sizes(void)
{
	static const size_t edges[] = { 16, 4096, 8192, 16384, 65536 };

	ring_add(0);
	for (size_t s = 1; s <= RING_MAX; s <<= 1)
		ring_add(s);
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
		ring_add(edges[i] - 1);
		ring_add(edges[i] + 1);
	}
	qsort(ring_sizes, (size_t)ring_nsizes, sizeof(size_t), ring_cmp);
}

/* Blocking ring: rank 0 sends first, everyone else receives first, so the
 * ring cannot deadlock even when large sends only complete once matched. */
static void ring_blocking(char *sbuf, char *rbuf, size_t len, int iter,
			  int right, int left)
{
	MPI_Status st;
	int count;
	int tag = 100 + iter;

	test_fill(sbuf, len, test_rank, iter, (int)len);
	memset(rbuf, 0xee, len + 1);
	if (test_size == 1) {
		/* a blocking send to oneself may wait for its own receive */
		TEST_MPI(MPI_Sendrecv(sbuf, (int)len, MPI_BYTE, right, tag,
				      rbuf, (int)len, MPI_BYTE, left, tag,
				      MPI_COMM_WORLD, &st));
	} else if (test_rank == 0) {
		TEST_MPI(MPI_Send(sbuf, (int)len, MPI_BYTE, right, tag,
				  MPI_COMM_WORLD));
		TEST_MPI(MPI_Recv(rbuf, (int)len, MPI_BYTE, left, tag,
				  MPI_COMM_WORLD, &st));
	} else {
		TEST_MPI(MPI_Recv(rbuf, (int)len, MPI_BYTE, left, tag,
				  MPI_COMM_WORLD, &st));
		TEST_MPI(MPI_Send(sbuf, (int)len, MPI_BYTE, right, tag,
				  MPI_COMM_WORLD));
	}
	TEST_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
	if ((size_t)count != len || st.MPI_SOURCE != left || st.MPI_TAG != tag)
		TEST_FAIL("blocking len %zu: status count %d src %d tag %d, "
			  "want %zu/%d/%d", len, count, st.MPI_SOURCE,
			  st.MPI_TAG, len, left, tag);
	TEST_CHECK_BUF(rbuf, len, left, iter, (int)len, "blocking ring");
	if ((unsigned char)rbuf[len] != 0xee)
		TEST_FAIL("blocking len %zu: receive wrote past the end", len);
}

/* Non-blocking ring: receive posted before the send, both in flight at the
 * same time in both directions (left and right neighbours). */
static void ring_nonblocking(char *sbuf, char *rbuf, char *sbuf2,
			     char *rbuf2, size_t len, int iter, int right,
			     int left)
{
	MPI_Request req[4];
	MPI_Status st[4];
	int count;

	test_fill(sbuf, len, test_rank, iter, (int)len + 1);
	test_fill(sbuf2, len, test_rank, iter, (int)len + 2);
	memset(rbuf, 0xee, len + 1);
	memset(rbuf2, 0xee, len + 1);
	TEST_MPI(MPI_Irecv(rbuf, (int)len, MPI_BYTE, left, 7, MPI_COMM_WORLD,
			   &req[0]));
	TEST_MPI(MPI_Irecv(rbuf2, (int)len, MPI_BYTE, right, 8,
			   MPI_COMM_WORLD, &req[1]));
	TEST_MPI(MPI_Isend(sbuf, (int)len, MPI_BYTE, right, 7, MPI_COMM_WORLD,
			   &req[2]));
	TEST_MPI(MPI_Isend(sbuf2, (int)len, MPI_BYTE, left, 8,
			   MPI_COMM_WORLD, &req[3]));
	TEST_MPI(MPI_Waitall(4, req, st));
	TEST_MPI(MPI_Get_count(&st[0], MPI_BYTE, &count));
	if ((size_t)count != len || st[0].MPI_SOURCE != left)
		TEST_FAIL("nonblocking len %zu: count %d src %d", len, count,
			  st[0].MPI_SOURCE);
	TEST_MPI(MPI_Get_count(&st[1], MPI_BYTE, &count));
	if ((size_t)count != len || st[1].MPI_SOURCE != right)
		TEST_FAIL("nonblocking len %zu (reverse): count %d src %d",
			  len, count, st[1].MPI_SOURCE);
	TEST_CHECK_BUF(rbuf, len, left, iter, (int)len + 1,
		       "non-blocking ring (from left)");
	TEST_CHECK_BUF(rbuf2, len, right, iter, (int)len + 2,
		       "non-blocking ring (from right)");
	if ((unsigned char)rbuf[len] != 0xee ||
	    (unsigned char)rbuf2[len] != 0xee)
		TEST_FAIL("nonblocking len %zu: receive wrote past the end",
			  len);
}

int main(int argc, char **argv)
{
	char *sbuf, *rbuf, *sbuf2, *rbuf2;
	int right, left;

	test_init(&argc, &argv, "mpi_ring");
	ring_build_sizes();
	right = (test_rank + 1) % test_size;
	left = (test_rank + test_size - 1) % test_size;
	sbuf = test_malloc(RING_MAX + 2);
	rbuf = test_malloc(RING_MAX + 2);
	sbuf2 = test_malloc(RING_MAX + 2);
	rbuf2 = test_malloc(RING_MAX + 2);

	for (int i = 0; i < ring_nsizes; i++) {
		size_t len = ring_sizes[i];
		for (int it = 0; it < RING_ITERS; it++)
			ring_blocking(sbuf, rbuf, len, it, right, left);
	}
	TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
	for (int i = 0; i < ring_nsizes; i++) {
		size_t len = ring_sizes[i];
		for (int it = 0; it < RING_ITERS; it++)
			ring_nonblocking(sbuf, rbuf, sbuf2, rbuf2, len, it,
					 right, left);
	}
	if (test_rank == 0)
		printf("mpi_ring: %d sizes x %d iterations, blocking and "
		       "non-blocking, ok\n", ring_nsizes, RING_ITERS);
	free(sbuf);
	free(rbuf);
	free(sbuf2);
	free(rbuf2);
	test_finish();
	return 0;
}
