/*
 * mpi_threads.c - MPI_THREAD_MULTIPLE: several threads per rank send and
 * receive at the same time through one provider endpoint (the ofi MTL
 * then asks for FI_THREAD_SAFE).  Each thread exchanges a numbered stream
 * with its own tag range around a ring, across every protocol size, and
 * checks every byte.
 */
#include <pthread.h>

#include "mpi_common.h"

#define NTHREADS 4
#define NMSGS 200

static const size_t sizes[] = {8, 1000, 9000, 100000};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

struct targ {
	int t;
};

static void *worker(void *p)
{
	const struct targ *a = p;
	int right = (test_rank + 1) % test_size;
	int left = (test_rank - 1 + test_size) % test_size;
	unsigned char *sbuf = test_malloc(100000);
	unsigned char *rbuf = test_malloc(100000);

	for (int i = 0; i < NMSGS; i++) {
		size_t len = sizes[(i + a->t) % NSIZES];
		int tag = a->t * 10000 + i;
		MPI_Request req[2];
		MPI_Status st[2];
		int count;

		test_fill(sbuf, len, test_rank, i, a->t);
		TEST_MPI(MPI_Irecv(rbuf, (int)len, MPI_BYTE, left, tag, MPI_COMM_WORLD, &req[0]));
		TEST_MPI(MPI_Isend(sbuf, (int)len, MPI_BYTE, right, tag, MPI_COMM_WORLD, &req[1]));
		TEST_MPI(MPI_Waitall(2, req, st));
		TEST_MPI(MPI_Get_count(&st[0], MPI_BYTE, &count));
		if ((size_t)count != len || st[0].MPI_TAG != tag || st[0].MPI_SOURCE != left)
			TEST_FAIL("thread %d message %d: count %d tag %d source %d", a->t, i, count,
				  st[0].MPI_TAG, st[0].MPI_SOURCE);
		TEST_CHECK_BUF(rbuf, len, left, i, a->t, "threaded receive");
	}
	free(sbuf);
	free(rbuf);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *env = getenv("OPX_MPI_TEST_ALARM");
	unsigned secs = env ? (unsigned)strtoul(env, NULL, 10) : 0;
	pthread_t th[NTHREADS];
	struct targ args[NTHREADS];
	int provided = 0;

	test_name = "mpi_threads";
	signal(SIGALRM, test_alarm_handler);
	alarm(secs ? secs : TEST_ALARM_S);
	TEST_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	TEST_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &test_rank));
	TEST_MPI(MPI_Comm_size(MPI_COMM_WORLD, &test_size));
	if (provided < MPI_THREAD_MULTIPLE)
		TEST_FAIL("MPI_THREAD_MULTIPLE not provided (got %d)", provided);

	for (int t = 0; t < NTHREADS; t++) {
		args[t].t = t;
		if (pthread_create(&th[t], NULL, worker, &args[t]))
			TEST_FAIL("pthread_create failed");
	}
	for (int t = 0; t < NTHREADS; t++)
		pthread_join(th[t], NULL);
	test_finish();
	return 0;
}
