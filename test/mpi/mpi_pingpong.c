/*
 * mpi_pingpong: the performance figures program.  Ranks 0 and 1 measure
 *   - ping-pong latency (one-way usec = round trip / 2), 1 B .. 1 MiB
 *   - windowed bandwidth and message rate: rank 0 keeps a window of
 *     PP_WINDOW non-blocking sends in flight, rank 1 pre-posts the
 *     matching receives and acknowledges each window with a 4-byte reply.
 * Not a pass/fail test, except that the first few iterations of every
 * size are data-checked.  Extra ranks just wait at the final barrier.
 * "-q" runs fewer iterations (smoke mode for the test script).
 */
#include "mpi_common.h"

#define PP_MAX (1u << 20)
#define PP_WINDOW 64
#define PP_CHECKED_ITERS 3

static int pp_quick;

static int pp_iters(size_t len)
{
	int n = len <= 8192 ? 2000 : len <= 65536 ? 200 : 40;

	if (pp_quick)
		n = n / 20 > 4 ? n / 20 : 4;
	return n;
}

static void pp_latency(char *sbuf, char *rbuf, size_t len)
{
	int peer = 1 - test_rank;
	int iters = pp_iters(len);
	int warm = pp_quick ? PP_CHECKED_ITERS : 10;
	double t0 = 0.0;
	MPI_Status st;

	/* the data is checked in the first warm-up rounds: filling and
	 * checking a pattern byte by byte costs more than the transfer
	 * (at 128 KiB it tripled the printed latency) */
	for (int it = -warm; it < iters; it++) {
		int checked = it < -warm + PP_CHECKED_ITERS;

		if (it == 0)
			t0 = MPI_Wtime();
		if (test_rank == 0) {
			if (checked)
				test_fill(sbuf, len, 0, it, (int)len);
			TEST_MPI(MPI_Send(sbuf, (int)len, MPI_BYTE, peer, 1,
					  MPI_COMM_WORLD));
			TEST_MPI(MPI_Recv(rbuf, (int)len, MPI_BYTE, peer, 1,
					  MPI_COMM_WORLD, &st));
			if (checked)
				TEST_CHECK_BUF(rbuf, len, 1, it, (int)len,
					       "pingpong reply");
		} else {
			TEST_MPI(MPI_Recv(rbuf, (int)len, MPI_BYTE, peer, 1,
					  MPI_COMM_WORLD, &st));
			if (checked) {
				TEST_CHECK_BUF(rbuf, len, 0, it, (int)len,
					       "pingpong ping");
				test_fill(sbuf, len, 1, it, (int)len);
			}
			TEST_MPI(MPI_Send(sbuf, (int)len, MPI_BYTE, peer, 1,
					  MPI_COMM_WORLD));
		}
	}
	if (test_rank == 0) {
		double us = (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);
		printf("%10zu %12.2f", len, us);
	}
}

static void pp_bandwidth(char *sbuf, char *rbuf, size_t len)
{
	MPI_Request req[PP_WINDOW];
	int peer = 1 - test_rank;
	int loops = pp_iters(len) / 10 + 2;
	int ack = 0;
	double t0 = 0.0, secs;

	for (int lp = -1; lp < loops; lp++) {
		if (lp == 0)
			t0 = MPI_Wtime();
		if (test_rank == 0) {
			/* All window slots share one buffer; only the first
			 * loop is checked, where each slot has its own
			 * pattern region (offset by slot). */
			for (int w = 0; w < PP_WINDOW; w++)
				TEST_MPI(MPI_Isend(sbuf, (int)len, MPI_BYTE,
						   peer, 2, MPI_COMM_WORLD,
						   &req[w]));
			TEST_MPI(MPI_Waitall(PP_WINDOW, req,
					     MPI_STATUSES_IGNORE));
			TEST_MPI(MPI_Recv(&ack, 1, MPI_INT, peer, 3,
					  MPI_COMM_WORLD, MPI_STATUS_IGNORE));
			if (ack != lp)
				TEST_FAIL("bandwidth ack %d, want %d", ack,
					  lp);
		} else {
			for (int w = 0; w < PP_WINDOW; w++)
				TEST_MPI(MPI_Irecv(rbuf + (size_t)w * len,
						   (int)len, MPI_BYTE, peer, 2,
						   MPI_COMM_WORLD, &req[w]));
			TEST_MPI(MPI_Waitall(PP_WINDOW, req,
					     MPI_STATUSES_IGNORE));
			if (lp == -1)
				for (int w = 0; w < PP_WINDOW; w++)
					TEST_CHECK_BUF(rbuf + (size_t)w * len,
						       len, 0, 99, (int)len,
						       "bandwidth window");
			ack = lp;
			TEST_MPI(MPI_Send(&ack, 1, MPI_INT, peer, 3,
					  MPI_COMM_WORLD));
		}
	}
	secs = MPI_Wtime() - t0;
	if (test_rank == 0) {
		double msgs = (double)loops * PP_WINDOW;
		printf(" %12.1f %14.0f\n", msgs * (double)len / secs / 1e6,
		       msgs / secs);
		fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	char *sbuf, *rbuf;
	size_t win_bytes;

	test_init(&argc, &argv, "mpi_pingpong");
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "-q"))
			pp_quick = 1;
	if (test_size < 2)
		TEST_FAIL("needs at least 2 ranks");
	/* The window receives land in distinct slots so that the data check
	 * of the first window sees every message; cap the slot memory. */
	win_bytes = (size_t)PP_MAX * PP_WINDOW;
	sbuf = test_malloc(PP_MAX);
	rbuf = test_malloc(win_bytes);
	if (test_rank == 0) {
		printf("# mpi_pingpong: %d ranks, window %d%s\n", test_size,
		       PP_WINDOW, pp_quick ? " (quick)" : "");
		printf("%10s %12s %12s %14s\n", "bytes", "lat_usec", "bw_MB/s",
		       "msgs/s");
	}
	if (test_rank < 2) {
		for (size_t len = 1; len <= PP_MAX; len <<= 1) {
			pp_latency(sbuf, rbuf, len);
			if (test_rank == 0)
				test_fill(sbuf, len, 0, 99, (int)len);
			pp_bandwidth(sbuf, rbuf, len);
		}
	}
	free(sbuf);
	free(rbuf);
	test_finish();
	return 0;
}
