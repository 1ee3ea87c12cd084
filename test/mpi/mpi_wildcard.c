/*
 * mpi_wildcard: receives with MPI_ANY_SOURCE / MPI_ANY_TAG.
 *
 * Phase 1 (fan-in): every rank sends numbered messages to rank 0, which
 * receives them all with wildcards.  Phase 2 (all-to-all): every rank sends
 * numbered messages to every other rank and receives with wildcards.
 *
 * The sequence number travels in the tag, so zero-byte messages are
 * numbered too.  MPI's non-overtaking rule says messages from one sender
 * on one communicator that match the same receive arrive in send order;
 * since every receive here is a full wildcard, per-source arrival order
 * must equal send order.  Counting per source also proves every message
 * arrives exactly once (a duplicate or loss breaks the sequence).
 */
#include "mpi_common.h"

#define WC_NMSG_FANIN 300
#define WC_NMSG_ALL 120
#define WC_MAXLEN (64 * 1024)

static size_t wc_len(int src, int seq)
{
	static const size_t lens[] = { 0,    1,     7,	   16,	  17,	64,
				       255,  1024,  4095,  4096, 4097, 8192,
				       8193, 16384, 30000, 65535, 65536 };
	size_t n = sizeof(lens) / sizeof(lens[0]);
	return lens[((unsigned)seq * 5u + (unsigned)src * 3u) % n];
}

/* Receive nexp messages with full wildcards; expected[src] is the number of
 * messages src sends to us. */
static void wc_receive_all(int nexp, const int *expected, int phase)
{
	char *buf = test_malloc(WC_MAXLEN + 1);
	int *next = calloc((size_t)test_size, sizeof(int));
	MPI_Status st;
	int count;

	if (!next)
		TEST_FAIL("calloc failed");
	for (int i = 0; i < nexp; i++) {
		int src, seq;
		size_t want;

		memset(buf, 0xee, WC_MAXLEN + 1);
		TEST_MPI(MPI_Recv(buf, WC_MAXLEN, MPI_BYTE, MPI_ANY_SOURCE,
				  MPI_ANY_TAG, MPI_COMM_WORLD, &st));
		src = st.MPI_SOURCE;
		seq = st.MPI_TAG;
		if (src < 0 || src >= test_size || src == test_rank ||
		    expected[src] == 0)
			TEST_FAIL("phase %d: message %d from unexpected source "
				  "%d", phase, i, src);
		if (seq != next[src])
			TEST_FAIL("phase %d: from rank %d got seq %d, expected "
				  "%d (ordering violated, lost or duplicated "
				  "message)", phase, src, seq, next[src]);
		next[src]++;
		if (next[src] > expected[src])
			TEST_FAIL("phase %d: too many messages from rank %d",
				  phase, src);
		TEST_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
		want = wc_len(src, seq);
		if ((size_t)count != want)
			TEST_FAIL("phase %d: src %d seq %d: count %d, want %zu",
				  phase, src, seq, count, want);
		TEST_CHECK_BUF(buf, want, src, seq, phase * 1000 + test_rank,
			       "wildcard receive");
		if ((unsigned char)buf[want] != 0xee)
			TEST_FAIL("phase %d: src %d seq %d wrote past length",
				  phase, src, seq);
	}
	for (int r = 0; r < test_size; r++)
		if (next[r] != expected[r])
			TEST_FAIL("phase %d: got %d of %d messages from %d",
				  phase, next[r], expected[r], r);
	free(next);
	free(buf);
}

/* Non-blocking sends of nmsg numbered messages to dst; caller waits. */
static void wc_send_all(int dst, int nmsg, int phase, char **bufs,
			MPI_Request *reqs)
{
	for (int seq = 0; seq < nmsg; seq++) {
		size_t len = wc_len(test_rank, seq);

		bufs[seq] = test_malloc(len);
		test_fill(bufs[seq], len, test_rank, seq, phase * 1000 + dst);
		TEST_MPI(MPI_Isend(bufs[seq], (int)len, MPI_BYTE, dst, seq,
				   MPI_COMM_WORLD, &reqs[seq]));
	}
}

static void wc_check_no_leftover(const char *what)
{
	int flag = 1;
	MPI_Status st;

	/* Every expected message was consumed, so anything still matching
	 * is a duplicate delivery. */
	for (int i = 0; i < 100 && flag; i++) {
		TEST_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG,
				    MPI_COMM_WORLD, &flag, &st));
		if (flag)
			TEST_FAIL("%s: leftover message from %d tag %d", what,
				  st.MPI_SOURCE, st.MPI_TAG);
	}
}

static void wc_phase_fanin(void)
{
	if (test_rank == 0) {
		int *expected = calloc((size_t)test_size, sizeof(int));
		if (!expected)
			TEST_FAIL("calloc failed");
		for (int r = 1; r < test_size; r++)
			expected[r] = WC_NMSG_FANIN;
		wc_receive_all(WC_NMSG_FANIN * (test_size - 1), expected, 1);
		free(expected);
	} else {
		char **bufs = calloc(WC_NMSG_FANIN, sizeof(char *));
		MPI_Request *reqs = calloc(WC_NMSG_FANIN, sizeof(*reqs));
		if (!bufs || !reqs)
			TEST_FAIL("calloc failed");
		wc_send_all(0, WC_NMSG_FANIN, 1, bufs, reqs);
		TEST_MPI(MPI_Waitall(WC_NMSG_FANIN, reqs,
				     MPI_STATUSES_IGNORE));
		for (int i = 0; i < WC_NMSG_FANIN; i++)
			free(bufs[i]);
		free(bufs);
		free(reqs);
	}
	TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
	wc_check_no_leftover("fan-in");
	TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void wc_phase_alltoall(void)
{
	int npeer = test_size - 1;
	int nreq = npeer * WC_NMSG_ALL;
	char **bufs = calloc((size_t)nreq + 1, sizeof(char *));
	MPI_Request *reqs = calloc((size_t)nreq + 1, sizeof(*reqs));
	int *expected = calloc((size_t)test_size, sizeof(int));
	int k = 0;

	if (!bufs || !reqs || !expected)
		TEST_FAIL("calloc failed");
	/* Start with the next rank so not every rank hammers rank 0 first. */
	for (int d = 1; d <= npeer; d++) {
		int dst = (test_rank + d) % test_size;
		wc_send_all(dst, WC_NMSG_ALL, 2, &bufs[k], &reqs[k]);
		k += WC_NMSG_ALL;
		expected[dst] = WC_NMSG_ALL;
	}
	wc_receive_all(nreq, expected, 2);
	TEST_MPI(MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE));
	for (int i = 0; i < nreq; i++)
		free(bufs[i]);
	free(bufs);
	free(reqs);
	free(expected);
	TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
	wc_check_no_leftover("all-to-all");
}

int main(int argc, char **argv)
{
	test_init(&argc, &argv, "mpi_wildcard");
	if (test_size < 2)
		TEST_FAIL("needs at least 2 ranks");
	wc_phase_fanin();
	wc_phase_alltoall();
	if (test_rank == 0)
		printf("mpi_wildcard: fan-in %d msgs/rank, all-to-all %d "
		       "msgs/pair, ordering and contents ok\n",
		       WC_NMSG_FANIN, WC_NMSG_ALL);
	test_finish();
	return 0;
}
