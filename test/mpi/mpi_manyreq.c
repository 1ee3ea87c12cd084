/*
 * mpi_manyreq: hundreds of outstanding requests.
 *
 * Each rank exchanges MR_NREQ messages with its ring neighbours, one
 * distinct tag per message and sizes mixed across the provider's protocol
 * boundaries.  Receives are posted in a shuffled order and sends issued in
 * a different shuffled order, so the matching engine must search its
 * posted-receive queue rather than hit the head every time.  The second
 * phase issues all sends first and posts the receives only after a
 * barrier, so eager messages take the unexpected-message path.
 */
#include "mpi_common.h"

#define MR_NREQ 512
#define MR_ROUNDS 2

static size_t mr_len(int tag)
{
	static const size_t lens[] = { 0,    1,	   8,	  17,	 64,   300,
				       4095, 4096, 4097, 9000, 16385,
				       65536 };
	return lens[((unsigned)tag * 7u) % (sizeof(lens) / sizeof(lens[0]))];
}

static void mr_shuffle(int *perm, int n, uint32_t seed)
{
	for (int i = 0; i < n; i++)
		perm[i] = i;
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(test_rand(&seed) % (uint32_t)(i + 1));
		int t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
}

struct mr_state {
	char *sbuf[MR_NREQ];
	char *rbuf[MR_NREQ];
	MPI_Request sreq[MR_NREQ];
	MPI_Request rreq[MR_NREQ];
	MPI_Status rst[MR_NREQ];
	int rperm[MR_NREQ];
	int sperm[MR_NREQ];
};

static void mr_post_recvs(struct mr_state *s, int left)
{
	for (int k = 0; k < MR_NREQ; k++) {
		int tag = s->rperm[k];
		size_t len = mr_len(tag);

		memset(s->rbuf[tag], 0xee, len + 1);
		TEST_MPI(MPI_Irecv(s->rbuf[tag], (int)len, MPI_BYTE, left, tag,
				   MPI_COMM_WORLD, &s->rreq[tag]));
	}
}

static void mr_post_sends(struct mr_state *s, int right, int round)
{
	for (int k = 0; k < MR_NREQ; k++) {
		int tag = s->sperm[k];
		size_t len = mr_len(tag);

		test_fill(s->sbuf[tag], len, test_rank, tag, round);
		TEST_MPI(MPI_Isend(s->sbuf[tag], (int)len, MPI_BYTE, right,
				   tag, MPI_COMM_WORLD, &s->sreq[tag]));
	}
}

static void mr_check(struct mr_state *s, int left, int round,
		     const char *what)
{
	for (int tag = 0; tag < MR_NREQ; tag++) {
		size_t len = mr_len(tag);
		int count;

		TEST_MPI(MPI_Get_count(&s->rst[tag], MPI_BYTE, &count));
		if ((size_t)count != len || s->rst[tag].MPI_TAG != tag ||
		    s->rst[tag].MPI_SOURCE != left)
			TEST_FAIL("%s round %d: req %d status count %d tag %d "
				  "src %d, want %zu/%d/%d", what, round, tag,
				  count, s->rst[tag].MPI_TAG,
				  s->rst[tag].MPI_SOURCE, len, tag, left);
		TEST_CHECK_BUF(s->rbuf[tag], len, left, tag, round, what);
		if ((unsigned char)s->rbuf[tag][len] != 0xee)
			TEST_FAIL("%s round %d: tag %d overran its buffer",
				  what, round, tag);
	}
}

int main(int argc, char **argv)
{
	struct mr_state *s;
	int right, left;

	test_init(&argc, &argv, "mpi_manyreq");
	s = calloc(1, sizeof(*s));
	if (!s)
		TEST_FAIL("calloc failed");
	right = (test_rank + 1) % test_size;
	left = (test_rank + test_size - 1) % test_size;
	for (int t = 0; t < MR_NREQ; t++) {
		s->sbuf[t] = test_malloc(mr_len(t));
		s->rbuf[t] = test_malloc(mr_len(t) + 1);
	}

	for (int round = 0; round < MR_ROUNDS; round++) {
		/* Expected path: all receives posted before any send. */
		mr_shuffle(s->rperm, MR_NREQ, 0x1234u + (uint32_t)round * 77u +
					       (uint32_t)test_rank);
		mr_shuffle(s->sperm, MR_NREQ, 0xbeefu + (uint32_t)round * 31u +
					       (uint32_t)test_rank * 5u);
		mr_post_recvs(s, left);
		TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
		mr_post_sends(s, right, round);
		TEST_MPI(MPI_Waitall(MR_NREQ, s->rreq, s->rst));
		TEST_MPI(MPI_Waitall(MR_NREQ, s->sreq, MPI_STATUSES_IGNORE));
		mr_check(s, left, round, "pre-posted");
		TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));

		/* Unexpected path: sends first, receives after a barrier. */
		mr_post_sends(s, right, round + 100);
		TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
		mr_post_recvs(s, left);
		TEST_MPI(MPI_Waitall(MR_NREQ, s->rreq, s->rst));
		TEST_MPI(MPI_Waitall(MR_NREQ, s->sreq, MPI_STATUSES_IGNORE));
		mr_check(s, left, round + 100, "unexpected");
		TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));

		/* Mixed: half the receives posted, then all sends, then the
		 * rest, completing with Testsome to exercise partial
		 * completion. */
		mr_shuffle(s->rperm, MR_NREQ, 0x5151u + (uint32_t)round);
		for (int k = 0; k < MR_NREQ; k++)
			s->rreq[k] = MPI_REQUEST_NULL;
		{
			int half = MR_NREQ / 2;
			int done = 0, outcount;
			int idx[MR_NREQ];
			MPI_Status st[MR_NREQ];
			double deadline = MPI_Wtime() + 60.0;

			for (int k = 0; k < half; k++) {
				int tag = s->rperm[k];
				memset(s->rbuf[tag], 0xee, mr_len(tag) + 1);
				TEST_MPI(MPI_Irecv(s->rbuf[tag],
						   (int)mr_len(tag), MPI_BYTE,
						   left, tag, MPI_COMM_WORLD,
						   &s->rreq[tag]));
			}
			mr_post_sends(s, right, round + 200);
			for (int k = half; k < MR_NREQ; k++) {
				int tag = s->rperm[k];
				memset(s->rbuf[tag], 0xee, mr_len(tag) + 1);
				TEST_MPI(MPI_Irecv(s->rbuf[tag],
						   (int)mr_len(tag), MPI_BYTE,
						   left, tag, MPI_COMM_WORLD,
						   &s->rreq[tag]));
			}
			while (done < MR_NREQ) {
				TEST_MPI(MPI_Testsome(MR_NREQ, s->rreq,
						      &outcount, idx, st));
				if (outcount == MPI_UNDEFINED)
					TEST_FAIL("Testsome: no active "
						  "requests after %d", done);
				for (int k = 0; k < outcount; k++)
					s->rst[idx[k]] = st[k];
				done += outcount;
				if (MPI_Wtime() > deadline)
					TEST_FAIL("Testsome: %d of %d after "
						  "60 s", done, MR_NREQ);
			}
			TEST_MPI(MPI_Waitall(MR_NREQ, s->sreq,
					     MPI_STATUSES_IGNORE));
			mr_check(s, left, round + 200, "mixed");
		}
		TEST_MPI(MPI_Barrier(MPI_COMM_WORLD));
	}
	if (test_rank == 0)
		printf("mpi_manyreq: %d requests x %d rounds (pre-posted, "
		       "unexpected, mixed), ok\n", MR_NREQ, MR_ROUNDS);
	for (int t = 0; t < MR_NREQ; t++) {
		free(s->sbuf[t]);
		free(s->rbuf[t]);
	}
	free(s);
	test_finish();
	return 0;
}
