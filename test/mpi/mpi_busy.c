/*
 * mpi_busy: a rank that computes is alive.  Ranks pair up (0-1, 2-3,
 * ...); the odd rank of each pair computes for OPX_MPI_BUSY_S seconds
 * (default 2) without a single MPI call, while its partner sends it a
 * burst of messages, eager and rendezvous sizes, and waits for them.
 * Then the odd rank receives and checks every one, and answers with a
 * burst of its own.  Run with FI_OPX_PEER_TIMEOUT below the busy time
 * (udp.sh does, across hosts): a provider that takes a peer that does
 * not progress, or whose ring is full, for a dead one fails here.
 */
#include <time.h>

#include "mpi_common.h"

#define BUSY_MSGS 64
#define BUSY_BIG (256u << 10)

static size_t busy_len(int i)
{
	/* inline, eager, around 16 KiB, and rendezvous */
	static const size_t lens[] = {8, 1000, 16383, 16385, 65536, BUSY_BIG};

	return lens[i % (int)(sizeof(lens) / sizeof(lens[0]))];
}

static void busy_compute(double secs)
{
	struct timespec t0, t;
	volatile double x = 1.0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 100000; i++)
			x = x * 1.0000001 + 1e-9;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 < secs);
}

static void busy_send(char **buf, int to, int salt)
{
	MPI_Request req[BUSY_MSGS];
	MPI_Status st[BUSY_MSGS];

	for (int i = 0; i < BUSY_MSGS; i++) {
		test_fill(buf[i], busy_len(i), test_rank, i, salt);
		TEST_MPI(MPI_Isend(buf[i], (int)busy_len(i), MPI_BYTE, to, i, MPI_COMM_WORLD,
				   &req[i]));
	}
	TEST_WAITALL(BUSY_MSGS, req, st);
}

static void busy_recv(char **buf, int from, int salt)
{
	MPI_Request req[BUSY_MSGS];
	MPI_Status st[BUSY_MSGS];

	for (int i = 0; i < BUSY_MSGS; i++) {
		memset(buf[i], 0, busy_len(i));
		TEST_MPI(MPI_Irecv(buf[i], (int)busy_len(i), MPI_BYTE, from, i, MPI_COMM_WORLD,
				   &req[i]));
	}
	TEST_WAITALL(BUSY_MSGS, req, st);
	for (int i = 0; i < BUSY_MSGS; i++)
		TEST_CHECK_BUF(buf[i], busy_len(i), from, i, salt, "busy message");
}

int main(int argc, char **argv)
{
	const char *env = getenv("OPX_MPI_BUSY_S");
	double secs = env ? atof(env) : 2.0;
	char *buf[BUSY_MSGS];
	int partner;

	test_init(&argc, &argv, "mpi_busy");
	for (int i = 0; i < BUSY_MSGS; i++) {
		buf[i] = malloc(busy_len(i));
		if (!buf[i])
			TEST_FAIL("out of memory");
	}
	partner = test_rank ^ 1;
	TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (partner < test_size) {
		if (test_rank & 1) {
			busy_compute(secs);
			busy_recv(buf, partner, 1);
			busy_send(buf, partner, 2);
		} else {
			busy_send(buf, partner, 1);
			busy_recv(buf, partner, 2);
		}
	}
	for (int i = 0; i < BUSY_MSGS; i++)
		free(buf[i]);
	test_finish();
	return 0;
}
